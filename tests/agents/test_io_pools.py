"""The agent's blocking-I/O pools (agents/io_pools.py): each task's wait for a thread is
timed on /metrics by pool, and the write path's PUTs never wait behind the read path's
GETs — neither in the pools alone nor through the writer (a real `mem://` store behind a
slow PUT, a stand-in control plane answering the commits)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

from agents.io_pools import GETS_IN_FLIGHT, IoPools, TimedPool
from agents.metrics import REGISTRY
from agents.segment_upload import PUTS_IN_FLIGHT
from agents.write_path import CommitWatch, SegmentWriter
from core.storage import open_store
from tests.agents.test_segment_upload import SlowCommits, one_batch

WAIT = "floe_io_thread_wait_seconds"


def _sample(suffix: str, pool: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(WAIT + suffix, {"pool": pool, **labels}) or 0.0


def test_a_task_that_waits_for_a_thread_is_timed_in_its_pool():
    pool = TimedPool("test-wait", 1)
    release = threading.Event()
    try:
        first = pool.submit(release.wait, 5)
        second = pool.submit(time.perf_counter)  # queued behind the first
        time.sleep(0.3)
        release.set()
        assert first.result(5) is True
        second.result(5)
    finally:
        pool.shutdown()
    assert _sample("_count", "test-wait") == 2
    assert 0.3 <= _sample("_sum", "test-wait") < 5  # the second waited for the first
    assert REGISTRY.get_sample_value("floe_io_threads", {"pool": "test-wait"}) == 1


def test_a_put_does_not_wait_behind_a_full_read_pool():
    pools = IoPools(put_threads=PUTS_IN_FLIGHT)
    release = threading.Event()
    try:
        # More blocked GETs than the read pool has threads: the rest queue there.
        reads = [pools.read.submit(release.wait, 10) for _ in range(4 * GETS_IN_FLIGHT)]
        time.sleep(0.1)
        started = time.perf_counter()
        assert pools.put.submit(lambda: "put").result(2) == "put"
        assert time.perf_counter() - started < 1.0
        assert not any(read.done() for read in reads)
    finally:
        release.set()
        pools.shutdown()
    assert pools.read.threads == GETS_IN_FLIGHT


def test_the_writers_puts_never_wait_for_a_thread_of_their_pool():
    store = open_store(f"mem://{uuid.uuid4()}")
    pools = IoPools(put_threads=PUTS_IN_FLIGHT)
    release = threading.Event()

    def put(key: str, data: bytes) -> None:
        time.sleep(0.05)
        store.put(key, data)

    async def main() -> list:
        writer = SegmentWriter(
            put=put,
            client=SlowCommits(store, delay_s=0.03),  # type: ignore[arg-type]
            cluster_id="vci_test",
            agent_id="agt-test",
            max_bytes=2000,  # every request fills a segment: sealed by size at once
            max_age_ms=1000,
            watch=CommitWatch(),
            executor=pools.put,
        )
        futures = [writer.append([one_batch(n % 3)], wait=True) for n in range(4 * PUTS_IN_FLIGHT)]
        results = await asyncio.gather(*futures)  # type: ignore[arg-type]
        await writer.close()
        return results

    # The PUT tasks handed to the pool and not yet finished, at most: never more than its
    # threads means no PUT ever queued for one (counted, not timed: a timed bound only
    # measures how busy the machine's CPUs are).
    outstanding, most = 0, 0
    count = threading.Lock()
    submit = pools.put.submit

    def counted_submit(fn, /, *args, **kwargs):
        nonlocal outstanding, most

        def finished(_future) -> None:
            nonlocal outstanding
            with count:
                outstanding -= 1

        with count:
            outstanding += 1
            most = max(most, outstanding)
        future = submit(fn, *args, **kwargs)
        future.add_done_callback(finished)
        return future

    pools.put.submit = counted_submit  # type: ignore[method-assign]
    before = _sample("_count", "put")
    # The read pool is full and has a queue the whole time.
    for _ in range(2 * GETS_IN_FLIGHT):
        pools.read.submit(release.wait, 20)
    try:
        results = asyncio.run(asyncio.wait_for(main(), 20))
    finally:
        release.set()
        pools.shutdown()
    assert all(result["error_code"] == 0 for (result,) in results)
    assert _sample("_count", "put") - before == 4 * PUTS_IN_FLIGHT  # one per segment, timed
    # Every upload slot was used, and never more PUTs handed over than the pool has threads.
    assert most == PUTS_IN_FLIGHT == pools.put.threads
