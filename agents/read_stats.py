"""What the read path counts, on `/metrics` and in every heartbeat: object-store GETs,
chunk bytes exchanged with the agents of this zone, cache hits, and record bytes sent
to consumers by the zone they named (so cross-zone traffic is visible).

GETs are counted where they happen, in `CountingStore` around the bucket, so a test or
benchmark reading these numbers measures the agent, not itself.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import Any

from agents.metrics import Counter, Gauge
from agents.write_path import WRITTEN_UNCOMPRESSED_BYTES
from core.storage import ObjectStore
from core.storage.base import ObjectInfo

GET_REQUESTS = Counter(
    "floe_object_store_get_requests_total", "Object-store GET requests (whole or ranged)."
)
GET_BYTES = Counter("floe_object_store_get_bytes_total", "Bytes read from the object store.")
PEER_SERVED_BYTES = Counter(
    "floe_peer_served_bytes_total", "Cached chunk bytes sent to agents of this zone."
)
PEER_FETCHED_BYTES = Counter(
    "floe_peer_fetched_bytes_total", "Cached chunk bytes received from agents of this zone."
)
PEER_FAILURES = Counter(
    "floe_peer_fetch_failures_total",
    "Chunk fetches from a peer that failed and fell back to the bucket, by reason.",
    ("reason",),
)
CACHE_REQUESTS = Counter(
    "floe_cache_requests_total",
    "Chunk lookups by result: hit (in memory or already loading) or miss.",
    ("result",),
)
CLIENT_BYTES = Counter(
    "floe_fetch_bytes_total",
    "Record batch bytes returned to consumers, by the zone the client named "
    '(client_zone="" without a hint, "other" for a zone no agent is in) and whether '
    "that zone differs from this agent's (cross_zone).",
    ("client_zone", "cross_zone"),
)


def _hit_ratio() -> float:
    hits, misses = CACHE_REQUESTS.value("hit"), CACHE_REQUESTS.value("miss")
    return hits / (hits + misses) if hits + misses else 0.0


HIT_RATIO = Gauge(
    "floe_cache_hit_ratio", "Chunk cache hits / lookups since start.", callback=_hit_ratio
)

# The heartbeat carries at most this many zones (the control plane's bound is 64).
MAX_REPORTED_ZONES = 32
# ... and at most this many topics' consumed counters (the control plane's bound).
MAX_REPORTED_TOPICS = 2000


class ConsumedByTopic:
    """Record bytes and records sent to consumers per topic id since the agent started
    (cumulative, like every heartbeat counter: the control plane adds their growth to
    each topic's throughput out). Only the event loop touches it."""

    def __init__(self) -> None:
        self._counts: dict[str, list[int]] = {}

    def add(self, topic_id: str, nbytes: int, records: int) -> None:
        counts = self._counts.setdefault(topic_id, [0, 0])
        counts[0] += nbytes
        counts[1] += records

    def report(self) -> dict[str, list[int]]:
        """{topic id: [bytes, records]}, the MAX_REPORTED_TOPICS most read topics."""
        items = sorted(self._counts.items(), key=lambda kv: kv[1][0], reverse=True)
        return {topic_id: list(counts) for topic_id, counts in items[:MAX_REPORTED_TOPICS]}


CONSUMED = ConsumedByTopic()


def count_client_bytes(nbytes: int, client_zone: str | None, my_zone: str, known: set[str]) -> None:
    """Count record bytes sent to a client that named `client_zone` (None: no hint).

    Client ids are the client's to choose: a zone no agent is in is counted as "other",
    so a client cannot grow the label set.
    """
    if client_zone is None:
        label, cross = "", "unknown"
    elif client_zone in known:
        label, cross = client_zone, "true" if client_zone != my_zone else "false"
    else:
        label, cross = "other", "true"
    CLIENT_BYTES.inc(nbytes, label, cross)


def heartbeat_stats() -> dict[str, Any]:
    """The counters as the heartbeat's `stats` object (docs/AGENT_API.md)."""
    by_zone: dict[str, int] = {}
    for (zone, _cross), value in CLIENT_BYTES.items():
        by_zone[zone] = by_zone.get(zone, 0) + int(value)
    return {
        "get_requests": int(GET_REQUESTS.total()),
        "get_bytes": int(GET_BYTES.total()),
        "peer_served_bytes": int(PEER_SERVED_BYTES.total()),
        "peer_fetched_bytes": int(PEER_FETCHED_BYTES.total()),
        "cache_hits": int(CACHE_REQUESTS.value("hit")),
        "cache_misses": int(CACHE_REQUESTS.value("miss")),
        "client_bytes_by_zone": dict(sorted(by_zone.items())[:MAX_REPORTED_ZONES]),
        "written_uncompressed_bytes": int(WRITTEN_UNCOMPRESSED_BYTES.total()),
        "consumed_by_topic": CONSUMED.report(),
    }


class CountingStore(ObjectStore):
    """The bucket, with every read counted (GET_REQUESTS, GET_BYTES), failed ones too.

    Reads run on executor threads and a counter's increment is a read-modify-write, so
    increments take a lock: an honest count is the point of this class."""

    def __init__(self, store: ObjectStore) -> None:
        self.inner = store
        self.url = store.url
        self._lock = threading.Lock()

    def _count(self, nbytes: int) -> None:
        with self._lock:
            GET_REQUESTS.inc()
            GET_BYTES.inc(nbytes)

    def put(self, key: str, data: bytes | bytearray | memoryview) -> None:
        self.inner.put(key, data)

    def get(self, key: str) -> bytes:
        data = b""
        try:
            data = self.inner.get(key)
            return data
        finally:
            self._count(len(data))

    def get_range(self, key: str, start: int, length: int) -> bytes:
        data = b""
        try:
            data = self.inner.get_range(key, start, length)
            return data
        finally:
            self._count(len(data))

    def get_tail(self, key: str, length: int) -> tuple[bytes, int]:
        data = b""
        try:
            data, size = self.inner.get_tail(key, length)
            return data, size
        finally:
            self._count(len(data))

    def size(self, key: str) -> int:
        return self.inner.size(key)

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def delete_many(self, keys: Iterable[str]) -> None:
        self.inner.delete_many(keys)

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:

        return self.inner.list(prefix)
