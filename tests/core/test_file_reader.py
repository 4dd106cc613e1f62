"""`python -m core.file_reader`: print a segment's index, check every batch."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

from core import file_reader
from core.kafka.records import RecordInput, encode_batch, iter_batches
from core.segment import SegmentBuilder
from core.storage import open_store

TOPIC = uuid.UUID("12345678-1234-4234-8234-123456789abc")
REPO = Path(__file__).resolve().parents[2]


def segment() -> bytes:
    builder = SegmentBuilder()
    for partition in (0, 1):
        batch = encode_batch(
            [RecordInput(timestamp=1_000 + i, value=b"v") for i in range(partition + 2)],
            producer_id=9,
            producer_epoch=0,
            base_sequence=4,
        )
        header = next(iter_batches(batch))[2]
        builder.append(topic_id=TOPIC, partition=partition, batch=batch, header=header)
    return builder.finish()


def test_it_prints_one_line_per_batch_and_a_summary(tmp_path, capsys):
    path = tmp_path / "one.seg"
    path.write_bytes(segment())
    assert file_reader.main([str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "topic_id", "partition", "position", "length", "records", "base_timestamp",
        "max_timestamp", "producer_id", "epoch", "sequence", "base_offset",
    ]  # fmt: skip
    assert lines[1].split() == [
        str(TOPIC),
        "0",
        "0",
        "77",
        "2",
        "1000",
        "1001",
        "9",
        "0",
        "4",
        "-1",
    ]
    assert lines[2].split()[:5] == [str(TOPIC), "1", "77", "85", "3"]
    assert lines[3] == f"ok: 2 batches, 5 records, {path.stat().st_size} bytes"


def test_it_reads_an_object_from_a_bucket_url(tmp_path, capsys):
    open_store(tmp_path.as_uri()).put("vci_a/segments/x", segment())
    assert file_reader.main([tmp_path.as_uri(), "vci_a/segments/x"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("ok: 2 batches")


def test_a_corrupt_batch_exits_1_with_one_line(tmp_path, capsys):
    damaged = bytearray(segment())
    damaged[70] ^= 0x01  # inside batch 0
    path = tmp_path / "bad.seg"
    path.write_bytes(bytes(damaged))
    assert file_reader.main([path.as_uri()]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert "corrupt segment: batch 0 at 0: CRC-32C mismatch" in captured.err


def test_a_missing_file_exits_1_with_one_line(tmp_path, capsys):
    assert file_reader.main([str(tmp_path / "nope.seg")]) == 1
    assert file_reader.main([tmp_path.as_uri(), "nope"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all("cannot read" in line for line in err)


def test_it_runs_as_a_module(tmp_path):
    path = tmp_path / "bad.seg"
    path.write_bytes(b"not a segment at all, just some bytes")
    done = subprocess.run(
        [sys.executable, "-m", "core.file_reader", str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1
    assert "corrupt segment: not a segment file: trailer magic" in done.stderr
