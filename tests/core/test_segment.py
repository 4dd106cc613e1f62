"""The segment file: batches as received, an index footer, a trailer."""

from __future__ import annotations

import struct
import uuid

import pytest

from core.kafka.records import RecordInput, encode_batch, iter_batches, patch_base_offset
from core.segment import (
    ENTRY_SIZE,
    TRAILER_SIZE,
    SegmentBuilder,
    SegmentCorrupt,
    SegmentEntry,
    read_index,
    read_index_from_store,
    verify_segment,
)
from core.storage import ObjectNotFound, open_store

ORDERS = uuid.UUID("00000000-0000-4000-8000-0000000000aa")
CLICKS = uuid.UUID("00000000-0000-4000-8000-0000000000bb")
T0 = 1_700_000_000_000


def make_batch(n: int, *, records: int = 3, producer_id: int = -1) -> bytes:
    return encode_batch(
        [
            RecordInput(timestamp=T0 + n * 10 + i, key=f"k{n}".encode(), value=b"v" * (n + i))
            for i in range(records)
        ],
        producer_id=producer_id,
        producer_epoch=2 if producer_id >= 0 else -1,
        base_sequence=n * 10 if producer_id >= 0 else -1,
        compression=n % 5,
    )


PLACEMENTS = [(ORDERS, 0), (ORDERS, 1), (CLICKS, 0), (ORDERS, 0), (CLICKS, 0), (ORDERS, 1)]


def build(*, count: int = len(PLACEMENTS)) -> tuple[bytes, list[bytes], list[SegmentEntry]]:
    builder = SegmentBuilder()
    batches = []
    for n, (topic_id, partition) in enumerate(PLACEMENTS[:count]):
        batch = make_batch(n, records=n + 1, producer_id=7 if n % 2 else -1)
        ((_, _, header),) = iter_batches(batch)
        builder.append(
            topic_id=topic_id, partition=partition, batch=memoryview(batch), header=header
        )
        batches.append(batch)
    return builder.finish(), batches, builder.entries


def test_the_index_gives_back_every_batch_by_position_and_length():
    data, batches, built_entries = build()
    entries = read_index(data)
    assert entries == built_entries
    assert [(e.topic_id, e.partition) for e in entries] == PLACEMENTS
    for entry, batch in zip(entries, batches, strict=True):
        assert data[entry.position : entry.position + entry.length] == batch
    assert len(data) == sum(map(len, batches)) + len(batches) * ENTRY_SIZE + TRAILER_SIZE
    assert data.endswith(b"FLOESEG1")


def test_entries_carry_what_the_commit_needs():
    data, batches, _ = build()
    entry = read_index(data)[3]
    assert entry == SegmentEntry(
        topic_id=ORDERS,
        partition=0,
        position=sum(map(len, batches[:3])),
        length=len(batches[3]),
        record_count=4,
        base_timestamp=T0 + 30,
        max_timestamp=T0 + 33,
        producer_id=7,
        producer_epoch=2,
        base_sequence=30,
        base_offset=-1,
    )


def test_the_builder_counts_batches_and_bytes():
    builder = SegmentBuilder()
    assert (len(builder), builder.size) == (0, 0)
    batch = make_batch(1)
    entry = builder.append(
        topic_id=ORDERS, partition=3, batch=batch, header=next(iter_batches(batch))[2]
    )
    assert (len(builder), builder.size, entry.position) == (1, len(batch), 0)
    assert builder.finish() == builder.finish()


def test_an_empty_segment_is_just_a_trailer():
    data = SegmentBuilder().finish()
    assert len(data) == TRAILER_SIZE
    assert read_index(data) == []


def test_the_builder_rejects_a_batch_that_disagrees_with_its_header():
    batch = make_batch(1)
    header = next(iter_batches(batch))[2]
    with pytest.raises(ValueError):
        SegmentBuilder().append(topic_id=ORDERS, partition=0, batch=batch[:-1], header=header)
    with pytest.raises(ValueError):
        SegmentBuilder().append(topic_id=ORDERS, partition=2**31, batch=batch, header=header)


def test_compacted_segments_record_the_assigned_base_offsets():
    builder = SegmentBuilder()
    for n, offset in enumerate([0, 3, 10]):
        batch = bytearray(make_batch(n))
        patch_base_offset(batch, 0, offset)
        header = next(iter_batches(batch))[2]
        builder.append(
            topic_id=CLICKS, partition=0, batch=bytes(batch), header=header, base_offset=offset
        )
    data = builder.finish()
    assert [e.base_offset for e in verify_segment(data)] == [0, 3, 10]


def footer_start(data: bytes) -> int:
    footer_length = struct.unpack_from(">I", data, len(data) - TRAILER_SIZE)[0]
    return len(data) - TRAILER_SIZE - footer_length


def test_a_flipped_bit_in_the_footer_is_caught():
    data, _, _ = build()
    start = footer_start(data)
    for position in (start, start + 20, len(data) - TRAILER_SIZE - 1):
        damaged = bytearray(data)
        damaged[position] ^= 0x01
        with pytest.raises(SegmentCorrupt, match="CRC"):
            read_index(bytes(damaged))


@pytest.mark.parametrize("offset_from_end", [1, 3, 9, 12, 14, 18, 22])
def test_a_damaged_trailer_is_caught(offset_from_end):
    data, _, _ = build()
    damaged = bytearray(data)
    damaged[-offset_from_end] ^= 0x10
    with pytest.raises(SegmentCorrupt):
        read_index(bytes(damaged))


@pytest.mark.parametrize("keep", [0, 5, TRAILER_SIZE - 1, 100, -1, -TRAILER_SIZE, -30])
def test_a_truncated_file_is_caught(keep):
    data, _, _ = build()
    with pytest.raises(SegmentCorrupt):
        read_index(data[:keep])


def test_a_file_cut_at_the_front_is_caught():
    data, _, _ = build()
    with pytest.raises(SegmentCorrupt):
        read_index(data[10:])


def test_verify_catches_a_flipped_bit_inside_a_batch():
    data, batches, _ = build()
    damaged = bytearray(data)
    damaged[len(batches[0]) + 70] ^= 0x01  # inside batch 1's records
    read_index(bytes(damaged))  # the index alone does not cover batch bytes
    with pytest.raises(SegmentCorrupt, match="batch 1 .* CRC"):
        verify_segment(bytes(damaged))


def test_verify_catches_an_index_that_disagrees_with_its_batch():
    builder = SegmentBuilder()
    batch = make_batch(2)
    header = next(iter_batches(batch))[2]._replace(record_count=99)
    builder.append(topic_id=ORDERS, partition=0, batch=batch, header=header)
    with pytest.raises(SegmentCorrupt, match="record_count"):
        verify_segment(builder.finish())


@pytest.fixture(params=["mem", "file"])
def store(request, tmp_path):
    if request.param == "mem":
        return open_store(f"mem://segments-{uuid.uuid4().hex}")
    return open_store(tmp_path.as_uri())


def test_the_index_is_read_from_a_store_without_the_batches(store):
    data, _, entries = build()
    store.put("vci_a/segments/one", data)
    assert read_index_from_store(store, "vci_a/segments/one") == entries


def test_a_footer_larger_than_the_prefetch_takes_a_second_read(store):
    data, _, entries = build()
    store.put("seg", data)
    reads = []
    real_get_range = store.get_range
    store.get_range = lambda key, start, length: (
        reads.append(length) or real_get_range(key, start, length)
    )
    assert read_index_from_store(store, "seg", prefetch=10) == entries
    assert reads == [len(entries) * ENTRY_SIZE]
    assert read_index_from_store(store, "seg") == entries
    assert len(reads) == 1  # the default prefetch covers a small footer


def test_reading_the_index_of_a_bad_object_names_the_key(store):
    data, _, _ = build()
    damaged = bytearray(data)
    damaged[footer_start(data) + 1] ^= 0x01
    store.put("bad", bytes(damaged))
    store.put("tiny", b"abc")
    with pytest.raises(SegmentCorrupt, match="bad: footer CRC"):
        read_index_from_store(store, "bad")
    with pytest.raises(SegmentCorrupt, match="tiny"):
        read_index_from_store(store, "tiny")
    with pytest.raises(ObjectNotFound):
        read_index_from_store(store, "missing")


def test_read_index_from_an_s3_store(moto_s3_url):
    store = open_store(f"{moto_s3_url}&prefix=segments-{uuid.uuid4().hex[:8]}")
    data, _, entries = build()
    store.put("vci_a/segments/one", data)
    assert read_index_from_store(store, "vci_a/segments/one") == entries
    assert read_index_from_store(store, "vci_a/segments/one", prefetch=0) == entries
