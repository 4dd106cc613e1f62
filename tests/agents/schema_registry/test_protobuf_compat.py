"""Protobuf schemas: `.proto` text compiled by protoc and the base64 FileDescriptorProto
confluent-kafka sends, one id for the same schema either way, and the compatibility
rules Confluent documents for Protobuf (its `SchemaDiff`), a pass and a fail case each."""

from __future__ import annotations

import base64

import pytest
from google.protobuf import descriptor_pb2

from agents.schema_registry.compatibility import incompatibilities
from core.schemas.formats import (
    InvalidSchema,
    ParsedSchema,
    parse,
    proto_text,
    serialized,
)


def proto(body: str, package: str = "floe.test", *, syntax: str = "proto3") -> ParsedSchema:
    return parse(f'syntax = "{syntax}";\npackage {package};\n{body}', "PROTOBUF")


def problems(level: str, old: ParsedSchema, new: ParsedSchema) -> list[str]:
    return incompatibilities(level, new, [old])


USER = "message User { string name = 1; int64 id = 2; }"


def test_the_same_schema_as_text_and_as_a_descriptor_gets_one_fingerprint():
    text = proto(
        'import "google/protobuf/timestamp.proto";\n'
        "message User { string user_name = 1; map<string, int32> scores = 2;\n"
        "  oneof contact { string email = 3; string phone = 4; }\n"
        "  google.protobuf.Timestamp at = 5; optional int32 maybe = 6; }"
    )
    # What a generated _pb2 module holds (and confluent-kafka sends): no json names, the
    # file named as it was compiled.
    descriptor = descriptor_pb2.FileDescriptorProto()
    descriptor.CopyFrom(text.parsed)
    descriptor.name = "floe/test/user.proto"
    for field in descriptor.message_type[0].field:
        field.ClearField("json_name")
    sent = parse(base64.b64encode(descriptor.SerializeToString()).decode(), "PROTOBUF")
    assert sent.fingerprint == text.fingerprint
    assert proto(USER).fingerprint != proto(USER.replace("id = 2", "id = 3")).fingerprint
    # format=serialized: text-registered schemas answer as a descriptor too.
    again = parse(serialized(text), "PROTOBUF")
    assert again.fingerprint == text.fingerprint


def test_text_protoc_refuses_is_a_422_naming_the_line():
    with pytest.raises(InvalidSchema, match=r"line 3:\d+: .*strin"):
        proto("message M { strin x = 1; }")
    with pytest.raises(InvalidSchema):
        proto("message M { int32 a = 1; int32 b = 1; }")  # one number twice


def test_a_reference_is_an_import_named_as_the_reference_names_it():
    dep = parse('syntax = "proto3"; package dep; message D { int32 a = 1; }', "PROTOBUF")
    user = parse(
        'syntax = "proto3"; import "dep/d.proto"; message U { dep.D d = 1; }',
        "PROTOBUF",
        (("dep/d.proto", "d-value", 1),),
        [dep],
    )
    assert list(user.parsed.dependency) == ["dep/d.proto"]
    with pytest.raises(InvalidSchema, match="not found|was not found|cannot"):
        parse('syntax = "proto3"; import "dep/d.proto"; message U { dep.D d = 1; }', "PROTOBUF")


# (rule, old, new, BACKWARD-compatible) — Confluent's Protobuf rules, one case each.
CASES = [
    ("a field added", USER, "message User { string name = 1; int64 id = 2; bool ok = 3; }", True),
    ("a field removed", USER, "message User { string name = 1; }", True),
    ("a field renamed", USER, "message User { string title = 1; int64 id = 2; }", True),
    (
        "int32 to int64 (one wire group)",
        "message M { int32 n = 1; }",
        "message M { int64 n = 1; }",
        True,
    ),
    ("string to bytes", "message M { string s = 1; }", "message M { bytes s = 1; }", True),
    ("sint32 to int32", "message M { sint32 n = 1; }", "message M { int32 n = 1; }", False),
    ("int64 to double", "message M { int64 n = 1; }", "message M { double n = 1; }", False),
    ("fixed32 to sfixed32", "message M { fixed32 n = 1; }", "message M { sfixed32 n = 1; }", True),
    (
        "a scalar to a message",
        "message M { string s = 1; } message N { int32 a = 1; }",
        "message M { N s = 1; } message N { int32 a = 1; }",
        False,
    ),
    (
        "a scalar to a map",
        "message M { string s = 1; }",
        "message M { map<string, string> s = 1; }",
        False,
    ),
    (
        "an enum to int32 (both numbers)",
        "message M { enum E { A = 0; } E e = 1; }",
        "message M { enum E { A = 0; } int32 e = 1; }",
        True,
    ),
    (
        "a map's value type to another group",
        "message M { map<string, int32> m = 1; }",
        "message M { map<string, string> m = 1; }",
        False,
    ),
    (
        "a field's message type renamed",
        "message M { A a = 1; } message A { int32 x = 1; } message B { int32 x = 1; }",
        "message M { B a = 1; } message A { int32 x = 1; } message B { int32 x = 1; }",
        False,
    ),
    (
        "a field's message type changed incompatibly",
        "message M { A a = 1; } message A { int32 x = 1; }",
        "message M { A a = 1; } message A { string x = 1; }",
        False,
    ),
    ("a message added", USER, USER + " message Extra { int32 a = 1; }", True),
    ("a message removed", USER + " message Extra { int32 a = 1; }", USER, False),
    ("messages reordered", USER + " message B { }", "message B { } " + USER, True),
    ("an enum added", USER, USER + " enum E { A = 0; }", True),
    ("an enum removed", USER + " enum E { A = 0; }", USER, True),
    ("enum constants changed", "enum E { A = 0; B = 1; }", "enum E { A = 0; C = 1; D = 2; }", True),
    ("the package changed", USER, USER, False),  # see test_the_package_is_part_of_it
    (
        "a oneof added",
        "message M { int32 a = 1; }",
        "message M { int32 a = 1; oneof o { string b = 2; string c = 3; } }",
        True,
    ),
    (
        "a oneof removed with its fields",
        "message M { int32 a = 1; oneof o { string b = 2; } }",
        "message M { int32 a = 1; }",
        True,
    ),
    (
        "a field added to a oneof",
        "message M { oneof o { string b = 2; } }",
        "message M { oneof o { string b = 2; string c = 3; } }",
        True,
    ),
    (
        "a field removed from a oneof",
        "message M { oneof o { string b = 2; string c = 3; } }",
        "message M { oneof o { string b = 2; } }",
        False,
    ),
    (
        "one field moved into a new oneof",
        "message M { string b = 2; }",
        "message M { oneof o { string b = 2; } }",
        True,
    ),
    (
        "several fields moved into one oneof",
        "message M { string b = 2; string c = 3; }",
        "message M { oneof o { string b = 2; string c = 3; } }",
        False,
    ),
    (
        "a field moved into a oneof that had others",
        "message M { string b = 2; oneof o { string c = 3; } }",
        "message M { oneof o { string b = 2; string c = 3; } }",
        False,
    ),
    (
        "a field moved out of a oneof",
        "message M { oneof o { string b = 2; string c = 3; } }",
        "message M { string b = 2; oneof o { string c = 3; } }",
        True,
    ),
    (
        "a nested message's field changed kind",
        "message M { message N { int32 a = 1; } N n = 1; }",
        "message M { message N { string a = 1; } N n = 1; }",
        False,
    ),
    (
        "a recursive message extended",
        "message Tree { repeated Tree kids = 1; }",
        "message Tree { repeated Tree kids = 1; string label = 2; }",
        True,
    ),
]


@pytest.mark.parametrize(("rule", "old", "new", "compatible"), CASES, ids=[c[0] for c in CASES])
def test_each_rule_at_backward(rule, old, new, compatible):
    package = "other" if rule == "the package changed" else "floe.test"
    found = problems("BACKWARD", proto(old), proto(new, package))
    assert (not found) == compatible, found


def test_required_fields_added_or_removed_break_it_optional_ones_do_not():
    old = "message M { required int32 a = 1; }"
    assert problems(
        "BACKWARD", proto(old, syntax="proto2"), proto("message M { }", syntax="proto2")
    )
    assert problems(
        "BACKWARD",
        proto("message M { }", syntax="proto2"),
        proto("message M { required int32 a = 1; }", syntax="proto2"),
    )
    assert not problems(
        "BACKWARD",
        proto("message M { optional int32 a = 1; }", syntax="proto2"),
        proto("message M { }", syntax="proto2"),
    )


def test_adding_a_message_is_backward_but_not_forward_compatible():
    old, new = proto(USER), proto(USER + " message Extra { int32 a = 1; }")
    assert problems("BACKWARD", old, new) == []
    assert problems("FORWARD", old, new) == ["FORWARD: MESSAGE_REMOVED at #/Extra"]
    assert problems("FULL", old, new) == ["FORWARD: MESSAGE_REMOVED at #/Extra"]
    assert problems("NONE", old, proto("message Other { }")) == []


def test_transitive_levels_check_every_version():
    v1 = proto("message M { int32 a = 1; }")
    v2 = proto("message M { }")
    v3 = proto("message M { string a = 1; }")  # fine against v2, not against v1
    assert incompatibilities("BACKWARD", v3, [v1, v2]) == []
    assert incompatibilities("BACKWARD_TRANSITIVE", v3, [v1, v2]) == [
        "BACKWARD: FIELD_SCALAR_KIND_CHANGED at #/M.1"
    ]


def test_a_descriptor_prints_as_proto_text_of_the_same_schema():
    text = proto(
        'import "google/protobuf/timestamp.proto";\n'
        "message User { string user_name = 1; map<string, int32> scores = 2;\n"
        "  oneof contact { string email = 3; string phone = 4; }\n"
        "  google.protobuf.Timestamp at = 5; optional int32 maybe = 6; repeated Kind kinds = 7;\n"
        "  reserved 9 to 11, 20; reserved 'old';\n"
        "  message Inner { bytes b = 1; } Inner inner = 8;\n"
        "  enum Kind { A = 0; B = 1; } }\n"
        "enum Top { T = 0; }"
    )
    sent = parse(serialized(text), "PROTOBUF")
    printed = proto_text(sent)
    assert printed.startswith('syntax = "proto3";\npackage floe.test;\n')
    assert "map<string, int32> scores = 2;" in printed
    assert parse(printed, "PROTOBUF").fingerprint == text.fingerprint
    assert proto_text(text) == text.text  # registered as text: answered as written
    v2 = proto("message M { required int32 a = 1; optional string b = 2; }", syntax="proto2")
    assert parse(proto_text(parse(serialized(v2), "PROTOBUF")), "PROTOBUF").fingerprint == (
        v2.fingerprint
    )
