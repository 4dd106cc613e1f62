"""Field-by-field byte builders for golden tests, written independently of the codec."""

from __future__ import annotations

import struct


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def boolean(v: bool) -> bytes:
    return b"\x01" if v else b"\x00"


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def string(s: str | None) -> bytes:
    if s is None:
        return i16(-1)
    raw = s.encode()
    return i16(len(raw)) + raw


def cstring(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    raw = s.encode()
    return uvarint(len(raw) + 1) + raw


def blob(b: bytes | None) -> bytes:
    return i32(-1) if b is None else i32(len(b)) + b


def cblob(b: bytes | None) -> bytes:
    return b"\x00" if b is None else uvarint(len(b) + 1) + b


def array(items: list[bytes] | None) -> bytes:
    return i32(-1) if items is None else i32(len(items)) + b"".join(items)


def carray(items: list[bytes] | None) -> bytes:
    return b"\x00" if items is None else uvarint(len(items) + 1) + b"".join(items)


NO_TAGS = b"\x00"


def tags(*fields: tuple[int, bytes]) -> bytes:
    """A tagged-field section: count, then (tag, size, value) per field."""
    return uvarint(len(fields)) + b"".join(
        uvarint(tag) + uvarint(len(value)) + value for tag, value in fields
    )


def request_header(
    api_key: int, version: int, correlation_id: int, client_id: str | None, *, flexible: bool
) -> bytes:
    # Request header v1/v2: the client id keeps its int16 length even in v2.
    head = i16(api_key) + i16(version) + i32(correlation_id) + string(client_id)
    return head + NO_TAGS if flexible else head


def framed(payload: bytes) -> bytes:
    return i32(len(payload)) + payload
