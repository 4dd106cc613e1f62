"""A peer's bad bytes become ProtocolViolation subclasses, never anything else."""

from __future__ import annotations

import pytest

from core.kafka import (
    SUPPORTED_VERSIONS,
    ApiKey,
    ErrorCode,
    InvalidRequest,
    ProtocolViolation,
    RequestHeader,
    UnsupportedVersion,
    api_versions_fallback_response,
    decode_request,
    decode_response,
    encode_request,
)
from tests.core.kafka.wire import (
    NO_TAGS,
    carray,
    cstring,
    i16,
    i32,
    request_header,
    string,
    tags,
    uvarint,
)


def _produce_v9() -> bytes:
    body = {
        "acks": 1,
        "timeout_ms": 100,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"batch"}]}],
    }
    return encode_request(ApiKey.PRODUCE, 9, 5, "client", body)[4:]


def test_bytes_after_a_complete_body_are_refused():
    for extra in (b"\x01", b"\x00\x07", b"\x00" * 3 + b"\xff"):
        with pytest.raises(InvalidRequest) as excinfo:
            decode_request(_produce_v9() + extra)
        assert excinfo.value.header == RequestHeader(ApiKey.PRODUCE, 9, 5, "client")
        assert excinfo.value.error_code == ErrorCode.INVALID_REQUEST


def test_empty_tag_buffers_after_a_flexible_body_are_tolerated():
    """librdkafka's AlterUserScramCredentials writes the request's empty tag buffer twice;
    Kafka's parser ignores what follows a request, so zero bytes there are let through."""
    header, body = decode_request(_produce_v9() + b"\x00\x00")
    assert header == RequestHeader(ApiKey.PRODUCE, 9, 5, "client")
    assert body == decode_request(_produce_v9())[1]


def test_every_truncation_of_a_body_is_refused_with_its_header():
    frame = _produce_v9()
    header_size = 2 + 2 + 4 + 2 + len("client") + 1
    for cut in range(header_size, len(frame)):
        with pytest.raises(InvalidRequest) as excinfo:
            decode_request(frame[:cut])
        assert excinfo.value.header.correlation_id == 5, cut


def test_a_truncated_header_is_refused_without_a_header():
    frame = _produce_v9()
    for cut in range(0, 10 + len("client")):
        with pytest.raises(InvalidRequest) as excinfo:
            decode_request(frame[:cut])
        assert excinfo.value.header is None


def test_an_unknown_api_key_is_unsupported_and_keeps_the_header():
    with pytest.raises(UnsupportedVersion) as excinfo:
        decode_request(request_header(999, 0, 8, "c", flexible=False))
    assert excinfo.value.header == RequestHeader(999, 0, 8, "c")
    assert excinfo.value.error_code == ErrorCode.UNSUPPORTED_VERSION


@pytest.mark.parametrize(
    ("api_key", "version"),
    [(ApiKey.PRODUCE, 2), (ApiKey.PRODUCE, 10), (ApiKey.FETCH, 3), (ApiKey.WRITE_TXN_MARKERS, 0)],
)
def test_versions_outside_supported_versions_are_unsupported(api_key, version):
    with pytest.raises(UnsupportedVersion) as excinfo:
        decode_request(request_header(api_key, version, 8, None, flexible=True) + b"junk")
    assert excinfo.value.header.api_key == api_key
    assert excinfo.value.header.api_version == version
    assert isinstance(excinfo.value, ProtocolViolation)


def test_an_api_versions_request_too_new_gets_the_kip_511_fallback():
    frame = request_header(ApiKey.API_VERSIONS, 9, 31, "future-client", flexible=True) + b"??"
    with pytest.raises(UnsupportedVersion) as excinfo:
        decode_request(frame)

    response = api_versions_fallback_response(excinfo.value.header)

    # Size, then response header v0 (just the correlation id), then a v0 body.
    assert response[4:8] == i32(31)
    assert response[8:10] == i16(35)
    correlation_id, body = decode_response(ApiKey.API_VERSIONS, 0, response[4:])
    assert correlation_id == 31
    assert body["error_code"] == ErrorCode.UNSUPPORTED_VERSION
    advertised = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
    assert advertised == SUPPORTED_VERSIONS
    assert advertised[ApiKey.API_VERSIONS] == (0, 3)


def test_an_empty_frame_is_invalid():
    with pytest.raises(InvalidRequest):
        decode_request(b"")


def test_null_in_a_non_nullable_string_is_invalid():
    body = cstring(None) + cstring("1.0") + NO_TAGS
    with pytest.raises(InvalidRequest, match="client_software_name|compact_string"):
        decode_request(request_header(18, 3, 1, "c", flexible=True) + body)


def test_invalid_utf8_in_a_body_string_is_invalid():
    body = uvarint(3) + b"\xff\xfe" + cstring("1.0") + NO_TAGS
    with pytest.raises(InvalidRequest):
        decode_request(request_header(18, 3, 1, "c", flexible=True) + body)


def test_invalid_utf8_in_the_client_id_is_replaced_like_kafka_does():
    frame = i16(18) + i16(0) + i32(1) + i16(2) + b"\xff\xfe"
    header, _ = decode_request(frame)
    assert header.client_id == "\ufffd\ufffd"


def test_a_negative_array_length_is_invalid():
    frame = request_header(3, 4, 1, "c", flexible=False) + i32(-2) + b"\x01"
    with pytest.raises(InvalidRequest):
        decode_request(frame)


def test_an_array_longer_than_the_frame_is_refused_without_allocating():
    frame = request_header(3, 4, 1, "c", flexible=False) + i32(2**31 - 1) + b"\x01"
    with pytest.raises(InvalidRequest, match="truncated"):
        decode_request(frame)


def test_unknown_tagged_fields_are_skipped():
    body = cstring("a") + cstring("b") + tags((7, b"future"), (9, b""))
    _, decoded = decode_request(request_header(18, 3, 1, "c", flexible=True) + body)
    assert decoded == {"client_software_name": "a", "client_software_version": "b"}


def test_unknown_tagged_fields_in_the_request_header_are_skipped():
    frame = i16(18) + i16(3) + i32(1) + string("c") + tags((0, b"x")) + cstring("a") + cstring("b")
    _, decoded = decode_request(frame + NO_TAGS)
    assert decoded["client_software_name"] == "a"


def test_a_known_tagged_field_must_fill_exactly_its_size():
    # Fetch v12, tag 0 = cluster_id; declare 5 bytes but hold a 3-byte compact string.
    fetch_body = i32(-1) + i32(0) * 3 + b"\x00" + i32(0) + i32(-1) + carray([]) + carray([])
    body = fetch_body + cstring("") + uvarint(1) + uvarint(0) + uvarint(5) + cstring("ab") + b"zz"
    with pytest.raises(InvalidRequest, match="does not fill"):
        decode_request(request_header(1, 12, 1, "c", flexible=True) + body)


def test_an_overlong_varint_is_invalid():
    frame = request_header(18, 3, 1, "c", flexible=True) + b"\xff" * 6
    with pytest.raises(InvalidRequest, match="varint"):
        decode_request(frame)


def test_a_malformed_response_is_a_protocol_violation():
    with pytest.raises(ProtocolViolation):
        decode_response(ApiKey.API_VERSIONS, 0, i32(1) + i16(0) + i32(5))
