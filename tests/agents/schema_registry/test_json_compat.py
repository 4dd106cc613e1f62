"""JSON Schema compatibility (agents/schema_registry/json_compat.py) on the examples
Confluent documents for JSON Schema: open and closed content models (adding a property
to an open model breaks BACKWARD, to a closed one not; removing one from a closed model
breaks BACKWARD, from an open one FORWARD), type widening, required properties, enums
and bounds."""

from __future__ import annotations

import json

from agents.schema_registry.compatibility import incompatibilities
from core.schemas.formats import parse


def obj(properties: dict, *, closed: bool = False, required=(), **extra):
    document = {"type": "object", "properties": properties, **extra}
    if closed:
        document["additionalProperties"] = False
    if required:
        document["required"] = list(required)
    return parse(json.dumps(document), "JSON")


NAME = {"name": {"type": "string"}}
NAME_AGE = {"name": {"type": "string"}, "age": {"type": "integer"}}


def ok(level, new, old) -> bool:
    return incompatibilities(level, new, [old]) == []


def test_open_and_closed_content_models():
    # Adding a property: the old (open) schema let documents carry "age" as anything.
    assert not ok("BACKWARD", obj(NAME_AGE), obj(NAME))
    assert ok("BACKWARD", obj(NAME_AGE, closed=True), obj(NAME, closed=True))
    assert ok("FORWARD", obj(NAME_AGE), obj(NAME))
    # Removing a property: a closed reader refuses it, an open one takes it.
    assert not ok("BACKWARD", obj(NAME, closed=True), obj(NAME_AGE, closed=True))
    assert ok("BACKWARD", obj(NAME), obj(NAME_AGE))
    assert not ok("FORWARD", obj(NAME), obj(NAME_AGE))
    assert ok("FULL", obj(NAME), obj(NAME))
    assert ok("NONE", obj(NAME, closed=True), obj(NAME_AGE, closed=True))
    # Closing an open model breaks BACKWARD; opening a closed one does not.
    assert not ok("BACKWARD", obj(NAME, closed=True), obj(NAME))
    assert ok("BACKWARD", obj(NAME), obj(NAME, closed=True))


def test_types_required_enums_and_bounds():
    def field(schema, **extra):
        return obj({"v": schema}, closed=True, **extra)

    assert ok("BACKWARD", field({"type": "number"}), field({"type": "integer"}))  # widened
    assert not ok("BACKWARD", field({"type": "integer"}), field({"type": "number"}))
    assert ok("BACKWARD", field({"type": ["string", "null"]}), field({"type": "string"}))
    assert not ok("BACKWARD", field({"type": "string"}, required=["v"]), field({"type": "string"}))
    assert ok("BACKWARD", field({"type": "string"}), field({"type": "string"}, required=["v"]))
    assert ok("BACKWARD", field({"enum": ["a", "b", "c"]}), field({"enum": ["a", "b"]}))
    assert not ok("BACKWARD", field({"enum": ["a"]}), field({"enum": ["a", "b"]}))
    assert not ok(
        "BACKWARD",
        field({"type": "string", "maxLength": 5}),
        field({"type": "string", "maxLength": 10}),
    )
    assert ok(
        "BACKWARD",
        field({"type": "string", "maxLength": 10}),
        field({"type": "string", "maxLength": 5}),
    )
    assert not ok("BACKWARD", field({"type": "integer", "minimum": 1}), field({"type": "integer"}))
    items = (
        field({"type": "array", "items": {"type": "number"}}),
        field({"type": "array", "items": {"type": "integer"}}),
    )
    assert ok("BACKWARD", items[0], items[1]) and not ok("FORWARD", items[0], items[1])
    # What is not reasoned about must not change.
    assert not ok(
        "BACKWARD", field({"$ref": "#/definitions/a"}), field({"$ref": "#/definitions/b"})
    )
    assert ok("BACKWARD", field({"$ref": "#/definitions/a"}), field({"$ref": "#/definitions/a"}))


def test_a_type_change_between_avro_and_json_is_incompatible():
    avro = parse('{"type": "record", "name": "R", "fields": []}')
    assert incompatibilities("BACKWARD", obj(NAME), [avro]) != []
