"""Every API, every supported version, both directions: a body with a non-default
value in every field survives encode → decode, and re-encodes to the same bytes."""

from __future__ import annotations

import pytest

from core.kafka import (
    SUPPORTED_VERSIONS,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from core.kafka.messages import APIS
from tests.core.kafka.samples import expected_body, sample_body

VERSIONS = [
    (api_key, version)
    for api_key, (lo, hi) in SUPPORTED_VERSIONS.items()
    for version in range(lo, hi + 1)
]


def _id(case):
    api_key, version = case
    return f"{api_key.name}-v{version}"


@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
@pytest.mark.parametrize("case", VERSIONS, ids=[_id(c) for c in VERSIONS])
def test_request_round_trip(case, nulls):
    api_key, version = case
    message = APIS[api_key].request
    body = sample_body(message, version, nulls=nulls)
    frame = encode_request(api_key, version, 99, "round-trip", body)

    header, decoded = decode_request(frame[4:])

    assert header == RequestHeader(api_key, version, 99, "round-trip")
    assert decoded == expected_body(message, version, body)
    assert encode_request(api_key, version, 99, "round-trip", decoded) == frame


@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
@pytest.mark.parametrize("case", VERSIONS, ids=[_id(c) for c in VERSIONS])
def test_response_round_trip(case, nulls):
    api_key, version = case
    message = APIS[api_key].response
    body = sample_body(message, version, nulls=nulls)
    header = RequestHeader(api_key, version, 99, "round-trip")
    frame = encode_response(header, body)

    correlation_id, decoded = decode_response(api_key, version, frame[4:])

    assert correlation_id == 99
    assert decoded == expected_body(message, version, body)
    assert encode_response(header, decoded) == frame


def test_an_empty_body_encodes_every_field_as_its_default():
    for api_key, (lo, hi) in SUPPORTED_VERSIONS.items():
        for version in (lo, hi):
            message = APIS[api_key].request
            frame = encode_request(api_key, version, 1, None, {})
            _, decoded = decode_request(frame[4:])
            # A missing key is written as the default; where the default is None
            # but the version has no null (e.g. Metadata v0 topics), as empty.
            expected = {
                f.name: f.encode_default(version)
                if version in f.versions
                else f.default_value(version)
                for f in message.struct.fields
            }
            assert decoded == expected


def test_keys_outside_the_version_are_ignored_when_encoding():
    body = {"acks": 1, "timeout_ms": 5, "topic_data": [], "transactional_id": "only-v3+"}
    legacy = encode_request(0, 3, 1, None, body)
    _, decoded = decode_request(legacy[4:])
    assert decoded["transactional_id"] == "only-v3+"
    fetch = encode_request(1, 4, 1, None, {"rack_id": "v11+ only", "topics": []})
    assert decode_request(fetch[4:])[1]["rack_id"] == ""


def test_decoded_defaults_are_fresh_objects():
    frame = encode_request(1, 4, 1, None, {"topics": []})
    _, first = decode_request(frame[4:])
    first["forgotten_topics_data"].append("mutated")
    _, second = decode_request(frame[4:])
    assert second["forgotten_topics_data"] == []


def test_encoding_a_wrong_value_names_the_field():
    with pytest.raises(TypeError) as excinfo:
        encode_request(0, 9, 1, None, {"topic_data": [{"name": None}]})
    assert any("name" in note for note in excinfo.value.__notes__)
