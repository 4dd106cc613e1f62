"""Our hand-written declarations agree with Kafka's own message JSON, version by version.

kafka-python (a test dependency) ships a copy of Kafka's
``common/message/*.json``; when it is installed, every field present in each
supported version must match ours in name, type, nullability, tag and
explicit default. Nothing is copied into our tree: the JSON is only read here.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest

from core.kafka import SUPPORTED_VERSIONS
from core.kafka.messages import APIS
from core.kafka.schema import Array, Struct, parse_versions

kafka_protocol = pytest.importorskip("kafka.protocol")
RESOURCES = Path(kafka_protocol.__file__).parent / "schemas" / "resources"
if not (RESOURCES / "ProduceRequest.json").exists():
    pytest.skip("kafka-python without Kafka's message JSON", allow_module_level=True)

_PRIMITIVES = {"int8", "int16", "int32", "int64", "uint16", "float64", "bool"}
_PRIMITIVES |= {"string", "bytes", "records", "uuid"}


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _load(name: str) -> dict:
    text = (RESOURCES / f"{name}.json").read_text()
    text = re.sub(r"^\s*//.*$", "", text, flags=re.MULTILINE)
    return json.loads(text)


def _json_default(raw: str, type_name: str):
    if raw == "null":
        return None
    if type_name == "bool":
        return raw == "true"
    if type_name.startswith("int"):
        return int(raw, 0)
    return raw


def _json_layout(fields: list, common: dict, version: int) -> list:
    layout = []
    for field in fields:
        if version not in parse_versions(field["versions"]):
            continue
        type_name = field["type"]
        element = type_name[2:] if type_name.startswith("[]") else type_name
        if element in _PRIMITIVES:
            nested = None
        else:
            nested = _json_layout(field.get("fields") or common[element], common, version)
            element = "struct"
        kind = ("[]" if type_name.startswith("[]") else "") + element
        default = field.get("default")
        layout.append(
            (
                _snake(field["name"]),
                kind,
                version in parse_versions(field.get("nullableVersions", "none")),
                field.get("tag"),
                None if default is None else ("default", _json_default(str(default), element)),
                nested,
            )
        )
    return layout


def _our_kind(type_) -> tuple[str, object]:
    if isinstance(type_, Array):
        kind, nested = _our_kind(type_.element)
        return "[]" + kind, nested
    if isinstance(type_, Struct):
        return "struct", type_
    return type_.name, None


def _our_layout(struct_: Struct, version: int) -> list:
    layout = []
    for field in struct_.fields:
        if version not in field.versions:
            continue
        kind, nested = _our_kind(field.type)
        explicit = field.default_value(version) if field.default is not _missing() else None
        layout.append(
            (
                field.name,
                kind,
                version in field.nullable,
                field.tag,
                None if explicit is None and field.default is _missing() else ("default", explicit),
                None if nested is None else _our_layout(nested, version),
            )
        )
    return layout


def _missing():
    from core.kafka import schema

    return schema._MISSING


def _comparable(layout: list) -> list:
    """JSON defaults are only compared where the JSON states one."""
    return [(n, k, nl, tag, nested and _comparable(nested)) for n, k, nl, tag, _, nested in layout]


def _defaults(layout: list, path: str = "") -> dict:
    found = {}
    for name, _, _, _, default, nested in layout:
        if default is not None:
            found[path + name] = default[1]
        if nested:
            found.update(_defaults(nested, f"{path}{name}."))
    return found


CASES = [
    (api_key, version, kind)
    for api_key, (lo, hi) in SUPPORTED_VERSIONS.items()
    for version in range(lo, hi + 1)
    for kind in ("Request", "Response")
]


@pytest.mark.parametrize(("api_key", "version", "kind"), CASES)
def test_declaration_matches_kafka_json(api_key, version, kind):
    message = APIS[api_key].request if kind == "Request" else APIS[api_key].response
    if not (RESOURCES / f"{message.name}.json").exists():
        # kafka-python ships no KIP-848 messages (68, 69): those are checked on the wire
        # against librdkafka (tests/agents/groups/test_consumer_protocol_clients.py).
        pytest.skip(f"kafka-python ships no {message.name}.json")
    source = _load(message.name)
    assert source["apiKey"] == api_key
    # Kafka 4 dropped some old versions from validVersions (KIP-896) but kept
    # their fields' version annotations, so those versions are checked too.
    assert message.is_flexible(version) == (version in parse_versions(source["flexibleVersions"]))
    common = {s["name"]: s["fields"] for s in source.get("commonStructs", [])}
    theirs = _json_layout(source["fields"], common, version)
    ours = _our_layout(message.struct, version)
    assert _comparable(ours) == _comparable(theirs)
    their_defaults = _defaults(theirs)
    our_defaults = _defaults(ours)
    for path, value in their_defaults.items():
        if isinstance(value, str) and "uuid" in path:
            value = uuid.UUID(int=0)
        assert our_defaults.get(path) == value, path
