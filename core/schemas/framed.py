"""Keys and values framed with a registry schema id — Confluent's wire format: a magic
byte 0, the schema id (4 bytes, big-endian), then the payload (Protobuf: the message
indexes first) — read back as JSON-able values for people to look at (the console's
message browser). Pure: the caller finds the schema by its id and parses it
(`formats.parse`); nothing here reads a registry.
"""

from __future__ import annotations

import datetime
import decimal
import io
import json
import uuid
from typing import Any

import fastavro
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.json_format import MessageToDict

from core.schemas.formats import ParsedSchema

MAGIC = 0
HEADER_BYTES = 5


class FrameError(ValueError):
    """The bytes start as a frame (magic byte 0) but are too short to be one."""


class UndecodablePayload(ValueError):
    """The payload does not read with its schema: the message says why."""


def frame_split(raw: bytes) -> tuple[int, bytes] | None:
    """``(schema id, payload)`` of framed bytes, or None: they do not start with the magic
    byte (not framed). Raises `FrameError` when they start with it but are shorter than
    the 5-byte header."""
    if not raw or raw[0] != MAGIC:
        return None
    if len(raw) < HEADER_BYTES:
        raise FrameError(
            f"bad frame: {len(raw)} bytes, a schema-id frame has a 5-byte header (magic 0, id)"
        )
    return int.from_bytes(raw[1:HEADER_BYTES], "big"), raw[HEADER_BYTES:]


def payload_decode(schema: ParsedSchema, payload: bytes) -> Any:
    """The payload read with `schema` as a JSON-able value (Avro bytes and fixed as
    ``\\u00XX`` strings, as Avro's JSON encoding writes them; decimals, dates and UUIDs
    as strings; Protobuf as its JSON mapping with the fields' own names). Raises
    `UndecodablePayload`."""
    try:
        if schema.schema_type == "AVRO":
            stream = io.BytesIO(payload)
            value = fastavro.schemaless_reader(stream, schema.parsed, None)
            if stream.tell() != len(payload):
                left = len(payload) - stream.tell()
                raise UndecodablePayload(f"{left} bytes left after the Avro value")
            return _jsonable(value)
        if schema.schema_type == "JSON":
            return json.loads(payload)
        return _protobuf_decode(schema, payload)
    except UndecodablePayload:
        raise
    except (EOFError, IndexError, StopIteration):  # fastavro's readers at the end of the bytes
        raise UndecodablePayload("the payload ends before the value does") from None
    except RecursionError:
        raise UndecodablePayload("nested too deeply") from None
    except Exception as exc:  # a reader's error on bytes it was never meant to read
        raise UndecodablePayload(f"{type(exc).__name__}: {exc}") from None


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("latin-1")  # Avro's JSON encoding of bytes: one char a byte
    if isinstance(value, decimal.Decimal | datetime.date | datetime.time | uuid.UUID):
        return str(value)
    return value


def _varint(data: bytes, at: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if at >= len(data) or shift > 63:
            raise UndecodablePayload("bad message indexes: a varint runs past the payload")
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), at  # zigzag, as Confluent writes them


def _message_indexes(payload: bytes) -> tuple[list[int], int]:
    """Confluent's Protobuf message indexes (a count, then each index; a lone 0 is
    ``[0]``, the first message) and where the message starts."""
    count, at = _varint(payload, 0)
    if count == 0:
        return [0], at
    if not 0 < count <= 100:
        raise UndecodablePayload(f"bad message indexes: a count of {count}")
    indexes = []
    for _ in range(count):
        index, at = _varint(payload, at)
        indexes.append(index)
    return indexes, at


def _protobuf_decode(schema: ParsedSchema, payload: bytes) -> Any:
    indexes, at = _message_indexes(payload)
    file = schema.parsed
    pool = descriptor_pool.DescriptorPool()
    _pool_add(pool, file, schema.named)
    messages = file.message_type
    names = [file.package] if file.package else []
    for index in indexes:
        if not 0 <= index < len(messages):
            raise UndecodablePayload(f"bad message indexes: no message #{index} in the schema")
        names.append(messages[index].name)
        messages = messages[index].nested_type
    descriptor = pool.FindMessageTypeByName(".".join(names))
    message = message_factory.GetMessageClass(descriptor)()
    message.ParseFromString(payload[at:])
    return MessageToDict(message, preserving_proto_field_name=True)


def _pool_add(
    pool: Any, file: Any, named: dict[str, Any], adding: frozenset[str] = frozenset()
) -> None:
    """Add `file` to `pool` after its imports: the references' files (`named`), or
    Google's well-known types (the default pool has those that protobuf ships)."""
    for name in file.dependency:
        try:
            pool.FindFileByName(name)
            continue
        except KeyError:
            pass
        if name in named and name not in adding:
            _pool_add(pool, named[name], named, adding | {name})
        elif name.startswith("google/protobuf/"):
            from google.protobuf import descriptor_pb2

            _well_known_import(name)
            proto = descriptor_pb2.FileDescriptorProto()
            descriptor_pool.Default().FindFileByName(name).CopyToProto(proto)
            _pool_add(pool, proto, named, adding | {name})
    try:
        pool.FindFileByName(file.name)
    except KeyError:
        pool.Add(file)


def _well_known_import(name: str) -> None:
    """Import protobuf's module of a well-known type, which puts it in the default pool."""
    import importlib

    module = name.removeprefix("google/protobuf/").removesuffix(".proto")
    try:
        importlib.import_module(f"google.protobuf.{module}_pb2")
    except ImportError:
        raise UndecodablePayload(
            f"the schema imports {name}, which protobuf does not ship"
        ) from None
