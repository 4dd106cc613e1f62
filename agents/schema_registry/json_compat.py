"""JSON Schema compatibility: does every document a writer schema accepts pass the reader
schema? Confluent's rules for JSON Schema ("Schema Evolution and Compatibility" and
its JSON Schema rules: open and closed content models), hand-written for the keywords
serializers use — type (integer within number), properties, required,
additionalProperties, items, enum, const, and the length, size and range bounds.

What this does not reason about — `$ref`, `oneOf`/`anyOf`/`allOf`/`not`, `if`,
`patternProperties`, `dependencies` — must be unchanged between the two schemas, or the
change is reported as incompatible (the safe answer).
"""

from __future__ import annotations

import json
from typing import Any

from core.schemas.formats import ParsedSchema

_UNCHECKED = (
    "$ref",
    "oneOf",
    "anyOf",
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "patternProperties",
    "dependencies",
    "dependentSchemas",
    "dependentRequired",
    "propertyNames",
)
_ALL_TYPES = {"null", "boolean", "object", "array", "number", "integer", "string"}
# (keyword, True when the reader's value must be at most the writer's: a lower bound)
_BOUNDS = (
    ("minLength", False),
    ("maxLength", True),
    ("minItems", False),
    ("maxItems", True),
    ("minProperties", False),
    ("maxProperties", True),
    ("minimum", False),
    ("maximum", True),
    ("exclusiveMinimum", False),
    ("exclusiveMaximum", True),
)


def _types(schema: dict[str, Any]) -> set[str]:
    given = schema.get("type")
    if given is None:
        return set(_ALL_TYPES)
    found = {given} if isinstance(given, str) else set(given)
    if "number" in found:
        found.add("integer")
    return found


def _allowed(schema: dict[str, Any]) -> list[Any] | None:
    """The only values a schema accepts (`const`, `enum`), or None: not so limited."""
    if "const" in schema:
        return [schema["const"]]
    if "enum" in schema:
        return list(schema["enum"])
    return None


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


class _Checker:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def check(self, reader: Any, writer: Any, path: str) -> None:
        if reader is True or reader == {}:
            return  # accepts everything
        if writer is False:
            return  # accepts nothing: nothing to read
        if reader is False:
            self.problems.append(f"{path or '#'}: the reader accepts nothing")
            return
        if writer is True:
            writer = {}
        for keyword in _UNCHECKED:
            if _dump(reader.get(keyword)) != _dump(writer.get(keyword)):
                self.problems.append(
                    f"{path or '#'}: '{keyword}' changed (not checked: keep it unchanged)"
                )
        where = path or "#"
        missing = _types(writer) - _types(reader)
        if missing:
            self.problems.append(f"{where}: type narrowed, {sorted(missing)} no longer accepted")
        allowed = _allowed(reader)
        if allowed is not None:
            written = _allowed(writer)
            if written is None:
                self.problems.append(f"{where}: 'enum' or 'const' added")
            elif lost := [v for v in written if v not in allowed]:
                self.problems.append(f"{where}: values {lost} no longer accepted")
        for keyword, upper in _BOUNDS:
            if keyword not in reader:
                continue
            if keyword not in writer:
                self.problems.append(f"{where}: '{keyword}' added")
            elif (
                (reader[keyword] < writer[keyword])
                if upper
                else (reader[keyword] > writer[keyword])
            ):
                self.problems.append(f"{where}: '{keyword}' tightened")
        if "items" in reader or "items" in writer:
            self.check(reader.get("items", {}), writer.get("items", {}), f"{where}/items")
        if "object" in _types(reader) & _types(writer):
            self._object(reader, writer, where)

    def _object(self, reader: dict[str, Any], writer: dict[str, Any], where: str) -> None:
        r_props, w_props = reader.get("properties", {}), writer.get("properties", {})
        r_extra = reader.get("additionalProperties", True)
        w_extra = writer.get("additionalProperties", True)
        for name in sorted(set(reader.get("required", [])) - set(writer.get("required", []))):
            self.problems.append(f"{where}/properties/{name}: required by the reader only")
        for name, schema in w_props.items():
            if name in r_props:
                self.check(r_props[name], schema, f"{where}/properties/{name}")
            elif r_extra is False:
                self.problems.append(
                    f"{where}/properties/{name}: removed from a closed content model"
                )
            else:
                self.check(r_extra, schema, f"{where}/properties/{name}")
        for name, schema in r_props.items():
            if name not in w_props:
                # Whatever the writer allowed there, the reader must accept.
                self.check(schema, w_extra, f"{where}/properties/{name}")
        if w_extra is not False:
            self.check(r_extra, w_extra, f"{where}/additionalProperties")


def can_read(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    """Why documents `writer` accepts may fail `reader` (empty: none can)."""
    checker = _Checker()
    checker.check(reader.parsed, writer.parsed, "")
    return checker.problems
