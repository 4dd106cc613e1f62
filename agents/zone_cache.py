"""The zone's distributed file cache (seed 002, "Read Path").

The agents of a zone share out the (file, chunk) keys by rendezvous hashing
(`agents.groups.ring.rendezvous_weight`, the one consistent-hashing approach): membership
is the control plane's live-agent list for this zone, less the agents this one has found
unreachable. A journal entry's chunks (lightning topics, Ripcord) are owned by the agent
that wrote it while it is a member: the writer keeps every file it writes in its cache
from its PUT on, so the records journaled during a control-plane outage, read all at
once when it returns, come from its memory instead of the bucket. The owner of a chunk loads it from the
bucket with one ranged GET and keeps it; every other agent of the zone asks the owner
over the peer channel and keeps a small local copy. Concurrent misses share one load
on each agent (single-flight), so one chunk costs one GET per zone however many
agents, consumers and partitions read it.

A peer that fails or is slow never fails a Fetch: the asker reads the chunk from the
bucket itself, and leaves that peer out of the ring for a few seconds; the ring follows
the live-agent list on the next membership change.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor

from agents.chunk_cache import ChunkCache, ChunkKey
from agents.groups.ring import Peer, rendezvous_weight
from agents.peers.client import PeerClient, PeerError
from agents.read_stats import CACHE_REQUESTS, PEER_FAILURES, PEER_FETCHED_BYTES, PEER_SERVED_BYTES
from core.journal_keys import parse_entry_key
from core.storage import ObjectStore

log = logging.getLogger(__name__)

DEFAULT_PEER_TIMEOUT_S = 5.0
SUSPECT_FOR_S = 5.0


class ChunkRing:
    """Who owns each chunk among the agents of this zone."""

    def __init__(self, me: str) -> None:
        self.me = me
        self._members: tuple[str, ...] = ()
        self._peers: dict[str, Peer] = {}

    def update(self, peers: Sequence[Peer]) -> None:
        """Take the zone's reachable agents (this one included)."""
        self._peers = {p.agent_id: p for p in peers}
        self._members = tuple(sorted({self.me, *self._peers}))

    @property
    def members(self) -> tuple[str, ...]:
        return self._members

    def owner(self, key: str, index: int) -> Peer | None:
        """The owning peer, or None when this agent owns the chunk."""
        if len(self._members) <= 1:
            return None
        journal = parse_entry_key(key)
        if journal is not None and journal[0].agent_id in self._members:
            # A journal entry's writer owns it: it put the file in its cache at its PUT.
            writer = journal[0].agent_id
            return None if writer == self.me else self._peers.get(writer)
        chunk = f"{key}#{index}"
        agent_id = max(self._members, key=lambda member: rendezvous_weight(chunk, member))
        return None if agent_id == self.me else self._peers.get(agent_id)


class ZoneCache:
    """`await cache.read(key, pos, length)` → memoryviews covering that range."""

    def __init__(
        self,
        store: ObjectStore,
        chunks: ChunkCache,
        *,
        ring: ChunkRing,
        peers: PeerClient | None,
        zone_peers: Callable[[], Sequence[Peer]] = lambda: (),
        executor: Executor | None = None,
        peer_timeout_s: float = DEFAULT_PEER_TIMEOUT_S,
    ) -> None:
        self.store = store
        self.chunks = chunks
        self.ring = ring
        self.peers = peers
        self._zone_peers = zone_peers
        self._executor = executor
        self.peer_timeout_s = peer_timeout_s
        self._loading: dict[ChunkKey, asyncio.Future[memoryview]] = {}
        self._bucket_loading: dict[ChunkKey, asyncio.Future[memoryview]] = {}
        self._suspects: dict[str, float] = {}  # agent id -> until (monotonic)

    @property
    def chunk_bytes(self) -> int:
        return self.chunks.chunk_bytes

    def insert_file(self, key: str, data: bytes) -> None:
        """A file this agent just wrote (see `ChunkCache.insert_file`)."""
        self.chunks.insert_file(key, data)

    def refresh_ring(self) -> None:
        """Follow the zone's membership, leaving out peers that just failed us."""
        now = time.monotonic()
        self._suspects = {a: t for a, t in self._suspects.items() if t > now}
        self.ring.update([p for p in self._zone_peers() if p.agent_id not in self._suspects])

    # -- reading ------------------------------------------------------------------------

    async def read(self, key: str, pos: int, length: int) -> list[memoryview]:
        """The bytes [pos, pos+length) of object `key`, as views of cached chunks.

        Raises `EOFError` when the object is shorter than the range (a wrong pointer)
        and whatever the store raises (e.g. `ObjectNotFound`).
        """
        if length <= 0:
            return []
        size = self.chunk_bytes
        pieces = []
        for index in self.chunks.chunk_range(pos, length):
            chunk = await self._chunk((key, index))
            chunk_start = index * size
            lo = max(pos, chunk_start) - chunk_start
            hi = min(pos + length, chunk_start + size) - chunk_start
            if hi > len(chunk):
                raise EOFError(f"{key}: range {pos}+{length} is past the end of the object")
            pieces.append(chunk[lo:hi])
        return pieces

    def prefetch(self, key: str, pos: int, length: int) -> None:
        """Start loading the chunks of a range without waiting, so that reads of many
        ranges overlap their GETs and peer calls."""
        for index in self.chunks.chunk_range(pos, length):
            if self.chunks.get((key, index)) is None:
                self._start_load((key, index))

    async def _chunk(self, chunk_key: ChunkKey) -> memoryview:
        chunk = self.chunks.get(chunk_key)
        if chunk is not None:
            CACHE_REQUESTS.inc(1, "hit")
            return chunk
        # shield: a cancelled reader must not cancel a load other readers share.
        return await asyncio.shield(self._start_load(chunk_key))

    def _start_load(self, chunk_key: ChunkKey) -> asyncio.Future[memoryview]:
        future = self._loading.get(chunk_key)
        if future is not None:
            CACHE_REQUESTS.inc(1, "hit")  # a miss already being served counts once
            return future
        CACHE_REQUESTS.inc(1, "miss")
        future = asyncio.ensure_future(self._load(chunk_key))
        self._loading[chunk_key] = future
        future.add_done_callback(lambda f: self._load_done(chunk_key, f))
        return future

    def _load_done(self, chunk_key: ChunkKey, future: asyncio.Future[memoryview]) -> None:
        self._loading.pop(chunk_key, None)
        if not future.cancelled():
            future.exception()  # a prefetch nobody awaited: the reader reports it

    async def _load(self, chunk_key: ChunkKey) -> memoryview:
        self.refresh_ring()
        owner = self.ring.owner(*chunk_key)
        if owner is None or self.peers is None:
            return await self._from_bucket(chunk_key, owned=True)
        try:
            data = await self.peers.fetch_chunk(
                owner, chunk_key[0], chunk_key[1], self.chunk_bytes, self.peer_timeout_s
            )
        except PeerError as exc:
            PEER_FAILURES.inc(1, exc.reason)
            if exc.reason not in ("http_404",):
                # Unreachable, slow or failing: read around it for a while.
                self._suspects[owner.agent_id] = time.monotonic() + SUSPECT_FOR_S
                log.warning("chunk from %s failed (%s); reading the bucket", owner.agent_id, exc)
            return await self._from_bucket(chunk_key, owned=False)
        PEER_FETCHED_BYTES.inc(len(data))
        return self.chunks.put(chunk_key, data, owned=False)

    # -- the bucket, for ourselves and for peers -------------------------------------------

    async def serve_peer(self, key: str, index: int) -> memoryview:
        """A chunk for another agent of the zone: from memory, else from the bucket
        (never from a third agent: peers' views of the ring may briefly differ)."""
        chunk_key = (key, index)
        chunk = self.chunks.get(chunk_key)
        if chunk is None:
            chunk = await asyncio.shield(self._from_bucket(chunk_key, owned=True))
        PEER_SERVED_BYTES.inc(len(chunk))
        return chunk

    def _from_bucket(self, chunk_key: ChunkKey, *, owned: bool) -> asyncio.Future[memoryview]:
        future = self._bucket_loading.get(chunk_key)
        if future is not None:
            return future
        key, index = chunk_key
        loop = asyncio.get_running_loop()
        read = loop.run_in_executor(
            self._executor,
            self.store.get_range,
            key,
            index * self.chunk_bytes,
            self.chunk_bytes,
        )

        async def keep() -> memoryview:
            return self.chunks.put(chunk_key, await read, owned=owned)

        future = asyncio.ensure_future(keep())
        self._bucket_loading[chunk_key] = future
        future.add_done_callback(lambda _: self._bucket_loading.pop(chunk_key, None))
        return future
