"""Confluent-framed keys and values read back for people (`core.schemas.framed`): the
frame, Avro (bytes, logical types, trailing bytes), JSON and Protobuf with its message
indexes (the lone 0, a nested message, a bad index), each refusal saying why."""

from __future__ import annotations

import base64
import io
import json

import fastavro
import pytest
from google.protobuf import descriptor_pb2

from core.schemas import formats
from core.schemas.framed import FrameError, UndecodablePayload, frame_split, payload_decode

ORDER = {"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "raw", "type": "bytes"},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}}]}  # fmt: skip


def _avro(value: dict) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(ORDER), value)
    return out.getvalue()


def test_the_frame_is_magic_zero_and_a_big_endian_id():
    assert frame_split(b"\x00\x00\x00\x01\x00payload") == (256, b"payload")
    assert frame_split(b"\x00\x00\x00\x00\x07") == (7, b"")
    assert frame_split(b'{"a": 1}') is None
    assert frame_split(b"") is None
    with pytest.raises(FrameError, match="bad frame: 4 bytes"):
        frame_split(b"\x00\x00\x00\x01")


def test_an_avro_value_reads_as_json_and_trailing_or_missing_bytes_say_why():
    schema = formats.parse(json.dumps(ORDER))
    raw = _avro({"id": 7, "raw": b"\x00\xff", "day": 19000})
    assert payload_decode(schema, raw) == {"id": 7, "raw": "\x00\xff", "day": "2022-01-08"}
    with pytest.raises(UndecodablePayload, match="2 bytes left after the Avro value"):
        payload_decode(schema, raw + b"xx")
    with pytest.raises(UndecodablePayload, match="ends before the value does"):
        payload_decode(schema, raw[:2])


def test_a_json_schema_value_is_its_json():
    schema = formats.parse('{"type": "object"}', "JSON")
    assert payload_decode(schema, b'{"cents": 5}') == {"cents": 5}
    with pytest.raises(UndecodablePayload, match="JSONDecodeError"):
        payload_decode(schema, b"{not json")


def _proto_schema() -> formats.ParsedSchema:
    field = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="shop.proto", package="shop", syntax="proto3")
    order = file.message_type.add(name="Order")
    order.field.add(name="order_id", number=1, type=field.TYPE_INT32, label=field.LABEL_OPTIONAL)
    line = order.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    other = file.message_type.add(name="Refund")
    other.field.add(name="cents", number=1, type=field.TYPE_INT32, label=field.LABEL_OPTIONAL)
    return formats.parse(base64.b64encode(file.SerializeToString()).decode(), "PROTOBUF")


def test_protobuf_reads_the_message_its_indexes_name():
    schema = _proto_schema()
    # A lone 0: the first message (Order), order_id = 5 (field 1, varint).
    assert payload_decode(schema, b"\x00\x08\x05") == {"order_id": 5}
    # [1]: the second message (Refund): count 1 (zigzag 2), index 1 (zigzag 2).
    assert payload_decode(schema, b"\x02\x02\x08\x07") == {"cents": 7}
    # [0, 0]: Order.Line, sku "ab".
    assert payload_decode(schema, b"\x04\x00\x00\x0a\x02ab") == {"sku": "ab"}
    with pytest.raises(UndecodablePayload, match="no message #4"):
        payload_decode(schema, b"\x02\x08")
    with pytest.raises(UndecodablePayload, match="runs past the payload"):
        payload_decode(schema, b"\x02")
