"""The read path's answer from shared walks of runs (``read_path._walked``): whatever the
fetch offsets, budgets and last stable offsets, a Fetch gets what a walk of its runs batch
by batch gives (the batches from the one holding its offset, the response's first one
whatever its size — KIP-74 —, then each that fits both budgets, none at or past the LSO
for read_committed), and a walk shared by many Fetches gives each its own."""

from __future__ import annotations

import asyncio
import itertools
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from agents import read_path
from core.kafka.records import RecordInput, encode_batch
from core.segment import run_batches

_files = itertools.count()


class _Bucket:
    """The chunk cache's `read`, over files held here."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def prefetch(self, *_: object) -> None:
        pass

    async def read(self, key: str, pos: int, length: int) -> list[memoryview]:
        return [memoryview(self.files[key])[pos : pos + length]]


def _runs(bucket: _Bucket, sizes: list[list[tuple[int, int]]]) -> tuple[list[dict], int]:
    """Runs of one partition, a file each: per run its batches' (records, value bytes)."""
    runs, offset = [], 0
    for batches in sizes:
        data = b"".join(
            encode_batch([RecordInput(key=None, value=b"v" * size, timestamp=0)] * count)
            for count, size in batches
        )
        key = f"f{next(_files)}"
        bucket.files[key] = b"pad" + data
        count = sum(c for c, _ in batches)
        runs.append(
            {"file_key": key, "pos": 3, "len": len(data), "base_offset": offset,
             "last_offset": offset + count - 1, "batch_count": len(batches), "rewrite": True}
        )  # fmt: skip
        offset += count
    return runs, offset


def _reference(
    bucket, runs, offset, part_max, budget, total_max, end
) -> tuple[list[tuple[int, int]], int]:
    """Batch by batch: (base offset, size) of each batch sent, and the response's budget
    left (`total_max` when the response is still empty)."""
    sent: list[tuple[int, int]] = []
    used = 0
    for run in runs:
        data = bucket.files[run["file_key"]][run["pos"] : run["pos"] + run["len"]]
        for batch in run_batches(
            data, base_offset=run["base_offset"], last_offset=run["last_offset"], rewrite=True
        ):
            if batch.last_offset < offset:
                continue
            if end is not None and batch.base_offset >= end:
                return sent, budget
            first = budget == total_max and not sent
            if not first and (used + batch.length > part_max or batch.length > budget):
                return sent, budget
            sent.append((batch.base_offset, batch.length))
            used += batch.length
            budget -= batch.length
    return sent, budget


BATCHES = st.lists(st.tuples(st.integers(1, 4), st.integers(1, 300)), min_size=1, max_size=5)
PARTITION = st.lists(BATCHES, min_size=1, max_size=3)


@settings(max_examples=300, deadline=None)
@given(
    partitions=st.lists(PARTITION, min_size=1, max_size=3),
    picks=st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=3, max_size=3),
    part_max=st.sampled_from([1, 200, 700, 10**6]),
    total_max=st.sampled_from([1, 500, 2_000, 10**7]),
    read_committed=st.booleans(),
    fetches=st.integers(1, 3),
    shared=st.booleans(),
)
def test_a_fetch_gets_what_a_batch_by_batch_walk_gives(
    partitions, picks, part_max, total_max, read_committed, fetches, shared
):
    bucket = _Bucket()
    built = [_runs(bucket, sizes) for sizes in partitions]
    ctx = SimpleNamespace(
        cache=bucket,
        offsets=SimpleNamespace(learn=lambda *a, **k: None),
        config=SimpleNamespace(cache_bytes=1 << 30),
    )
    info = SimpleNamespace(topic_id_str="t")
    for _ in range(fetches):  # the same runs again: from the shared walks
        wanted, planned, expected = [], [], []
        budget = total_max
        for index, ((runs, high), (at, stable)) in enumerate(zip(built, picks, strict=False)):
            offset, lso = int(at * high), int(stable * high) if read_committed else high
            request = {"partition": index, "fetch_offset": offset, "partition_max_bytes": part_max}
            wanted.append(read_path.Wanted(info, request))  # type: ignore[arg-type]
            planned.append(
                {"error_code": 0, "high_watermark": high, "last_stable_offset": lso,
                 "log_start_offset": 0, "batches": runs}
            )  # fmt: skip
            end = lso if read_committed else None
            sent, budget = _reference(bucket, runs, offset, part_max, budget, total_max, end)
            expected.append(sent)
        total, errors = asyncio.run(
            read_path._assemble(ctx, wanted, planned, total_max, read_committed, shared=shared)  # type: ignore[arg-type]
        )
        assert not errors
        assert total == total_max - budget
        for item, sent in zip(wanted, expected, strict=True):
            data = b"".join(item.answer["records"]) if item.answer["records"] else b""
            got = [(b.base_offset, b.length) for b in run_batches(
                data, base_offset=sent[0][0] if sent else 0, last_offset=10**9, rewrite=False
            )] if data else []  # fmt: skip
            assert got == sent
            assert item.sent_bytes == sum(size for _, size in sent)


def test_a_corrupt_run_serves_its_batches_before_the_fault_and_is_not_kept():
    bucket = _Bucket()
    (runs, high) = _runs(bucket, [[(2, 50), (3, 50)]])
    run = runs[0]
    bucket.files[run["file_key"]] = bucket.files[run["file_key"]][: 3 + run["len"] - 10]
    ctx = SimpleNamespace(
        cache=bucket,
        offsets=SimpleNamespace(learn=lambda *a, **k: None),
        config=SimpleNamespace(cache_bytes=1 << 30),
    )
    item = read_path.Wanted(
        SimpleNamespace(topic_id_str="t"),  # type: ignore[arg-type]
        {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 10**6},
    )
    plan = {"error_code": 0, "high_watermark": high, "last_stable_offset": high,
            "log_start_offset": 0, "batches": runs}  # fmt: skip
    total, errors = asyncio.run(read_path._assemble(ctx, [item], [plan], 10**6))  # type: ignore[arg-type]
    assert not errors and item.sent_records == 2 and total == item.sent_bytes > 0
    assert not any(key[0] == run["file_key"] for key in read_path._WALKED)
    assert item.read_short  # so its answer is not shared with other Fetches (fill)
