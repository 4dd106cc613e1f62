"""Executor-side reads: coalesced ranges, and batches checked against the index."""

from __future__ import annotations

import uuid

import pytest

from core.segment import SegmentCorrupt
from core.storage import FileStore, MemoryStore
from jobs.segment_io import BatchRef, read_batches, run_at_offsets, store_for
from tests.jobs.segments import batch


class Counting:
    """Counts range requests (mixed into a store)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.requests: list[tuple[str, int, int]] = []

    def get_range(self, key, start, length):
        self.requests.append((key, start, length))
        return super().get_range(key, start, length)


class CountingMemoryStore(Counting, MemoryStore):
    pass


class CountingFileStore(Counting, FileStore):
    pass


def refs(key: str, *spans: tuple[int, int]) -> list[BatchRef]:
    return [BatchRef(key, start, length) for start, length in spans]


def test_an_object_store_reads_through_small_gaps_in_one_request():
    store = CountingMemoryStore(f"jobs-{uuid.uuid4().hex}")
    store.put("a.seg", bytes(range(256)) * 16384)  # 4 MiB
    wanted = refs("a.seg", (0, 100), (150, 50), (600_000, 10), (3_000_000, 20))
    data = read_batches(store, wanted)
    assert store.requests == [("a.seg", 0, 600_010), ("a.seg", 3_000_000, 20)]
    assert {r: bytes(v) for r, v in data.items()} == {
        r: (bytes(range(256)) * 16384)[r.position : r.position + r.length] for r in wanted
    }


def test_a_local_file_is_read_exactly_where_needed(tmp_path):
    store = CountingFileStore(tmp_path)
    store.put("a.seg", b"x" * 1000)
    read_batches(store, refs("a.seg", (0, 100), (100, 50), (400, 10)))
    assert store.requests == [("a.seg", 0, 150), ("a.seg", 400, 10)]


def test_a_short_object_is_corrupt(tmp_path):
    store = FileStore(tmp_path)
    store.put("a.seg", b"x" * 100)
    with pytest.raises(SegmentCorrupt, match="the object ends at 100"):
        read_batches(store, refs("a.seg", (50, 100)))


def test_a_run_must_agree_with_its_index_row():
    first, second = batch([(b"k", b"v"), (b"k2", b"v2")]), batch([(b"k3", b"v3")])
    run = first + second
    batches = run_at_offsets(run, base_offset=40, last_offset=42, rewrite=True, where="f@0")
    assert [b.base_offset for b in batches] == [40, 42]
    assert batches[0].data[:8] == (40).to_bytes(8, "big") and batches[0].data[8:] == first[8:]
    assert batches[1].data[:8] == (42).to_bytes(8, "big") and batches[1].data[8:] == second[8:]
    with pytest.raises(SegmentCorrupt, match="holds batches for 40..42"):
        run_at_offsets(run, base_offset=40, last_offset=44, rewrite=True, where="f@0")
    with pytest.raises(SegmentCorrupt, match="outside the run"):
        run_at_offsets(run, base_offset=40, last_offset=41, rewrite=True, where="f@0")
    flipped = bytearray(run)
    flipped[-1] ^= 0xFF
    with pytest.raises(SegmentCorrupt, match="CRC-32C mismatch"):
        run_at_offsets(flipped, base_offset=40, last_offset=42, rewrite=True, where="f@0")
    with pytest.raises(SegmentCorrupt, match="f@0"):
        run_at_offsets(run[:-3], base_offset=40, last_offset=42, rewrite=True, where="f@0")


def test_a_compacted_run_keeps_the_offsets_its_batches_carry():
    run = bytearray(batch([(b"k", b"v")])) + bytearray(batch([(b"k2", b"v2")]))
    second = len(batch([(b"k", b"v")]))
    run[0:8] = (10).to_bytes(8, "big")  # key compaction left a gap: 10, then 15
    run[second : second + 8] = (15).to_bytes(8, "big")
    batches = run_at_offsets(run, base_offset=10, last_offset=15, rewrite=False, where="f@0")
    assert [b.base_offset for b in batches] == [10, 15]


def test_executors_refuse_a_memory_store():
    with pytest.raises(ValueError, match="separate processes"):
        store_for("mem://anything")
