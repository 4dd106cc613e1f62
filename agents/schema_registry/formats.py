"""Schema types: parsing, the canonical form a schema's id is keyed by, and its
fingerprint.

A schema is identified by the SHA-256 of (type, canonical form, references). The
canonical form of an Avro or JSON schema is its JSON with object keys sorted and no
white space: key order and formatting never make two ids, while everything that changes
what the schema means (field order, defaults, docs) does. Confluent's `normalize` asks
for this and more; Floe always keys by it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass
from typing import Any

import fastavro
from fastavro.schema import SchemaParseException, UnknownType
from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError

# A schema text larger than this is refused (422): schemas are read on every cache miss.
MAX_SCHEMA_BYTES = 256 * 1024
TYPES = ("AVRO", "JSON", "PROTOBUF")


class InvalidSchema(ValueError):
    """Confluent's 42201: the schema does not parse, or names a type it lacks."""


@dataclass(frozen=True)
class ParsedSchema:
    schema_type: str
    text: str  # what clients are given back: compact JSON, keys in the order written
    canonical: str
    references: tuple[tuple[str, str, int], ...]  # (name, subject, version)
    parsed: Any  # fastavro's parsed schema (AVRO), the JSON document (JSON), the
    # FileDescriptorProto (PROTOBUF)
    named: dict[str, Any]  # AVRO: every named type the schema and its references define

    @property
    def fingerprint(self) -> str:
        key = json.dumps(
            [self.schema_type, self.canonical, [list(r) for r in self.references]],
            separators=(",", ":"),
        )
        return hashlib.sha256(key.encode()).hexdigest()

    def document(self) -> dict[str, Any]:
        """What the bucket keeps under the fingerprint."""
        return {
            "schemaType": self.schema_type,
            "schema": self.text,
            "references": [{"name": n, "subject": s, "version": v} for n, s, v in self.references],
        }


def parse(
    text: str,
    schema_type: str = "AVRO",
    references: tuple[tuple[str, str, int], ...] = (),
    referenced: list[ParsedSchema] | None = None,
) -> ParsedSchema:
    """Parse a schema of `schema_type`; `referenced` are the parsed schemas its
    references name (their named types are known to it). Raises `InvalidSchema`."""
    schema_type = (schema_type or "AVRO").upper()
    if schema_type not in TYPES:
        raise InvalidSchema(
            f"Unsupported schema type {schema_type!r} (supported: {', '.join(TYPES)})"
        )
    if len(text.encode()) > MAX_SCHEMA_BYTES:
        raise InvalidSchema(f"Invalid schema: larger than {MAX_SCHEMA_BYTES} bytes")
    if schema_type == "PROTOBUF":
        return _protobuf(text, tuple(references))
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidSchema(f"Invalid schema: not JSON: {exc}") from None
    compact = json.dumps(document, separators=(",", ":"), ensure_ascii=False)
    canonical = json.dumps(document, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    named: dict[str, Any] = {}
    parsed: Any  # as `ParsedSchema.parsed`
    if schema_type == "AVRO":
        for ref in referenced or ():
            named.update(ref.named)
        try:
            parsed = fastavro.parse_schema(document, named_schemas=named, _write_hint=False)
        except (SchemaParseException, UnknownType, ValueError, TypeError, KeyError) as exc:
            raise InvalidSchema(f"Invalid schema: {exc}") from None
    else:
        if not isinstance(document, dict | bool):
            raise InvalidSchema("Invalid schema: a JSON Schema is an object or a boolean")
        parsed = document
    return ParsedSchema(schema_type, compact, canonical, tuple(references), parsed, named)


def _protobuf(text: str, references: tuple[tuple[str, str, int], ...]) -> ParsedSchema:
    """A Protobuf schema as confluent-kafka's ProtobufSerializer sends it: a base64
    FileDescriptorProto. Its canonical form is the descriptor serialized
    deterministically. (`.proto` text needs a parser this agent does not have yet.)"""
    try:
        raw = base64.b64decode(text.strip(), validate=True)
        descriptor = descriptor_pb2.FileDescriptorProto.FromString(raw)
    except (binascii.Error, ValueError, DecodeError):
        raise InvalidSchema(
            "Invalid schema: Protobuf schemas are accepted as a base64 FileDescriptorProto "
            "(what confluent-kafka's ProtobufSerializer sends); .proto text is not supported yet"
        ) from None
    if not descriptor.name or not (descriptor.message_type or descriptor.enum_type):
        raise InvalidSchema("Invalid schema: the FileDescriptorProto has no name or no types")
    canonical = base64.b64encode(descriptor.SerializeToString(deterministic=True)).decode()
    return ParsedSchema("PROTOBUF", text.strip(), canonical, references, descriptor, {})
