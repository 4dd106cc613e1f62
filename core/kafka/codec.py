"""Whole requests and responses: headers, bodies and size prefixes.

Header rules (https://kafka.apache.org/protocol#protocol_messages, KIP-482):
request header v1 (api key, version, correlation id, nullable int16-length
client id) for non-flexible versions, v2 (v1 + tagged fields) for flexible
ones; response header v0 (correlation id) or v1 (+ tagged fields). KIP-511:
ApiVersions responses always use response header v0, so a client that sent
a version we don't know can still read our answer.
"""

from __future__ import annotations

import struct
from typing import Any

from .api_keys import ApiKey
from .errors import ErrorCode, InvalidRequest, ProtocolViolation, UnsupportedVersion
from .header import RequestHeader as RequestHeader
from .messages import APIS, SUPPORTED_VERSIONS
from .schema import Message
from .types import Malformed, skip_tagged_fields

_SIZE = struct.Struct(">i")
_HEADER_V1 = struct.Struct(">hhih")  # api key, api version, correlation id, client id length
_HEADER_FIXED = struct.Struct(">hhi")
_NULL_CLIENT_ID = b"\xff\xff"
_NO_TAGS = b"\x00"

# What a malformed frame can raise while being read; all of it is the peer's fault.
_DECODE_ERRORS = (struct.error, IndexError, ValueError, OverflowError)
_API_KEYS = {int(key): key for key in ApiKey}


def _message(api_key: int, api_version: int, *, response: bool) -> Message | None:
    api = APIS.get(api_key)
    if api is None or api_version not in api.request.valid:
        return None
    return api.response if response else api.request


def _has_tagged_header(api_key: int, message: Message, version: int, *, response: bool) -> bool:
    if response and api_key == ApiKey.API_VERSIONS:
        return False  # KIP-511: always response header v0
    return message.is_flexible(version)


def decode_request(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, dict[str, Any]]:
    """Decode one frame (size prefix already stripped) into its header and body dict.

    Raises UnsupportedVersion (unknown api key or version; ``.header`` set),
    InvalidRequest (unreadable header, malformed/truncated body, trailing bytes).
    """
    buf = memoryview(frame)
    if buf.ndim != 1 or buf.itemsize != 1:
        buf = buf.cast("B")
    try:
        api_key, api_version, correlation_id, n = _HEADER_V1.unpack_from(buf, 0)
        if n == -1:
            client_id, pos = None, 10
        elif n < -1 or 10 + n > len(buf):
            raise Malformed(f"client id length {n}")
        else:
            pos = 10 + n
            # Lenient like Kafka's Java String decoding: the client id is only for logs.
            client_id = str(buf[10:pos], "utf-8", "replace")
    except _DECODE_ERRORS as exc:
        raise InvalidRequest(f"unreadable request header: {exc}") from exc

    header = RequestHeader(_API_KEYS.get(api_key, api_key), api_version, correlation_id, client_id)
    message = _message(api_key, api_version, response=False)
    if message is None:
        raise UnsupportedVersion(
            f"api key {api_key} version {api_version} is not supported", header
        )
    try:
        if message.is_flexible(api_version):
            pos = skip_tagged_fields(buf, pos)  # request header v2
        body, pos = message.codec(api_version).decode(buf, pos)
    except _DECODE_ERRORS as exc:
        raise InvalidRequest(f"malformed {message.name} v{api_version}: {exc}", header) from exc
    # Zero bytes after a flexible request are empty tag buffers written twice (librdkafka's
    # AlterUserScramCredentials does so; Kafka's parser ignores what follows a request).
    if pos != len(buf) and not (message.is_flexible(api_version) and not any(buf[pos:])):
        raise InvalidRequest(
            f"{len(buf) - pos} unexpected bytes after {message.name} v{api_version}", header
        )
    return header, body


class EncodedResponse(dict[str, Any]):
    """A response body already encoded (``encode_response_body``), answered as is: one
    encoding sent to every client that asked the same (``agents.shared_answers``). As a
    dict it says only ``error_code`` 0 (these answers have no top-level error)."""

    __slots__ = ("encoded",)

    def __init__(self, encoded: bytes) -> None:
        super().__init__(error_code=0)
        self.encoded = encoded

    def decoded(self, header: RequestHeader) -> dict[str, Any]:
        """The body as a dict again (to change it)."""
        message = _response_message(header)
        body: dict[str, Any] = message.codec(header.api_version).decode(
            memoryview(self.encoded), 0
        )[0]
        return body


def _response_message(header: RequestHeader) -> Message:
    message = _message(header.api_key, header.api_version, response=True)
    if message is None:
        raise ValueError(f"no response schema for api {header.api_key} v{header.api_version}")
    return message


def encode_response_body(header: RequestHeader, body: dict[str, Any]) -> bytes:
    """The response body alone (no size prefix, no response header)."""
    parts: list[Any] = []
    _response_message(header).codec(header.api_version).encode(body, parts)
    return b"".join(parts)


def encode_response(header: RequestHeader, body: dict[str, Any]) -> bytes:
    """Encode the response to ``header``'s request, with size prefix and response header."""
    parts = encode_response_parts(header, body)
    return parts if isinstance(parts, bytes) else b"".join(parts)


def encode_response_parts(
    header: RequestHeader, body: dict[str, Any]
) -> bytes | tuple[bytes, bytes]:
    """`encode_response`, except that an answer already encoded (`EncodedResponse`) comes
    as two pieces to send one after the other — its size prefix and response header, then
    the shared body itself —, so that one body serves every client without a copy each."""
    message = _response_message(header)
    correlation = _SIZE.pack(header.correlation_id)
    if _has_tagged_header(header.api_key, message, header.api_version, response=True):
        correlation += _NO_TAGS
    if isinstance(body, EncodedResponse):
        return _SIZE.pack(len(correlation) + len(body.encoded)) + correlation, body.encoded
    return _framed(message, header.api_version, correlation, body)


def encode_request(
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    body: dict[str, Any],
) -> bytes:
    """Encode a request, with size prefix (for tests, benchmarks and fuzzing)."""
    message = _message(api_key, api_version, response=False)
    if message is None:
        raise ValueError(f"no request schema for api {api_key} v{api_version}")
    head = _HEADER_FIXED.pack(api_key, api_version, correlation_id)
    if client_id is None:
        head += _NULL_CLIENT_ID
    else:
        raw = client_id.encode("utf-8")
        head += struct.pack(">h", len(raw)) + raw  # int16 length even in header v2
    if message.is_flexible(api_version):
        head += _NO_TAGS
    return _framed(message, api_version, head, body)


def _framed(message: Message, version: int, head: bytes, body: dict[str, Any]) -> bytes:
    parts: list[Any] = [b"", head]
    try:
        message.codec(version).encode(body, parts)
    except Exception as exc:
        exc.add_note(f"while encoding {message.name} v{version}")
        raise
    parts[0] = _SIZE.pack(sum(map(len, parts)))
    return b"".join(parts)


def decode_response(
    api_key: int, api_version: int, frame: bytes | bytearray | memoryview
) -> tuple[int, dict[str, Any]]:
    """Decode a response frame (size prefix stripped) into (correlation id, body)."""
    message = _message(api_key, api_version, response=True)
    if message is None:
        raise ValueError(f"no response schema for api {api_key} v{api_version}")
    buf = memoryview(frame)
    try:
        (correlation_id,) = _SIZE.unpack_from(buf, 0)
        pos = 4
        if _has_tagged_header(api_key, message, api_version, response=True):
            pos = skip_tagged_fields(buf, pos)
        body, pos = message.codec(api_version).decode(buf, pos)
    except _DECODE_ERRORS as exc:
        raise ProtocolViolation(f"malformed {message.name} v{api_version}: {exc}") from exc
    if pos != len(buf):
        raise ProtocolViolation(f"{len(buf) - pos} unexpected bytes after {message.name}")
    return correlation_id, body


def supported_api_keys() -> list[dict[str, int]]:
    """The ``api_keys`` array of an ApiVersions response: every API and version range we serve."""
    return [
        {"api_key": int(key), "min_version": lo, "max_version": hi}
        for key, (lo, hi) in SUPPORTED_VERSIONS.items()
    ]


def api_versions_fallback_response(header: RequestHeader) -> bytes:
    """KIP-511: answer an ApiVersions request of a version we don't support.

    The reply is an ApiVersions v0 response (header v0) with UNSUPPORTED_VERSION
    and our full api key list, so the client retries with a version we know.
    """
    v0 = RequestHeader(ApiKey.API_VERSIONS, 0, header.correlation_id, header.client_id)
    body = {"error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": supported_api_keys()}
    return encode_response(v0, body)
