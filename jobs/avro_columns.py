"""Avro values as table columns: a record schema's fields → Arrow fields (the table's
columns, added through the catalog by name), and Confluent-framed values (magic byte 0,
the 4-byte schema id, the Avro body) decoded with their writer's schema into the
reader's fields.

Types: null unions of one type (nullable), boolean, int, long, float, double, bytes,
string, enum (string), fixed (binary), records (struct), arrays (list); the logical
types date, timestamp-millis/-micros (timestamptz). Maps and unions of several types
are refused with the field's name (not yet).
"""

from __future__ import annotations

import io
import struct
from typing import Any

import fastavro
import pyarrow as pa

_PRIMITIVES = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}
_TIMESTAMP = pa.timestamp("us", tz="UTC")


class UnsupportedAvro(ValueError):
    """A schema this table cannot hold as columns yet."""


def _arrow_type(schema: Any, names: dict[str, Any], where: str) -> tuple[pa.DataType, bool]:
    """(Arrow type, nullable) of an Avro type."""
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1:
            raise UnsupportedAvro(f"{where}: a union of several types")
        return _arrow_type(branches[0], names, where)[0], True
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema], False
        if schema in names:
            return _arrow_type(names[schema], names, where)
        if schema == "null":
            raise UnsupportedAvro(f"{where}: a field that is always null")
        raise UnsupportedAvro(f"{where}: unknown type {schema!r}")
    kind, logical = schema.get("type"), schema.get("logicalType")
    if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
        return _TIMESTAMP, False
    if logical == "date" and kind == "int":
        return pa.date32(), False
    if kind in _PRIMITIVES and logical is None:
        return _PRIMITIVES[kind], False
    if kind in ("enum", "fixed"):
        names[schema["name"]] = schema
        if schema.get("namespace"):
            names[f"{schema['namespace']}.{schema['name']}"] = schema
        return (pa.string() if kind == "enum" else pa.binary()), False
    if kind == "record":
        names[schema["name"]] = schema
        return pa.struct(record_fields(schema, names, where)), False
    if kind == "array":
        item, nullable = _arrow_type(schema["items"], names, f"{where}[]")
        return pa.list_(pa.field("element", item, nullable=nullable)), False
    raise UnsupportedAvro(f"{where}: {kind}{f' ({logical})' if logical else ''} is not supported")


def record_fields(schema: dict, names: dict[str, Any] | None = None, where: str = "") -> list:
    """The Arrow fields of an Avro record's fields."""
    names = {} if names is None else names
    fields = []
    for field in schema.get("fields") or []:
        path = f"{where}.{field['name']}" if where else field["name"]
        arrow, _ = _arrow_type(field["type"], names, path)
        # Every column is nullable: rows written before the field existed read null.
        fields.append(pa.field(field["name"], arrow, nullable=True))
    return fields


def value_schema(avro: dict) -> pa.Schema:
    """The columns of a value schema (a record). Every column is nullable: older rows
    and records without a field read it as null."""
    if not isinstance(avro, dict) or avro.get("type") != "record":
        raise UnsupportedAvro("the value schema must be an Avro record")
    return pa.schema(record_fields(avro))


class Decoder:
    """Decodes framed values with their writer's schema, resolved to the reader's."""

    def __init__(self, reader: dict, writers: dict[int, dict]) -> None:
        self.reader = fastavro.parse_schema(reader)
        self.writers = {schema_id: fastavro.parse_schema(w) for schema_id, w in writers.items()}

    def decode(self, value: bytes | None) -> dict[str, Any]:
        if value is None or len(value) < 5 or value[0] != 0:
            raise ValueError("not a Schema Registry framed value (magic byte 0, schema id)")
        (schema_id,) = struct.unpack(">I", value[1:5])
        writer = self.writers.get(schema_id)
        if writer is None:
            raise ValueError(f"schema id {schema_id} is not a version of the table's subject")
        decoded = fastavro.schemaless_reader(io.BytesIO(value[5:]), writer, self.reader)
        if not isinstance(decoded, dict):
            raise ValueError("the value is not a record")
        return decoded
