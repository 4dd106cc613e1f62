"""Bodies generated from the declarations: a non-default value in every field."""

from __future__ import annotations

import uuid
from typing import Any

from core.kafka.schema import Array, Field, Message, Struct

_NUMBERS = {"int8": 5, "int16": 1234, "int32": 123456, "int64": 2**40 + 3, "float64": 1.5}


def sample_body(message: Message, version: int, *, nulls: bool = False) -> dict[str, Any]:
    """Every field of ``version`` set to a non-default value (or None where nullable, with nulls)."""
    return _sample_struct(message.struct, version, message.name, nulls)


def expected_body(message: Message, version: int, sample: dict[str, Any]) -> dict[str, Any]:
    """What decoding the encoded sample must give: the sample, plus defaults for absent fields."""
    return _expected_struct(message.struct, version, sample)


def _sample_struct(struct_: Struct, version: int, path: str, nulls: bool) -> dict[str, Any]:
    return {
        f.name: _sample_field(f, version, f"{path}.{f.name}", nulls)
        for f in struct_.fields
        if version in f.versions
    }


def _sample_field(field: Field, version: int, path: str, nulls: bool) -> Any:
    if nulls and version in field.nullable:
        return None
    typ = field.type
    if isinstance(typ, Struct):
        return _sample_struct(typ, version, path, nulls)
    if isinstance(typ, Array):
        element = typ.element
        if isinstance(element, Struct):
            return [_sample_struct(element, version, f"{path}[{i}]", nulls) for i in range(2)]
        return [
            _sample_scalar(element.name, path, field),
            _sample_scalar(element.name, path + "'", field),
        ]
    return _sample_scalar(typ.name, path, field, version)


def _sample_scalar(type_name: str, path: str, field: Field, version: int | None = None) -> Any:
    default = field.default_value(version) if version is not None else None
    if type_name == "bool":
        return not default
    if type_name in _NUMBERS:
        value = _NUMBERS[type_name] + len(path) % 7
        return value + 1 if value == default else value
    if type_name == "string":
        return f"{path}-é"
    if type_name == "bytes":
        return b"\x00\xff" + path.encode()
    if type_name == "records":
        return b"batch:" + path.encode() * 3
    if type_name == "uuid":
        return uuid.uuid5(uuid.NAMESPACE_URL, path)
    raise AssertionError(f"no sample for {type_name}")


def _expected_struct(struct_: Struct, version: int, sample: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for field in struct_.fields:
        if version not in field.versions:
            out[field.name] = field.default_value(version)
            continue
        value = sample[field.name]
        typ = field.type
        if isinstance(typ, Struct) and value is not None:
            value = _expected_struct(typ, version, value)
        elif isinstance(typ, Array) and isinstance(typ.element, Struct) and value is not None:
            value = [_expected_struct(typ.element, version, item) for item in value]
        out[field.name] = value
    return out
