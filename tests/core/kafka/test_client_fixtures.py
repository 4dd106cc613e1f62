"""Requests captured from real clients (tests/protocol/capture_fixtures.py) decode as expected,
and re-encode to the very bytes the client sent."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.kafka import (
    ApiKey,
    ErrorCode,
    UnsupportedVersion,
    api_versions_fallback_response,
    decode_request,
    decode_response,
    encode_request,
)

FIXTURES = Path(__file__).parent / "fixtures"
LIBRDKAFKA = "floe-fixture-librdkafka"
KAFKA_PYTHON = "floe-fixture-kafka-python"


def _load(name: str) -> bytes:
    return (FIXTURES / f"{name}.bin").read_bytes()


@pytest.mark.parametrize(
    ("name", "client_id", "api_key", "version", "expected"),
    [
        (
            "librdkafka-apiversions-v3",
            LIBRDKAFKA,
            ApiKey.API_VERSIONS,
            3,
            {"client_software_name": "confluent-kafka-python"},
        ),
        (
            "librdkafka-metadata-v12",
            LIBRDKAFKA,
            ApiKey.METADATA,
            12,
            {"allow_auto_topic_creation": True, "include_topic_authorized_operations": False},
        ),
        (
            "librdkafka-produce-v9",
            LIBRDKAFKA,
            ApiKey.PRODUCE,
            9,
            {"acks": 1, "transactional_id": None},
        ),
        (
            "kafka-python-apiversions-v3",
            KAFKA_PYTHON,
            ApiKey.API_VERSIONS,
            3,
            {"client_software_name": "kafka-python"},
        ),
        ("kafka-python-metadata-v12", KAFKA_PYTHON, ApiKey.METADATA, 12, {"topics": []}),
        (
            "kafka-python-produce-v9",
            KAFKA_PYTHON,
            ApiKey.PRODUCE,
            9,
            {"acks": 1, "timeout_ms": 4000},
        ),
    ],
)
def test_captured_request_decodes(name, client_id, api_key, version, expected):
    frame = _load(name)
    header, body = decode_request(frame)
    assert (header.api_key, header.api_version, header.client_id) == (api_key, version, client_id)
    assert {k: body[k] for k in expected} == expected
    # Our encoder writes exactly what the client wrote.
    assert encode_request(api_key, version, header.correlation_id, client_id, body)[4:] == frame


def test_librdkafka_metadata_asks_for_its_topic_by_name():
    _, body = decode_request(_load("librdkafka-metadata-v12"))
    assert [t["name"] for t in body["topics"]] == ["fixtures"]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("librdkafka-produce-v9", b"hello from librdkafka"),
        ("kafka-python-produce-v9", b"hello from kafka-python"),
    ],
)
def test_captured_produce_carries_a_v2_record_batch(name, value):
    _, body = decode_request(_load(name))
    (topic,) = body["topic_data"]
    (partition,) = topic["partition_data"]
    records = partition["records"]
    assert topic["name"] == "fixtures" and partition["index"] == 0
    assert isinstance(records, memoryview)  # zero-copy slice of the frame
    assert records[16] == 2  # record batch magic (KIP-98 message format v2)
    assert value in bytes(records)


def test_kafka_python_api_versions_v4_gets_the_fallback_and_then_asks_v3():
    # kafka-python 3 opens with ApiVersions v4; KIP-511 says answer v0 + UNSUPPORTED_VERSION.
    with pytest.raises(UnsupportedVersion) as excinfo:
        decode_request(_load("kafka-python-apiversions-v4"))
    header = excinfo.value.header
    assert (header.api_key, header.api_version, header.client_id) == (18, 4, KAFKA_PYTHON)
    _, body = decode_response(18, 0, api_versions_fallback_response(header)[4:])
    assert body["error_code"] == ErrorCode.UNSUPPORTED_VERSION
    assert {"api_key": 18, "min_version": 0, "max_version": 3} in body["api_keys"]
