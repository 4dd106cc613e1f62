"""``floe file-reader`` on a file in the compacted layout (batches carrying their assigned
offsets, offset gaps where key compaction dropped records, a compressed batch), built
with `core.segment`'s writer: it prints what was written and catches an index that
disagrees with its batch. (Ingestion and transactional files written by a live agent:
test_against_an_agent.py.)"""

from __future__ import annotations

import json
import struct
import uuid

from core.kafka.records import COMPRESSION_ZSTD, RecordInput, encode_batch, iter_batches
from core.segment import SegmentBuilder
from tests.floecli.run import floe

TOPIC = uuid.UUID("00000000-0000-0000-0000-0000000000aa")


def compacted_file() -> bytes:
    builder = SegmentBuilder()
    batches = [
        # Offsets 100 and 103 kept of 100..103: deltas 0 and 3.
        encode_batch(
            [
                RecordInput(offset_delta=0, timestamp=1000, key=b"a", value=b"1"),
                RecordInput(offset_delta=3, timestamp=1003, key=b"b", value=None),
            ],
            base_offset=100,
            last_offset_delta=3,
        ),
        encode_batch(
            [RecordInput(offset_delta=0, timestamp=2000, key=b"c", value=b"x" * 300)],
            base_offset=104,
            compression=COMPRESSION_ZSTD,
        ),
    ]
    for batch in batches:
        [(_, _, header)] = list(iter_batches(batch))
        builder.append(
            topic_id=TOPIC, partition=3, batch=batch, header=header, base_offset=header.base_offset
        )
    return builder.finish()


def test_it_reads_a_compacted_file_with_gaps_and_compression(tmp_path):
    path = tmp_path / "compacted.seg"
    path.write_bytes(compacted_file())
    done = floe("file-reader", path.as_uri(), "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["problems"] == [] and doc["records"] == 3
    first, second = doc["batches"]
    assert (first["index_base_offset"], first["base_offset"], first["last_offset_delta"]) == (
        100,
        100,
        3,
    )
    assert [(r["offset"], r["key"], r["value"]) for r in first["records"]] == [
        (100, "a", "1"),
        (103, "b", None),
    ]
    assert second["compression"] == "zstd" and second["crc_ok"]
    [record] = second["records"]
    assert record["offset"] == 104 and record["value"].startswith("x" * 200 + "…(+100 bytes)")
    assert {b["topic_id"] for b in doc["batches"]} == {str(TOPIC)}
    assert {b["partition"] for b in doc["batches"]} == {3}

    text = floe("file-reader", path.as_uri(), "--no-records")
    assert text.returncode == 0
    assert (
        text.stdout.splitlines()[1].startswith(f"batch 0: topic {TOPIC} partition 3 at 0 ")
        and "base offset 100 (index 100)" in text.stdout
    )
    assert "offset 100" not in text.stdout.replace("base offset 100", "")


def test_an_index_that_disagrees_with_its_batch_is_reported(tmp_path):
    data = bytearray(compacted_file())
    # The second footer entry's base_offset (its last 8 bytes), before the 22-byte trailer.
    end = len(data) - 22
    struct.pack_into(">q", data, end - 8, 999)
    # Re-seal the footer's CRC so the index itself still checks out.
    from crc32c import crc32c

    footer_length = struct.unpack_from(">I", data, len(data) - 22)[0]
    struct.pack_into(">I", data, len(data) - 14, crc32c(bytes(data[end - footer_length : end])))
    path = tmp_path / "lying.seg"
    path.write_bytes(bytes(data))
    done = floe("file-reader", path.as_uri())
    assert done.returncode == 1
    assert "PROBLEM batch 1: index says base offset 999, batch 104" in done.stdout
    assert (
        done.stderr
        == "floe file-reader: 1 problems: batch 1: index says base offset 999, batch 104\n"
    )
