"""Protobuf compatibility as Confluent's registry decides it: the differences between
the writer's schema (the original) and the reader's (the update), each of a kind
Confluent names, and the schemas compatible when every difference is of a kind it
allows. Written here over protoc's FileDescriptorProtos, after Confluent's documented
rules and its `SchemaDiff`: one check serves both directions — BACKWARD compares old →
new, FORWARD new → old — so adding a message is BACKWARD-compatible and removing one is
not.

Allowed: a message added or moved, an enum added or removed, enum constants added,
renamed or removed, a field added or removed (not a `required` one), a field renamed, a
oneof added or removed, a field added to a oneof. Not allowed: the package changed, a
message removed, a field's kind changed (scalar or enum / message / map), a scalar's
wire group changed (int32 int64 uint32 uint64 bool enum / sint32 sint64 / string bytes /
fixed32 sfixed32 / fixed64 sfixed64 / float / double), a field's message type renamed
or changed incompatibly, a `required` field added or removed, a field removed from a
oneof, several fields moved into one oneof, a field moved into a oneof that had others.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from google.protobuf import descriptor_pb2

from core.schemas.formats import ParsedSchema

FieldProto = descriptor_pb2.FieldDescriptorProto
MessageProto = descriptor_pb2.DescriptorProto
EnumProto = descriptor_pb2.EnumDescriptorProto

ALLOWED = frozenset(
    {
        "MESSAGE_ADDED",
        "MESSAGE_MOVED",
        "ENUM_ADDED",
        "ENUM_REMOVED",
        "ENUM_CONST_ADDED",
        "ENUM_CONST_CHANGED",
        "ENUM_CONST_REMOVED",
        "FIELD_ADDED",
        "FIELD_REMOVED",
        "FIELD_NAME_CHANGED",
        "ONEOF_ADDED",
        "ONEOF_REMOVED",
        "ONEOF_FIELD_ADDED",
    }
)

_GROUPS = {
    FieldProto.TYPE_INT32: "GENERAL_NUMBER",
    FieldProto.TYPE_INT64: "GENERAL_NUMBER",
    FieldProto.TYPE_UINT32: "GENERAL_NUMBER",
    FieldProto.TYPE_UINT64: "GENERAL_NUMBER",
    FieldProto.TYPE_BOOL: "GENERAL_NUMBER",
    FieldProto.TYPE_ENUM: "GENERAL_NUMBER",
    FieldProto.TYPE_SINT32: "SIGNED_NUMBER",
    FieldProto.TYPE_SINT64: "SIGNED_NUMBER",
    FieldProto.TYPE_STRING: "STRING_OR_BYTES",
    FieldProto.TYPE_BYTES: "STRING_OR_BYTES",
    FieldProto.TYPE_FIXED32: "FIXED32",
    FieldProto.TYPE_SFIXED32: "FIXED32",
    FieldProto.TYPE_FIXED64: "FIXED64",
    FieldProto.TYPE_SFIXED64: "FIXED64",
    FieldProto.TYPE_FLOAT: "FLOAT",
    FieldProto.TYPE_DOUBLE: "DOUBLE",
}


@dataclass
class _Side:
    """One schema's messages by full name (its own and its imports'), with the package
    of the file each is in."""

    messages: dict[str, tuple[MessageProto, str]] = field(default_factory=dict)

    @classmethod
    def of(cls, schema: ParsedSchema) -> _Side:
        side = cls()
        for file in [*schema.named.values(), schema.parsed]:
            side._add(file.package, file.package, file.message_type)
        return side

    def _add(self, package: str, scope: str, messages: Iterable[MessageProto]) -> None:
        for message in messages:
            name = f"{scope}.{message.name}" if scope else message.name
            self.messages[f".{name}"] = (message, package)
            self._add(package, name, message.nested_type)

    def local_name(self, type_name: str) -> str:
        _, package = self.messages.get(type_name, (None, ""))
        prefix = f".{package}." if package else "."
        return type_name.removeprefix(prefix)


class _Diff:
    def __init__(self, original: _Side, update: _Side) -> None:
        self.original, self.update = original, update
        self.found: list[tuple[str, str]] = []  # (kind, path)
        self._seen: set[tuple[str, str]] = set()

    def add(self, kind: str, path: str) -> None:
        self.found.append((kind, path))

    def types(
        self,
        path: str,
        original: list[MessageProto],
        update: list[MessageProto],
        enums: tuple[Iterable[EnumProto], Iterable[EnumProto]],
    ) -> None:
        """Nested (or top-level) messages and enums, by name (`enums`: the original's,
        the update's)."""
        # A map's entry message is the map's: compared with its field, never as a type.
        old_messages = {m.name: (i, m) for i, m in enumerate(original) if not m.options.map_entry}
        new_messages = {m.name: (i, m) for i, m in enumerate(update) if not m.options.map_entry}
        for name in sorted(old_messages.keys() | new_messages.keys()):
            where = f"{path}{name}"
            old, new = old_messages.get(name), new_messages.get(name)
            if new is None:
                self.add("MESSAGE_REMOVED", where)
            elif old is None:
                self.add("MESSAGE_ADDED", where)
            else:
                self.message(where, old[1], new[1])
                if old[0] != new[0]:
                    self.add("MESSAGE_MOVED", where)
        old_enums = {e.name: e for e in enums[0]}
        new_enums = {e.name: e for e in enums[1]}
        for name in sorted(old_enums.keys() | new_enums.keys()):
            where = f"{path}{name}"
            if name not in new_enums:
                self.add("ENUM_REMOVED", where)
            elif name not in old_enums:
                self.add("ENUM_ADDED", where)
            else:
                self.enum(where, old_enums[name], new_enums[name])

    def enum(self, path: str, original: EnumProto, update: EnumProto) -> None:
        old = {v.number: v.name for v in original.value}
        new = {v.number: v.name for v in update.value}
        for number in sorted(old.keys() | new.keys()):
            if number not in new:
                self.add("ENUM_CONST_REMOVED", f"{path}.{number}")
            elif number not in old:
                self.add("ENUM_CONST_ADDED", f"{path}.{number}")
            elif old[number] != new[number]:
                self.add("ENUM_CONST_CHANGED", f"{path}.{number}")

    def message(self, path: str, original: MessageProto, update: MessageProto) -> None:
        if (path, original.name) in self._seen:  # a recursive type: compared once
            return
        self._seen.add((path, original.name))
        old_all = {f.number: f for f in original.field}
        new_all = {f.number: f for f in update.field}
        old_oneof = _oneof_of(original)
        new_oneof = _oneof_of(update)
        old_plain = {n: f for n, f in old_all.items() if n not in old_oneof}
        new_plain = {n: f for n, f in new_all.items() if n not in new_oneof}
        new_oneofs: dict[str, list[int]] = {}
        for number, name in new_oneof.items():
            new_oneofs.setdefault(name, []).append(number)
        old_oneofs: dict[str, list[int]] = {}
        for number, name in old_oneof.items():
            old_oneofs.setdefault(name, []).append(number)
        for name, numbers in sorted(new_oneofs.items()):
            moved = [n for n in numbers if old_plain.pop(n, None) is not None]
            existing = [n for n in numbers if n in old_oneof]
            if len(moved) > 1:
                self.add("MULTIPLE_FIELDS_MOVED_TO_ONEOF", f"{path}.{name}")
            elif len(moved) == 1 and existing:
                self.add("FIELD_MOVED_TO_EXISTING_ONEOF", f"{path}.{name}")
        for name in sorted(old_oneofs.keys() | new_oneofs.keys()):
            if name not in new_oneofs:
                self.add("ONEOF_REMOVED", f"{path}.{name}")
            elif name not in old_oneofs:
                self.add("ONEOF_ADDED", f"{path}.{name}")
            else:
                for number in sorted(set(old_oneofs[name]) | set(new_oneofs[name])):
                    where = f"{path}.{name}.{number}"
                    if number not in new_oneofs[name]:
                        if number not in new_all:  # moved elsewhere is not removed
                            self.add("ONEOF_FIELD_REMOVED", where)
                    elif number not in old_oneofs[name]:
                        self.add("ONEOF_FIELD_ADDED", where)
                    else:
                        self.field(where, old_all[number], new_all[number])
        for number in sorted(old_plain.keys() | new_plain.keys()):
            where = f"{path}.{number}"
            old, new = old_plain.get(number), new_plain.get(number)
            if new is None:
                assert old is not None
                required = old.label == FieldProto.LABEL_REQUIRED
                self.add("REQUIRED_FIELD_REMOVED" if required else "FIELD_REMOVED", where)
            elif old is None:
                required = new.label == FieldProto.LABEL_REQUIRED
                self.add("REQUIRED_FIELD_ADDED" if required else "FIELD_ADDED", where)
            else:
                self.field(where, old, new)
        # A field whose oneof changed (into one, out of one, or renamed): its contents.
        for number in sorted(old_all.keys() & new_all.keys()):
            if old_oneof.get(number) != new_oneof.get(number) and (
                number in old_oneof or number in new_oneof
            ):
                self.field(f"{path}.{number}", old_all[number], new_all[number])
        self.types(
            f"{path}.",
            list(original.nested_type),
            list(update.nested_type),
            (original.enum_type, update.enum_type),
        )

    def field(self, path: str, original: FieldProto, update: FieldProto) -> None:
        if original.name != update.name:
            self.add("FIELD_NAME_CHANGED", path)
        self.types_of(path, original, update)

    def types_of(self, path: str, original: FieldProto, update: FieldProto) -> None:
        old_kind, new_kind = self._kind(original, self.original), self._kind(update, self.update)
        if old_kind != new_kind:
            self.add("FIELD_KIND_CHANGED", path)
        elif old_kind == "SCALAR":
            if _GROUPS.get(original.type) != _GROUPS.get(update.type):
                self.add("FIELD_SCALAR_KIND_CHANGED", path)
        elif old_kind == "MAP":
            old_entry = self.original.messages[original.type_name][0]
            new_entry = self.update.messages[update.type_name][0]
            for old, new in zip(old_entry.field, new_entry.field, strict=False):
                self.types_of(path, old, new)
        else:
            self._message_type(path, original.type_name, update.type_name)

    def _message_type(self, path: str, original: str, update: str) -> None:
        old_name = self.original.local_name(original)
        if old_name != self.update.local_name(update):
            self.add("FIELD_NAMED_TYPE_CHANGED", path)
            return
        old, new = self.original.messages.get(original), self.update.messages.get(update)
        if old is None or new is None:  # a type of an import protoc resolved: by name only
            return
        inner = _Diff(self.original, self.update)
        inner._seen = self._seen
        inner.message(old_name, old[0], new[0])
        self.found += inner.found
        if any(kind not in ALLOWED for kind, _ in inner.found):
            self.add("FIELD_NAMED_TYPE_CHANGED", path)

    @staticmethod
    def _kind(field_: FieldProto, side: _Side) -> str:
        if field_.type == FieldProto.TYPE_ENUM or field_.type in _GROUPS:
            return "SCALAR"
        entry = side.messages.get(field_.type_name)
        if entry is not None and entry[0].options.map_entry:
            return "MAP"
        return "MESSAGE"


def _oneof_of(message: MessageProto) -> dict[int, str]:
    """field number → the name of its (real) oneof; proto3 `optional` fields are in a
    oneof of their own in a descriptor, and are plain fields to these rules."""
    return {
        f.number: message.oneof_decl[f.oneof_index].name
        for f in message.field
        if f.HasField("oneof_index") and not f.proto3_optional
    }


def differences(writer: ParsedSchema, reader: ParsedSchema) -> list[tuple[str, str]]:
    """Every difference from `writer` (the original) to `reader` (the update):
    (kind, path)."""
    diff = _Diff(_Side.of(writer), _Side.of(reader))
    if writer.parsed.package != reader.parsed.package:
        diff.add("PACKAGE_CHANGED", "#/")
    diff.types(
        "#/",
        list(writer.parsed.message_type),
        list(reader.parsed.message_type),
        (writer.parsed.enum_type, reader.parsed.enum_type),
    )
    return diff.found


def can_read(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    """Why a consumer with `reader` cannot read what `writer` wrote, in Confluent's
    terms (empty: it can)."""
    return [
        f"{kind} at {path}" for kind, path in differences(writer, reader) if kind not in ALLOWED
    ]
