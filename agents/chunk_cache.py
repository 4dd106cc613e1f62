"""In-memory LRUs of fixed-size chunks of object-store files, bounded by bytes.

Fetches read byte ranges of segment files; reading whole aligned chunks (4 MiB by
default) turns many small consumer reads into few object-store GETs (seed 002: "load
data in large chunks"). Files are immutable, so a cached chunk is never stale; only
memory bounds how long it stays.

Two budgets: `owned` holds the chunks this agent is responsible for in its zone's
distributed cache (and the files it just wrote); `copies` is a small LRU of chunks
borrowed from the zone's other agents, so that several consumers reading the same
chunk here ask its owner once. Loading, and who loads, is `agents.zone_cache`'s job.
"""

from __future__ import annotations

from cachetools import LRUCache

from agents.metrics import Gauge

DEFAULT_CHUNK_BYTES = 4 * 1024 * 1024

_CACHED_BYTES = Gauge("floe_cache_bytes", "Bytes held by the chunk cache, by tier.", ("tier",))

ChunkKey = tuple[str, int]  # (object key, chunk index)


class _Lru:
    """One tier: cachetools' LRU weighing each chunk by its length, and its gauge."""

    def __init__(self, name: str, max_bytes: int) -> None:
        self.name = name
        self.max_bytes = max_bytes
        self.chunks: LRUCache[ChunkKey, memoryview] = LRUCache(
            maxsize=max(max_bytes, 0), getsizeof=len
        )

    @property
    def size(self) -> int:
        return int(self.chunks.currsize)

    def get(self, chunk_key: ChunkKey) -> memoryview | None:
        return self.chunks.get(chunk_key)  # a hit is marked recently used

    def put(self, chunk_key: ChunkKey, chunk: memoryview) -> None:
        if self.max_bytes <= 0 or len(chunk) > self.max_bytes:
            return  # larger than the whole tier (or the tier is off): not kept
        self.chunks[chunk_key] = chunk  # evicts the least recently used to fit
        _CACHED_BYTES.set(self.size, self.name)

    def pop(self, chunk_key: ChunkKey) -> None:
        if self.chunks.pop(chunk_key, None) is not None:
            _CACHED_BYTES.set(self.size, self.name)


class ChunkCache:
    """`cache.get((key, index))` → the chunk or None; `cache.put(...)` keeps one."""

    def __init__(
        self, *, max_bytes: int, copy_bytes: int, chunk_bytes: int = DEFAULT_CHUNK_BYTES
    ) -> None:
        self.chunk_bytes = chunk_bytes
        self.owned = _Lru("owned", max_bytes)
        self.copies = _Lru("copies", copy_bytes)

    @property
    def size(self) -> int:
        return self.owned.size + self.copies.size

    def get(self, chunk_key: ChunkKey) -> memoryview | None:
        """The cached chunk, whichever tier holds it (marked recently used)."""
        return self.owned.get(chunk_key) or self.copies.get(chunk_key)

    def put(self, chunk_key: ChunkKey, chunk: bytes | memoryview, *, owned: bool) -> memoryview:
        """Keep a chunk in the owned tier or among the copies; returns it as a view."""
        view = memoryview(chunk)
        if owned:
            self.copies.pop(chunk_key)
            self.owned.put(chunk_key, view)
        elif chunk_key not in self.owned.chunks:
            self.copies.put(chunk_key, view)
        return view

    def insert_file(self, key: str, data: bytes) -> None:
        """Cache a whole file this agent just wrote, so its tailing consumers never GET
        it. The chunks are views of `data`: no copy."""
        view = memoryview(data)
        for index, start in enumerate(range(0, len(data), self.chunk_bytes)):
            self.owned.put((key, index), view[start : start + self.chunk_bytes])

    def chunk_range(self, pos: int, length: int) -> range:
        """The indexes of the chunks covering [pos, pos+length)."""
        return range(pos // self.chunk_bytes, (pos + length - 1) // self.chunk_bytes + 1)
