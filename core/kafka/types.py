"""Primitive Kafka wire types (https://kafka.apache.org/protocol#protocol_types).

Every concrete type is a ``WireType`` with two plain functions:

* ``decode(buf, pos) -> (value, new_pos)`` reads from ``buf``, a memoryview
  of one frame. Short input raises ``struct.error``/``IndexError``, bad
  content raises ``Malformed``; the codec turns all of them into InvalidRequest.
* ``encode(value, out)`` appends bytes-like parts to the list ``out``; the
  caller joins them once, so large record blobs are copied exactly once.

Declarations name a *family* (``String``, ``Bytes``, ``Records``...);
``family.codec(flexible=..., nullable=...)`` picks the concrete encoding:
KIP-482 "compact" lengths (unsigned varint of length + 1, 0 meaning null)
in flexible versions, classic int16/int32 lengths (-1 meaning null) otherwise.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Sequence
from typing import Any

Decode = Callable[[memoryview, int], tuple[Any, int]]
Encode = Callable[[Any, list[Any]], None]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class Malformed(ValueError):
    """The bytes are not a valid value of the expected type (the peer's fault)."""


class WireType:
    """A concrete wire encoding: ``decode``/``encode`` functions plus metadata.

    ``fmt`` is the struct code of a fixed-width type (so runs of them can be
    read with one ``struct.unpack_from``), None otherwise. ``min_size`` bounds
    array lengths before allocating anything.
    """

    __slots__ = ("name", "decode", "encode", "fmt", "min_size", "zero")

    def __init__(
        self,
        name: str,
        decode: Decode,
        encode: Encode,
        *,
        zero: Any,
        min_size: int,
        fmt: str | None = None,
    ) -> None:
        self.name = name
        self.decode = decode
        self.encode = encode
        self.zero = zero
        self.min_size = min_size
        self.fmt = fmt

    def codec(self, *, flexible: bool, nullable: bool) -> WireType:
        """Fixed encodings look the same in every version and are never null."""
        if nullable:
            raise TypeError(f"{self.name} cannot be nullable")
        return self

    def __repr__(self) -> str:
        return f"<WireType {self.name}>"


# --- Varints (KIP-482 compact lengths and tagged fields; record format v2) ------

_SMALL_UVARINTS = [bytes([i]) for i in range(0x80)]


def read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    """Unsigned LEB128, at most 5 bytes (Kafka's 32-bit unsigned varint)."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    for shift in (7, 14, 21, 28):
        pos += 1
        b = buf[pos]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos + 1
    raise Malformed("unsigned varint longer than 5 bytes")


def write_uvarint(value: int) -> bytes:
    if 0 <= value < 0x80:
        return _SMALL_UVARINTS[value]
    if value < 0 or value > 0xFFFFFFFF:
        raise ValueError(f"unsigned varint out of range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_uvarlong(buf: memoryview, pos: int) -> tuple[int, int]:
    result = 0
    for shift in range(0, 70, 7):
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
    raise Malformed("varlong longer than 10 bytes")


def _write_uvarlong(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _zigzag_decoder(read: Callable[[memoryview, int], tuple[int, int]]) -> Decode:
    def decode(buf: memoryview, pos: int) -> tuple[int, int]:
        n, pos = read(buf, pos)
        return (n >> 1) ^ -(n & 1), pos

    return decode


def _zigzag_encoder(bits: int) -> Encode:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

    def encode(value: int, out: list[Any]) -> None:
        if not lo <= value <= hi:
            raise ValueError(f"varint{bits} out of range: {value}")
        out.append(_write_uvarlong(((value << 1) ^ (value >> (bits - 1))) & ((1 << bits) - 1)))

    return encode


def _encode_uvarint(value: int, out: list[Any]) -> None:
    out.append(write_uvarint(value))


# --- Fixed-width numbers --------------------------------------------------------


def _fixed(name: str, fmt: str, zero: Any) -> WireType:
    s = struct.Struct(">" + fmt)
    unpack, pack, size = s.unpack_from, s.pack, s.size

    def decode(buf: memoryview, pos: int) -> tuple[Any, int]:
        return unpack(buf, pos)[0], pos + size

    def encode(value: Any, out: list[Any]) -> None:
        out.append(pack(value))

    return WireType(name, decode, encode, zero=zero, min_size=size, fmt=fmt)


Int8 = _fixed("int8", "b", 0)
Int16 = _fixed("int16", "h", 0)
Int32 = _fixed("int32", "i", 0)
Int64 = _fixed("int64", "q", 0)
UInt16 = _fixed("uint16", "H", 0)
UInt32 = _fixed("uint32", "I", 0)
Float64 = _fixed("float64", "d", 0.0)
Boolean = _fixed("bool", "?", False)  # any non-zero byte reads as true, like Kafka

VarInt = WireType("varint", _zigzag_decoder(read_uvarint), _zigzag_encoder(32), zero=0, min_size=1)
VarLong = WireType(
    "varlong", _zigzag_decoder(_read_uvarlong), _zigzag_encoder(64), zero=0, min_size=1
)
UnsignedVarInt = WireType("uvarint", read_uvarint, _encode_uvarint, zero=0, min_size=1)

ZERO_UUID = uuid.UUID(int=0)  # Kafka's Uuid.ZERO_UUID, the "no topic id" value (KIP-516)


def _decode_uuid(buf: memoryview, pos: int) -> tuple[uuid.UUID, int]:
    end = pos + 16
    if end > len(buf):
        raise Malformed("truncated uuid")
    return uuid.UUID(bytes=bytes(buf[pos:end])), end


def _encode_uuid(value: uuid.UUID | str, out: list[Any]) -> None:
    out.append((uuid.UUID(value) if isinstance(value, str) else value).bytes)


Uuid = WireType("uuid", _decode_uuid, _encode_uuid, zero=ZERO_UUID, min_size=16)


# --- Length-prefixed families: strings, bytes, records ----------------------------


def _length_reader(compact: bool, classic: struct.Struct) -> Callable[..., Any]:
    if compact:

        def read_compact(buf: memoryview, pos: int) -> tuple[int, int]:
            n, pos = read_uvarint(buf, pos)
            return n - 1, pos

        return read_compact
    unpack, size = classic.unpack_from, classic.size

    def read_classic(buf: memoryview, pos: int) -> tuple[int, int]:
        return unpack(buf, pos)[0], pos + size

    return read_classic


def _length_writer(compact: bool, classic: struct.Struct) -> Callable[[int], bytes]:
    if compact:

        def write_compact(n: int) -> bytes:
            return _SMALL_UVARINTS[n + 1] if -1 <= n < 0x7F else write_uvarint(n + 1)

        return write_compact
    return classic.pack


def _blob_decoder(
    read_len: Callable[..., Any], nullable: bool, convert: Callable[..., Any], name: str
) -> Decode:
    def decode(buf: memoryview, pos: int) -> tuple[Any, int]:
        n, pos = read_len(buf, pos)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise Malformed(f"invalid {name} length {n}")
        end = pos + n
        if end > len(buf):
            raise Malformed(f"truncated {name}: need {n} bytes")
        return convert(buf[pos:end]), end

    return decode


def _blob_encoder(
    write_len: Callable[..., Any], null: bytes | None, to_bytes: Callable[..., Any], name: str
) -> Encode:
    def encode(value: Any, out: list[Any]) -> None:
        if value is None:
            if null is None:
                raise TypeError(f"{name} is not nullable in this version")
            out.append(null)
            return
        data = to_bytes(value)
        out.append(write_len(len(data)) + data)

    return encode


def _as_byte_view(part: Any) -> Any:
    """Records may arrive as memoryviews of any shape; lengths are counted in bytes."""
    if type(part) is memoryview and (part.itemsize != 1 or part.ndim != 1):
        return part.cast("B")
    return part


def _records_encoder(write_len: Callable[..., Any], null: bytes) -> Encode:
    # Record batches pass through untouched (parsing lives in records.py). A list
    # lets a fetch response return many stored batches without concatenating them.
    def encode(value: Any, out: list[Any]) -> None:
        if value is None:
            out.append(null)
        elif isinstance(value, (list, tuple)):
            parts = [_as_byte_view(p) for p in value]
            out.append(write_len(sum(map(len, parts))))
            out.extend(parts)
        else:
            value = _as_byte_view(value)
            out.append(write_len(len(value)))
            out.append(value)

    return encode


def _utf8(view: memoryview) -> str:
    return str(view, "utf-8")


def _to_utf8(value: str) -> bytes:
    return value.encode("utf-8")


class Family:
    """A declared type whose wire form depends on flexible/nullable (strings, bytes...)."""

    def __init__(self, name: str, zero: Any, variants: dict[tuple[bool, bool], WireType]):
        self.name = name
        self.zero = zero
        self._variants = variants

    def codec(self, *, flexible: bool, nullable: bool) -> WireType:
        return self._variants[(flexible, nullable)]

    def __repr__(self) -> str:
        return f"<Family {self.name}>"


def _family(
    name: str,
    classic: struct.Struct,
    zero: Any,
    convert: Callable[..., Any],
    to_bytes: Callable[..., Any] | None,
) -> Family:
    variants = {}
    for flexible in (False, True):
        read_len, write_len = _length_reader(flexible, classic), _length_writer(flexible, classic)
        null = b"\x00" if flexible else write_len(-1)
        for nullable in (False, True):
            label = ("compact_" if flexible else "") + ("nullable_" if nullable else "") + name
            decode = _blob_decoder(read_len, nullable, convert, label)
            if to_bytes is None:
                encode = _records_encoder(write_len, null)
            else:
                encode = _blob_encoder(write_len, null if nullable else None, to_bytes, label)
            min_size = 1 if flexible else classic.size
            variants[(flexible, nullable)] = WireType(
                label, decode, encode, zero=zero, min_size=min_size
            )
    return Family(name, zero, variants)


String = _family("string", _I16, "", _utf8, _to_utf8)
Bytes = _family("bytes", _I32, b"", bytes, bytes)
# Records stay zero-copy: a memoryview slice of the request frame.
Records = _family("records", _I32, None, lambda view: view, None)

CompactString = String.codec(flexible=True, nullable=False)
CompactNullableString = String.codec(flexible=True, nullable=True)
NullableString = String.codec(flexible=False, nullable=True)
CompactBytes = Bytes.codec(flexible=True, nullable=False)
CompactNullableBytes = Bytes.codec(flexible=True, nullable=True)
NullableBytes = Bytes.codec(flexible=False, nullable=True)


# --- Arrays -----------------------------------------------------------------------------


def array(element: WireType, *, compact: bool, nullable: bool) -> WireType:
    """An array of ``element``: int32 count (or compact count + 1) then the items."""
    read_len, write_len = _length_reader(compact, _I32), _length_writer(compact, _I32)
    null = b"\x00" if compact else write_len(-1)
    min_item = element.min_size
    name = f"[]{element.name}"
    fmt = element.fmt
    elem_decode, elem_encode = element.decode, element.encode

    def count(buf: memoryview, pos: int) -> tuple[int, int]:
        n, pos = read_len(buf, pos)
        if n < 0 and not (n == -1 and nullable):
            raise Malformed(f"invalid {name} length {n}")
        if n * min_item > len(buf) - pos:
            raise Malformed(f"truncated {name}: {n} items")
        return n, pos

    if fmt is not None:  # []int32 and friends: one struct call for the whole array
        size = element.min_size
        by_count: dict[int, struct.Struct] = {}

        def packer(n: int) -> struct.Struct:
            s = by_count.get(n)
            if s is None:
                s = struct.Struct(f">{n}{fmt}")
                if n <= 64:  # replica lists and the like; larger ones are rare
                    by_count[n] = s
            return s

        def decode(buf: memoryview, pos: int) -> tuple[Any, int]:
            n, pos = count(buf, pos)
            if n < 0:
                return None, pos
            return list(packer(n).unpack_from(buf, pos)), pos + n * size

        def encode(value: Any, out: list[Any]) -> None:
            if value is None:
                _encode_null(out)
                return
            n = len(value)
            out.append(write_len(n) + packer(n).pack(*value))

    else:

        def decode(buf: memoryview, pos: int) -> tuple[Any, int]:
            n, pos = count(buf, pos)
            if n < 0:
                return None, pos
            items: list[Any] = []
            append = items.append
            for _ in range(n):
                item, pos = elem_decode(buf, pos)
                append(item)
            return items, pos

        def encode(value: Any, out: list[Any]) -> None:
            if value is None:
                _encode_null(out)
                return
            out.append(write_len(len(value)))
            for item in value:
                elem_encode(item, out)

    def _encode_null(out: list[Any]) -> None:
        if not nullable:
            raise TypeError(f"{name} is not nullable in this version")
        out.append(null)

    return WireType(name, decode, encode, zero=[], min_size=1 if compact else 4)


# --- Tagged fields (KIP-482) ------------------------------------------------------------


class TaggedFields:
    """The tagged-field section that ends every flexible struct and header.

    Wire form: uvarint count, then per field uvarint tag, uvarint size, value,
    in increasing tag order. Unknown tags are skipped (that is the point of
    KIP-482); a known tag's value must fill exactly its declared size.
    ``fields`` holds ``(tag, name, codec, default)``; a field equal to its
    default is not written.
    """

    __slots__ = ("_by_tag", "_fields")

    def __init__(self, fields: Sequence[tuple[int, str, WireType, Any]] = ()) -> None:
        self._fields = sorted(fields, key=lambda f: f[0])
        self._by_tag = {tag: (name, codec.decode) for tag, name, codec, _ in self._fields}

    def decode_into(self, buf: memoryview, pos: int, out: dict[str, Any] | None) -> int:
        if buf[pos] == 0:  # the usual case: no tagged fields at all
            return pos + 1
        n, pos = read_uvarint(buf, pos)
        by_tag = self._by_tag
        for _ in range(n):
            tag, pos = read_uvarint(buf, pos)
            size, pos = read_uvarint(buf, pos)
            end = pos + size
            if end > len(buf):
                raise Malformed(f"truncated tagged field {tag}")
            known = by_tag.get(tag)
            if known is not None and out is not None:
                name, decode = known
                value, after = decode(buf, pos)
                if after != end:
                    raise Malformed(f"tagged field {tag} ({name}) does not fill its size")
                out[name] = value
            pos = end
        return pos

    def encode_from(self, values: dict[str, Any], out: list[Any]) -> None:
        if not self._fields:
            out.append(b"\x00")
            return
        chunks = []
        for tag, name, codec, default in self._fields:
            value = values.get(name, default)
            if value == default:
                continue
            parts: list[Any] = []
            codec.encode(value, parts)
            data = b"".join(parts)
            chunks.append(write_uvarint(tag) + write_uvarint(len(data)) + data)
        if not chunks:
            out.append(b"\x00")
            return
        out.append(write_uvarint(len(chunks)))
        out.extend(chunks)


EMPTY_TAGGED_FIELDS = TaggedFields()


def skip_tagged_fields(buf: memoryview, pos: int) -> int:
    """Read past a tagged-field section whose tags we don't use (e.g. request header v2)."""
    return EMPTY_TAGGED_FIELDS.decode_into(buf, pos, None)
