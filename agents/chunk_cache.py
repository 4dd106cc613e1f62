"""An in-memory LRU cache of fixed-size chunks of object-store files, bounded by bytes.

Fetches read byte ranges of segment files; reading whole aligned chunks (4 MiB by
default) turns many small consumer reads into few object-store GETs (seed 002: "load
data in large chunks"). Concurrent misses of one chunk share a single load. Files are
immutable, so a cached chunk is never stale; only memory bounds how long it stays.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Executor

from agents.metrics import Counter, Gauge

DEFAULT_CHUNK_BYTES = 4 * 1024 * 1024

_REQUESTS = Counter(
    "floe_cache_requests_total", "Chunk cache lookups, by result (hit/miss).", ("result",)
)
_CACHED_BYTES = Gauge("floe_cache_bytes", "Bytes held by the chunk cache.")
_LOAD_BYTES = Counter("floe_cache_loaded_bytes_total", "Bytes read from object storage.")

ChunkKey = tuple[str, int]  # (object key, chunk index)


class ChunkCache:
    """`await cache.read(key, pos, length)` → list of memoryviews covering that range."""

    def __init__(
        self,
        get_range: Callable[[str, int, int], bytes],
        *,
        max_bytes: int,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        executor: Executor | None = None,
    ) -> None:
        self._get_range = get_range
        self.max_bytes = max_bytes
        self.chunk_bytes = chunk_bytes
        self._executor = executor
        self._chunks: OrderedDict[ChunkKey, memoryview] = OrderedDict()
        self._loading: dict[ChunkKey, asyncio.Future[bytes]] = {}
        self.size = 0

    def insert_file(self, key: str, data: bytes) -> None:
        """Cache a whole file this agent just wrote, so tailing consumers never GET it.

        The chunks are views of `data`: no copy."""
        view = memoryview(data)
        for index, start in enumerate(range(0, len(data), self.chunk_bytes)):
            self._store((key, index), view[start : start + self.chunk_bytes])

    async def read(self, key: str, pos: int, length: int) -> list[memoryview]:
        """The bytes [pos, pos+length) of object `key`, as views of cached chunks.

        Raises `EOFError` when the object is shorter than the range (a wrong pointer)
        and whatever the store raises (e.g. `ObjectNotFound`).
        """
        if length <= 0:
            return []
        first = pos // self.chunk_bytes
        last = (pos + length - 1) // self.chunk_bytes
        chunks = [await self._chunk(key, index) for index in range(first, last + 1)]
        pieces = []
        for index, chunk in zip(range(first, last + 1), chunks, strict=True):
            chunk_start = index * self.chunk_bytes
            lo = max(pos, chunk_start) - chunk_start
            hi = min(pos + length, chunk_start + self.chunk_bytes) - chunk_start
            if hi > len(chunk):
                raise EOFError(f"{key}: range {pos}+{length} is past the end of the object")
            pieces.append(chunk[lo:hi])
        return pieces

    def prefetch(self, key: str, pos: int, length: int) -> list[asyncio.Future[bytes]]:
        """Start loading the chunks of a range without waiting, so that reads of many
        ranges overlap their GETs. Returns the futures (already-cached chunks: none)."""
        futures = []
        for index in range(pos // self.chunk_bytes, (pos + length - 1) // self.chunk_bytes + 1):
            if (key, index) not in self._chunks:
                futures.append(self._start_load((key, index)))
        return futures

    async def _chunk(self, key: str, index: int) -> memoryview:
        chunk_key = (key, index)
        chunk = self._chunks.get(chunk_key)
        if chunk is not None:
            self._chunks.move_to_end(chunk_key)
            _REQUESTS.inc(1, "hit")
            return chunk
        # shield: a cancelled reader must not cancel a load other readers share.
        return memoryview(await asyncio.shield(self._start_load(chunk_key)))

    def _start_load(self, chunk_key: ChunkKey) -> asyncio.Future[bytes]:
        future = self._loading.get(chunk_key)
        if future is not None:
            _REQUESTS.inc(1, "hit")  # a miss already being served counts once
            return future
        _REQUESTS.inc(1, "miss")
        loop = asyncio.get_running_loop()
        key, index = chunk_key
        future = loop.run_in_executor(
            self._executor, self._get_range, key, index * self.chunk_bytes, self.chunk_bytes
        )
        self._loading[chunk_key] = future

        def done(fut: asyncio.Future) -> None:
            self._loading.pop(chunk_key, None)
            if not fut.cancelled() and fut.exception() is None:
                data = fut.result()
                _LOAD_BYTES.inc(len(data))
                self._store(chunk_key, memoryview(data))

        future.add_done_callback(done)
        return future

    def _store(self, chunk_key: ChunkKey, chunk: memoryview) -> None:
        if self.max_bytes <= 0:
            return
        old = self._chunks.pop(chunk_key, None)
        if old is not None:
            self.size -= len(old)
        self._chunks[chunk_key] = chunk
        self.size += len(chunk)
        while self.size > self.max_bytes and self._chunks:
            _, evicted = self._chunks.popitem(last=False)
            self.size -= len(evicted)
        _CACHED_BYTES.set(self.size)
