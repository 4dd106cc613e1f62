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

from core.schemas import protoc

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
    named: dict[str, Any]  # AVRO: every named type the schema and its references define;
    # PROTOBUF: every file its imports name (transitively), as FileDescriptorProtos

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
        return _protobuf(text, tuple(references), referenced or [])
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


def _protobuf(
    text: str, references: tuple[tuple[str, str, int], ...], referenced: list[ParsedSchema]
) -> ParsedSchema:
    """A Protobuf schema as `.proto` text or as a base64 FileDescriptorProto (what
    confluent-kafka's ProtobufSerializer sends). Text is compiled by protoc (grpcio-tools'
    build of it) with the references' descriptors as its imports, named as the
    references name them. The canonical form is the descriptor with what the two forms
    of one schema write differently cleared (the file's name, source info, json names
    that are the default) and serialized deterministically: the same schema sent either
    way gets one id, as in Confluent's registry (which keys by its canonical text)."""
    imports: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    for (name, _, _), schema in zip(references, referenced, strict=False):
        if schema.schema_type != "PROTOBUF":
            raise InvalidSchema(f"Invalid schema: reference {name!r} is not a Protobuf schema")
        imports.update(schema.named)
        imports[name] = _named(schema.parsed, name)
    descriptor = _descriptor(text)
    if descriptor is None:
        try:
            descriptor = protoc.compile_proto(text, list(imports.values()))
        except protoc.ProtoError as exc:
            raise InvalidSchema(f"Invalid schema: {exc}") from None
    if not descriptor.name or not (descriptor.message_type or descriptor.enum_type):
        raise InvalidSchema("Invalid schema: the Protobuf schema has no name or no types")
    canonical = _canonical_descriptor(descriptor)
    return ParsedSchema("PROTOBUF", text.strip(), canonical, references, descriptor, imports)


def _descriptor(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    """The FileDescriptorProto a base64 text holds, or None: the text is `.proto` text."""
    try:
        raw = base64.b64decode(text.strip(), validate=True)
        return descriptor_pb2.FileDescriptorProto.FromString(raw)
    except (binascii.Error, ValueError, DecodeError):
        return None


def _named(
    descriptor: descriptor_pb2.FileDescriptorProto, name: str
) -> descriptor_pb2.FileDescriptorProto:
    renamed = descriptor_pb2.FileDescriptorProto()
    renamed.CopyFrom(descriptor)
    renamed.name = name
    return renamed


def sent_as_descriptor(schema: ParsedSchema) -> bool:
    """Whether a Protobuf schema was sent as a base64 descriptor (not `.proto` text)."""
    return schema.schema_type == "PROTOBUF" and _descriptor(schema.text) is not None


def serialized(schema: ParsedSchema) -> str:
    """A Protobuf schema as a base64 FileDescriptorProto (Confluent's `format=serialized`),
    whichever form it was registered in."""
    return base64.b64encode(schema.parsed.SerializeToString(deterministic=True)).decode()


def _canonical_descriptor(descriptor: descriptor_pb2.FileDescriptorProto) -> str:
    canonical = descriptor_pb2.FileDescriptorProto()
    canonical.CopyFrom(descriptor)
    canonical.ClearField("name")
    canonical.ClearField("source_code_info")
    messages = list(canonical.message_type)
    while messages:
        message = messages.pop()
        messages.extend(message.nested_type)
        for field in [*message.field, *message.extension]:
            if field.json_name == _default_json_name(field.name):
                field.ClearField("json_name")
    return base64.b64encode(canonical.SerializeToString(deterministic=True)).decode()


def _default_json_name(name: str) -> str:
    """protoc's json_name for a field that sets none: underscores dropped, the letter
    after each upper-cased."""
    parts = name.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def proto_text(schema: ParsedSchema) -> str:
    """A Protobuf schema as `.proto` text (what Confluent's registry answers by default):
    the text it was registered as, or its descriptor printed — package, imports,
    messages (nested, oneofs, maps, proto3 `optional`, reserved numbers and names) and
    enums, with types by their full names. Options are not printed: the text is for
    reading and for clients that parse it (kafkajs' registry client), the descriptor
    (`format=serialized`) is the schema itself."""
    if not sent_as_descriptor(schema):
        return schema.text
    file = schema.parsed
    lines = [f'syntax = "{file.syntax or "proto2"}";']
    if file.package:
        lines.append(f"package {file.package};")
    lines += [f'import "{name}";' for name in file.dependency]
    for message in file.message_type:
        lines += _message_lines(message, file.syntax or "proto2", "")
    for enum in file.enum_type:
        lines += _enum_lines(enum, "")
    return "\n".join(lines) + "\n"


_SCALARS = {
    value: name.removeprefix("TYPE_").lower()
    for name, value in descriptor_pb2.FieldDescriptorProto.Type.items()
    if name not in ("TYPE_MESSAGE", "TYPE_ENUM", "TYPE_GROUP")
}


def _type_name(field: Any) -> str:
    return _SCALARS.get(field.type) or field.type_name


def _message_lines(message: Any, syntax: str, indent: str) -> list[str]:
    inner = indent + "  "
    entries = {f".{n.name}": n for n in message.nested_type if n.options.map_entry}
    lines = [f"{indent}message {message.name} {{"]
    oneofs: dict[int, list[Any]] = {}
    for field in message.field:
        if field.HasField("oneof_index") and not field.proto3_optional:
            oneofs.setdefault(field.oneof_index, []).append(field)
    printed_oneofs: set[int] = set()
    for field in message.field:
        if field.HasField("oneof_index") and not field.proto3_optional:
            if field.oneof_index not in printed_oneofs:
                printed_oneofs.add(field.oneof_index)
                lines.append(f"{inner}oneof {message.oneof_decl[field.oneof_index].name} {{")
                lines += [
                    f"{inner}  {_type_name(f)} {f.name} = {f.number};"
                    for f in oneofs[field.oneof_index]
                ]
                lines.append(f"{inner}}}")
            continue
        entry = next((e for name, e in entries.items() if field.type_name.endswith(name)), None)
        if entry is not None and field.label == field.LABEL_REPEATED:
            key, value = entry.field[0], entry.field[1]
            lines.append(
                f"{inner}map<{_type_name(key)}, {_type_name(value)}> {field.name} = {field.number};"
            )
            continue
        label = {field.LABEL_REPEATED: "repeated ", field.LABEL_REQUIRED: "required "}.get(
            field.label, "optional " if syntax == "proto2" or field.proto3_optional else ""
        )
        lines.append(f"{inner}{label}{_type_name(field)} {field.name} = {field.number};")
    for reserved in message.reserved_range:
        end = reserved.end - 1
        lines.append(
            f"{inner}reserved {reserved.start}{'' if end == reserved.start else f' to {end}'};"
        )
    if message.reserved_name:
        lines.append(f"{inner}reserved {', '.join(repr(n) for n in message.reserved_name)};")
    for nested in message.nested_type:
        if not nested.options.map_entry:
            lines += _message_lines(nested, syntax, inner)
    for enum in message.enum_type:
        lines += _enum_lines(enum, inner)
    lines.append(f"{indent}}}")
    return lines


def _enum_lines(enum: Any, indent: str) -> list[str]:
    values = [f"{indent}  {v.name} = {v.number};" for v in enum.value]
    return [f"{indent}enum {enum.name} {{", *values, f"{indent}}}"]
