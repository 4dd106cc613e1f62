"""The writer's PUTs in flight (agents/segment_upload.py): bounded by the upload slots,
overlapping while commits wait their turn, and still answered only after each commit.

A fake control plane stands in for the commit call (slow on purpose); the PUT is a real
`mem://` store's behind a counter of concurrent calls.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from agents.segment_upload import PUTS_IN_FLIGHT
from agents.write_path import BatchToWrite, CommitWatch, SegmentWriter
from core.kafka.records import RecordInput, encode_batch, iter_batches
from core.storage import open_store

TOPIC = uuid.UUID("00000000-0000-0000-0000-0000000000bb")


class SlowCommits:
    """Answers `commit` with consecutive offsets per partition after `delay_s`, and
    notes what had been PUT when each commit went out."""

    def __init__(self, store, delay_s: float) -> None:
        self.store = store
        self.delay_s = delay_s
        self.next_offset: dict[int, int] = {}
        self.in_bucket_at_commit: list[bool] = []

    async def call(self, name: str, body: dict, **_: object) -> dict:
        assert name == "commit"
        self.in_bucket_at_commit.append(
            any(info.key == body["file_key"] for info in self.store.list())
        )
        await asyncio.sleep(self.delay_s)
        results = []
        for entry in body["batches"]:
            base = self.next_offset.get(entry["partition"], 0)
            self.next_offset[entry["partition"]] = base + entry["records"]
            results.append({"error_code": 0, "base_offset": base, "log_start_offset": 0})
        return {"batches": results}


def one_batch(partition: int) -> BatchToWrite:
    data = encode_batch([RecordInput(value=bytes(3000))], base_offset=0)
    ((_, _, header),) = list(iter_batches(data))
    return BatchToWrite(TOPIC, partition, memoryview(data), header)


def test_puts_overlap_up_to_the_slots_while_commits_wait_and_acks_follow_commits():
    store = open_store(f"mem://{uuid.uuid4()}")
    lock = threading.Lock()
    in_flight = [0, 0]  # now, most seen

    def put(key: str, data: bytes) -> None:
        with lock:
            in_flight[0] += 1
            in_flight[1] = max(in_flight[1], in_flight[0])
        time.sleep(0.05)
        store.put(key, data)
        with lock:
            in_flight[0] -= 1

    client = SlowCommits(store, delay_s=0.03)

    async def main() -> list:
        # More threads than slots (the agent's runtime has 16): the slots are what bound.
        asyncio.get_running_loop().set_default_executor(
            ThreadPoolExecutor(max_workers=PUTS_IN_FLIGHT + 4)
        )
        writer = SegmentWriter(
            put=put,
            client=client,  # type: ignore[arg-type]
            cluster_id="vci_test",
            agent_id="agt-test",
            max_bytes=2000,  # every request fills a segment: sealed by size at once
            max_age_ms=1000,
            watch=CommitWatch(),
        )
        futures = [writer.append([one_batch(n % 3)], wait=True) for n in range(4 * PUTS_IN_FLIGHT)]
        results = await asyncio.gather(*futures)  # type: ignore[arg-type]
        await writer.close()
        return results

    results = asyncio.run(asyncio.wait_for(main(), 20))
    assert in_flight[1] == PUTS_IN_FLIGHT  # overlapped, never past the slots
    assert all(client.in_bucket_at_commit)  # each commit after its file's PUT
    assert len(client.in_bucket_at_commit) == 4 * PUTS_IN_FLIGHT
    offsets: dict[int, list[int]] = {}
    for n, (result,) in enumerate(results):
        assert result["error_code"] == 0
        offsets.setdefault(n % 3, []).append(result["base_offset"])
    # Committed in segment order: each partition's offsets in the order sent.
    assert all(found == list(range(len(found))) for found in offsets.values())
