"""How sealed segments reach the bucket: the PUTs the writer keeps in flight, and where a
segment's time goes between its seal and its commit (encode, PUT, waiting its turn to
commit, the commit) — agents/write_path.py's flush path.

PUTs of successive segments overlap; commits go out one at a time, in segment order.
`UploadSlots` bounds the PUTs in flight: a segment takes a slot for its encode and PUT
and gives it back before it waits for its turn to commit, so while one commit is out the
next segments are already uploading (bench/s3_produce.py reads it from /metrics,
`floe_segment_put_slots`, and measures the same moto server's raw PUT limit at it).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator

from agents.metrics import Gauge, Histogram

# PUTs in flight at once. Beyond a handful a store gains little (moto: one process) and
# each in-flight segment holds its bytes in memory (the writer's in-flight byte cap,
# 64 MiB by default, bounds them too).
PUTS_IN_FLIGHT = 8


PUT_SLOTS = Gauge("floe_segment_put_slots", "PUTs of sealed segments allowed in flight at once.")
ENCODE_SECONDS = Histogram(
    "floe_segment_encode_seconds", "Laying a sealed segment's file out (upload thread)."
)
COMMIT_WAIT_SECONDS = Histogram(
    "floe_segment_commit_wait_seconds",
    "From a segment's PUT finishing to its commit's turn (the previous commit answered).",
)
SLOT_WAIT_SECONDS = Histogram(
    "floe_segment_put_slot_wait_seconds", "From sealing a segment to its PUT's start."
)


class UploadSlots:
    """At most `limit` segments encoding or uploading at once (created on the loop)."""

    def __init__(self, limit: int = PUTS_IN_FLIGHT) -> None:
        self.limit = limit
        PUT_SLOTS.set(limit)
        self._slots = asyncio.Semaphore(limit)

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one PUT slot for the block."""
        started = time.perf_counter()
        async with self._slots:
            SLOT_WAIT_SECONDS.observe(time.perf_counter() - started)
            yield


@contextlib.contextmanager
def timed(histogram: Histogram) -> Iterator[None]:
    """Observe the block's duration in `histogram`."""
    started = time.perf_counter()
    try:
        yield
    finally:
        histogram.observe(time.perf_counter() - started)
