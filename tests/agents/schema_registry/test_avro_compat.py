"""Avro compatibility (agents/schema_registry/avro_compat.py, hand-written over fastavro's
parsed schemas) on the examples Confluent documents for each level ("Schema Evolution
and Compatibility"), and the Avro specification's resolution rules."""

from __future__ import annotations

import json

import pytest

from agents.schema_registry.compatibility import incompatibilities
from core.schemas.formats import InvalidSchema, parse


def record(*fields: dict, name: str = "User", **extra) -> object:
    return parse(json.dumps({"type": "record", "name": name, "fields": list(fields), **extra}))


F1 = {"name": "f1", "type": "string"}
F2 = {"name": "f2", "type": "string"}
F2_DEFAULT = {"name": "f2", "type": "string", "default": "x"}

# (level, old, new, compatible): Confluent's table — BACKWARD allows deleting fields and
# adding optional ones, FORWARD adding fields and deleting optional ones, FULL both only
# for optional ones.
CASES = [
    ("BACKWARD", record(F1, F2), record(F1), True),  # delete a field
    ("BACKWARD", record(F1), record(F1, F2_DEFAULT), True),  # add an optional field
    ("BACKWARD", record(F1), record(F1, F2), False),  # add a field without default
    ("FORWARD", record(F1), record(F1, F2), True),  # add a field
    ("FORWARD", record(F1, F2_DEFAULT), record(F1), True),  # delete an optional field
    ("FORWARD", record(F1, F2), record(F1), False),  # delete a required field
    ("FULL", record(F1), record(F1, F2_DEFAULT), True),
    ("FULL", record(F1, F2_DEFAULT), record(F1), True),
    ("FULL", record(F1), record(F1, F2), False),
    ("FULL", record(F1, F2), record(F1), False),
    ("NONE", record(F1), parse('"int"'), True),
]


@pytest.mark.parametrize(("level", "old", "new", "compatible"), CASES)
def test_confluents_documented_examples(level, old, new, compatible):
    assert (incompatibilities(level, new, [old]) == []) is compatible


def test_transitive_levels_check_every_version_the_others_only_the_latest():
    # v1 has f2 as an int, v2 drops it, v3 brings it back as a string with a default:
    # v3 reads v2's data, not v1's.
    v1 = record(F1, {"name": "f2", "type": "int"})
    v2 = record(F1)
    v3 = record(F1, F2_DEFAULT)
    assert incompatibilities("BACKWARD", v3, [v1, v2]) == []
    assert incompatibilities("BACKWARD_TRANSITIVE", v3, [v1, v2]) != []
    assert incompatibilities("FULL_TRANSITIVE", v3, [v1, v2]) != []
    # FORWARD_TRANSITIVE: every old reader reads the new data.
    w1 = record(F1, F2)  # needs f2
    w2 = record(F1, F2_DEFAULT)
    w3 = record(F1)  # drops f2: w2 reads it (default), w1 cannot
    assert incompatibilities("FORWARD", w3, [w1, w2]) == []
    assert incompatibilities("FORWARD_TRANSITIVE", w3, [w1, w2]) != []


def test_the_specifications_promotions_unions_enums_and_names():
    def field(t):
        return record({"name": "v", "type": t})

    assert incompatibilities("BACKWARD", field("long"), [field("int")]) == []  # int → long
    assert incompatibilities("BACKWARD", field("int"), [field("long")]) != []
    assert incompatibilities("BACKWARD", field("double"), [field("float")]) == []
    assert incompatibilities("BACKWARD", field("bytes"), [field("string")]) == []
    assert incompatibilities("BACKWARD", field(["null", "string"]), [field("string")]) == []
    assert incompatibilities("BACKWARD", field("string"), [field(["null", "string"])]) != []
    assert incompatibilities("BACKWARD", field(["null", "long"]), [field(["null", "int"])]) == []

    def enum(*symbols, **extra):
        return field({"type": "enum", "name": "E", "symbols": list(symbols), **extra})

    assert incompatibilities("BACKWARD", enum("A", "B", "C"), [enum("A", "B")]) == []
    assert incompatibilities("FORWARD", enum("A", "B", "C"), [enum("A", "B")]) != []
    assert incompatibilities("FORWARD", enum("A", "B", "C"), [enum("A", "B", default="A")]) == []

    assert incompatibilities("BACKWARD", record(F1, name="Other"), [record(F1)]) != []
    assert (
        incompatibilities("BACKWARD", record(F1, name="Other", aliases=["User"]), [record(F1)])
        == []
    )
    renamed = {"name": "first", "type": "string", "aliases": ["f1"]}
    assert incompatibilities("BACKWARD", record(renamed), [record(F1)]) == []

    def fixed(size):
        return field({"type": "fixed", "name": "H", "size": size})

    assert incompatibilities("BACKWARD", fixed(16), [fixed(16)]) == []
    assert incompatibilities("BACKWARD", fixed(32), [fixed(16)]) != []
    arrays = field({"type": "array", "items": "long"}), field({"type": "array", "items": "int"})
    assert incompatibilities("BACKWARD", arrays[0], [arrays[1]]) == []
    assert incompatibilities("FORWARD", arrays[0], [arrays[1]]) != []


def test_recursive_types_are_compared_without_looping():
    node = {"name": "next", "type": ["null", "Node"], "default": None}
    v1 = record({"name": "value", "type": "int"}, node, name="Node")
    v2 = record({"name": "value", "type": "long"}, node, name="Node")
    assert incompatibilities("BACKWARD", v2, [v1]) == []
    assert incompatibilities("FORWARD", v2, [v1]) != []


def test_ids_ignore_key_order_and_white_space_but_not_meaning():
    a = parse('{"type": "record", "name": "U", "fields": [{"name": "a", "type": "int"}]}')
    b = parse('{"fields":[{"type":"int","name":"a"}],"name":"U","type":"record"}')
    c = parse(
        '{"type": "record", "name": "U", "fields": [{"name": "a", "type": "int", "default": 1}]}'
    )
    assert a.fingerprint == b.fingerprint != c.fingerprint
    assert parse(a.text, "JSON").fingerprint != a.fingerprint  # the type is part of it
    with pytest.raises(InvalidSchema):
        parse('{"type": "record", "name": "U", "fields": [{"name": "a", "type": "U2"}]}')
    with pytest.raises(InvalidSchema, match="larger than"):
        parse(
            json.dumps({"type": "enum", "name": "E", "symbols": [f"S{i}" for i in range(60_000)]})
        )
