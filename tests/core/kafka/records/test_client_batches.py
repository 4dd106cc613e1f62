"""Batches written by real clients decode, and real clients read ours.

The fixtures were captured from librdkafka (confluent-kafka) and kafka-python by
`tests/records/capture_client_batches.py`; kafka-python's pure-Python batch builder and
reader check the other direction.
"""

from __future__ import annotations

import types
from pathlib import Path

import cramjam
import pytest
from kafka import codec as kafka_codec
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from core.kafka.records import Record, RecordInput, decode_records, encode_batch, validate_batches
from tests.core.kafka.records.capture_client_batches import (
    EXPECTED_MESSAGES,
    KAFKA_PYTHON_CODECS,
    LIBRDKAFKA_CODECS,
    kafka_python_headers,
)

FIXTURES = Path(__file__).parent / "fixtures"
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def expected_records(*, null_header_values: bool = True) -> list[Record]:
    return [
        Record(
            offset,
            timestamp,
            key,
            value,
            headers if null_header_values else kafka_python_headers(headers),
        )
        for offset, (key, value, headers, timestamp) in enumerate(EXPECTED_MESSAGES)
    ]


@pytest.mark.parametrize("codec", LIBRDKAFKA_CODECS)
def test_it_reads_batches_librdkafka_wrote(codec):
    batch = (FIXTURES / f"librdkafka-{codec}.bin").read_bytes()
    ((_, _, header),) = validate_batches(batch, max_batch_bytes=1 << 20)
    assert header.compression == CODEC_IDS[codec]
    assert decode_records(batch)[1] == expected_records()


@pytest.mark.parametrize("codec", KAFKA_PYTHON_CODECS)
def test_it_reads_batches_kafka_python_wrote(codec):
    batch = (FIXTURES / f"kafka-python-{codec}.bin").read_bytes()
    ((_, _, header),) = validate_batches(batch, max_batch_bytes=1 << 20)
    assert header.compression == CODEC_IDS[codec]
    assert decode_records(batch)[1] == expected_records(null_header_values=False)


@pytest.fixture
def kafka_python_snappy(monkeypatch):
    """Give kafka-python a snappy block codec so its own xerial framing code runs."""
    shim = types.SimpleNamespace(
        compress=lambda data: bytes(cramjam.snappy.compress_raw(data)),
        decompress=lambda data: bytes(cramjam.snappy.decompress_raw(data)),
    )
    monkeypatch.setattr(kafka_codec, "snappy", shim)


INPUTS = [
    RecordInput(
        timestamp=1_700_000_000_000 + n,
        key=f"key-{n}".encode(),
        value=(f"value {n} " * 40).encode(),
        headers=[("n", str(n).encode())],
    )
    for n in range(50)
]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy"])
def test_it_reads_kafka_pythons_builder_output(codec, kafka_python_snappy):
    builder = DefaultRecordBatchBuilder(2, CODEC_IDS[codec], False, -1, -1, -1, 1 << 20)
    for n, record in enumerate(INPUTS):
        builder.append(n, record.timestamp, record.key, record.value, list(record.headers))
    batch = bytes(builder.build())
    validate_batches(batch, max_batch_bytes=1 << 20)
    header, decoded = decode_records(batch)
    assert header.compression == CODEC_IDS[codec]
    assert [(r.key, r.value, r.timestamp, r.headers) for r in decoded] == [
        (r.key, r.value, r.timestamp, list(r.headers)) for r in INPUTS
    ]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy"])
def test_kafka_python_reads_our_batches(codec, kafka_python_snappy):
    batch = encode_batch(INPUTS, compression=CODEC_IDS[codec], base_offset=1000)
    theirs = DefaultRecordBatch(bytearray(batch))
    assert theirs.validate_crc()
    assert theirs.compression_type == CODEC_IDS[codec]
    read = list(theirs)
    assert [(m.offset, m.timestamp, m.key, m.value, m.headers) for m in read] == [
        (1000 + n, r.timestamp, r.key, r.value, list(r.headers)) for n, r in enumerate(INPUTS)
    ]


def test_our_uncompressed_bytes_equal_kafka_pythons():
    builder = DefaultRecordBatchBuilder(2, 0, False, 5, 1, 10, 1 << 20)
    for n, record in enumerate(INPUTS[:5]):
        builder.append(n, record.timestamp, record.key, record.value, list(record.headers))
    ours = encode_batch(
        INPUTS[:5], partition_leader_epoch=0, producer_id=5, producer_epoch=1, base_sequence=10
    )
    assert ours == bytes(builder.build())
