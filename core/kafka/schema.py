"""Declarative message schemas, compiled once per version into fast codecs.

A ``Message`` mirrors one of Kafka's ``common/message/*.json`` files: valid
and flexible versions, and fields with version ranges, nullable versions,
defaults and tags. ``Message.codec(version)`` compiles the declaration for
that version into a ``WireType`` whose decode/encode are short lists of
closures: consecutive fixed-width fields collapse into one precompiled
``struct.Struct``, flexible versions get a KIP-482 tagged-field section.

Bodies are plain dicts keyed by snake_case field names. Decoding fills every
declared field (fields absent from the version get their default), encoding
treats a missing key as the default and ignores keys the version lacks.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, NamedTuple

from . import types as t
from .api_keys import ApiKey

MAX_VERSION = 0x7FFF
_MISSING: Any = object()


class Versions(NamedTuple):
    """An inclusive version range; ``lo > hi`` means no version at all."""

    lo: int
    hi: int

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.lo <= version <= self.hi

    def __bool__(self) -> bool:
        return self.lo <= self.hi


def parse_versions(spec: str) -> Versions:
    """Kafka's notation: ``"3+"``, ``"0-12"``, ``"7"`` or ``"none"``."""
    spec = spec.strip()
    if spec == "none":
        return Versions(1, 0)
    if spec.endswith("+"):
        return Versions(int(spec[:-1]), MAX_VERSION)
    lo, _, hi = spec.partition("-")
    return Versions(int(lo), int(hi or lo))


class Struct:
    """An ordered group of fields (a message body, an array element, a nested struct)."""

    __slots__ = ("fields",)

    def __init__(self, *fields: Field) -> None:
        self.fields = fields


class Array:
    """An array of a primitive family/type or of a ``Struct``."""

    __slots__ = ("element",)

    def __init__(self, element: Struct | t.Family | t.WireType) -> None:
        self.element = element


FieldType = t.Family | t.WireType | Struct | Array


class Field:
    """One field: ``Field("log_start_offset", Int64, "5+", default=-1)``.

    ``versions``/``nullable`` use Kafka's notation. ``tag`` makes it a KIP-482
    tagged field (present in ``versions``, written only when not default).
    ``default`` is the JSON's explicit default; otherwise None for a nullable
    field, [] for an array, and the type's zero.
    """

    __slots__ = ("name", "type", "versions", "nullable", "default", "tag")

    def __init__(
        self,
        name: str,
        type_: FieldType,
        versions: str = "0+",
        *,
        nullable: str = "none",
        default: Any = _MISSING,
        tag: int | None = None,
    ) -> None:
        self.name = name
        self.type = type_
        self.versions = parse_versions(versions)
        self.nullable = parse_versions(nullable)
        self.default = default
        self.tag = tag

    def default_value(self, version: int) -> Any:
        """The value a decoded body holds when the field is absent."""
        if self.default is not _MISSING:
            return self.default
        if isinstance(self.type, Struct):
            return struct_defaults(self.type, version)
        if self.nullable:
            return None
        return self._zero(version)

    def encode_default(self, version: int) -> Any:
        """The value written for a missing key (never None where null is illegal)."""
        value = self.default_value(version)
        if value is None and version not in self.nullable:
            return self._zero(version)
        return value

    def _zero(self, version: int) -> Any:
        if isinstance(self.type, Array):
            return []
        if isinstance(self.type, Struct):
            return struct_defaults(self.type, version)
        return self.type.zero


def struct_defaults(struct_: Struct, version: int) -> dict[str, Any]:
    """A fresh dict holding every field's default for ``version``."""
    return {f.name: _fresh(f.default_value(version)) for f in struct_.fields}


def _fresh(value: Any) -> Any:
    if isinstance(value, list):
        return [_fresh(v) for v in value]
    if isinstance(value, dict):
        return {k: _fresh(v) for k, v in value.items()}
    return value


# --- Compilation -----------------------------------------------------------------------


def compile_struct(struct_: Struct, version: int, flexible: bool, name: str) -> t.WireType:
    """Compile the fields present in ``version`` into one decode and one encode function."""
    decode_steps: list[Callable[..., Any]] = []
    encode_steps: list[tuple[str, Callable[..., Any]]] = []
    run: list[tuple[Field, t.WireType]] = []
    tagged: list[tuple[int, str, t.WireType, Any]] = []
    min_size = 1 if flexible else 0

    def flush_run() -> None:
        if run:
            decode_steps.append(_run_decoder(run))
            encode_steps.append((", ".join(f.name for f, _ in run), _run_encoder(run, version)))
            run.clear()

    for field in struct_.fields:
        if version not in field.versions:
            continue
        codec = compile_field(field, version, flexible, f"{name}.{field.name}")
        if field.tag is not None:
            if not flexible:
                raise TypeError(f"tagged field {name}.{field.name} in a non-flexible version")
            tagged.append((field.tag, field.name, codec, field.default_value(version)))
            continue
        min_size += codec.min_size
        if codec.fmt is not None:
            run.append((field, codec))
            continue
        flush_run()
        decode_steps.append(_field_decoder(field.name, codec.decode))
        encode_steps.append(
            (field.name, _field_encoder(field.name, field.encode_default(version), codec.encode))
        )
    flush_run()
    if flexible:
        tags = t.TaggedFields(tagged)
        decode_steps.append(tags.decode_into)
        encode_steps.append(("tagged fields", tags.encode_from))

    return t.WireType(
        name,
        _struct_decoder(struct_, version, decode_steps),
        _struct_encoder(encode_steps),
        zero=None,
        min_size=min_size,
    )


def compile_field(field: Field, version: int, flexible: bool, name: str) -> t.WireType:
    nullable = version in field.nullable
    typ = field.type
    if isinstance(typ, Struct):
        inner = compile_struct(typ, version, flexible, name)
        return _nullable_struct(inner) if nullable else inner
    if isinstance(typ, Array):
        element = typ.element
        if isinstance(element, Struct):
            elem_codec = compile_struct(element, version, flexible, name)
        else:
            elem_codec = element.codec(flexible=flexible, nullable=False)
        return t.array(elem_codec, compact=flexible, nullable=nullable)
    return typ.codec(flexible=flexible, nullable=nullable)


_PRESENT, _ABSENT = b"\x01", b"\xff"


def _nullable_struct(inner: t.WireType) -> t.WireType:
    """A nullable struct field: an int8 marker (-1 null, 1 present), then the struct."""

    def decode(buf: memoryview, pos: int) -> tuple[Any, int]:
        if pos >= len(buf):
            raise t.Malformed(f"{inner.name}: truncated")
        marker = buf[pos]
        if marker == 0xFF:
            return None, pos + 1
        return inner.decode(buf, pos + 1)

    def encode(value: Any, out: list[Any]) -> None:
        if value is None:
            out.append(_ABSENT)
            return
        out.append(_PRESENT)
        inner.encode(value, out)

    return t.WireType(inner.name, decode, encode, zero=None, min_size=1)


def _struct_decoder(struct_: Struct, version: int, steps: list[Callable[..., Any]]) -> t.Decode:
    # The template holds every declared field in declaration order; present
    # fields are overwritten, absent ones keep their default. Mutable defaults
    # of absent/tagged fields are rebuilt per decode so callers may mutate them.
    template = struct_defaults(struct_, version)
    fresh = [
        (f.name, f.default_value)
        for f in struct_.fields
        if isinstance(template[f.name], (list, dict))
        and (version not in f.versions or f.tag is not None)
    ]
    copy = template.copy

    if not fresh:

        def decode(buf: memoryview, pos: int) -> tuple[dict[str, Any], int]:
            out = copy()
            for step in steps:
                pos = step(buf, pos, out)
            return out, pos

        return decode

    def decode_with_fresh(buf: memoryview, pos: int) -> tuple[dict[str, Any], int]:
        out = copy()
        for field_name, default_value in fresh:
            out[field_name] = _fresh(default_value(version))
        for step in steps:
            pos = step(buf, pos, out)
        return out, pos

    return decode_with_fresh


def _struct_encoder(steps: list[tuple[str, Callable[..., Any]]]) -> t.Encode:
    def encode(values: dict[str, Any], out: list[Any]) -> None:
        for label, step in steps:
            try:
                step(values, out)
            except (struct.error, TypeError, ValueError, AttributeError, OverflowError) as exc:
                exc.add_note(f"while encoding {label}")
                raise

    return encode


def _field_decoder(name: str, decode: t.Decode) -> Callable[..., Any]:
    def step(buf: memoryview, pos: int, out: dict[str, Any]) -> int:
        out[name], pos = decode(buf, pos)
        return pos

    return step


def _field_encoder(name: str, default: Any, encode: t.Encode) -> Callable[..., Any]:
    def step(values: dict[str, Any], out: list[Any]) -> None:
        encode(values.get(name, default), out)

    return step


def _run_decoder(run: list[tuple[Field, t.WireType]]) -> Callable[..., Any]:
    s = struct.Struct(">" + "".join(codec.fmt or "" for _, codec in run))
    unpack, size = s.unpack_from, s.size
    names = tuple(f.name for f, _ in run)
    if len(names) == 1:
        (only,) = names

        def step_one(buf: memoryview, pos: int, out: dict[str, Any]) -> int:
            out[only] = unpack(buf, pos)[0]
            return pos + size

        return step_one

    def step(buf: memoryview, pos: int, out: dict[str, Any]) -> int:
        out.update(zip(names, unpack(buf, pos), strict=False))
        return pos + size

    return step


def _run_encoder(run: list[tuple[Field, t.WireType]], version: int) -> Callable[..., Any]:
    pack = struct.Struct(">" + "".join(codec.fmt or "" for _, codec in run)).pack
    pairs = tuple((f.name, f.encode_default(version)) for f, _ in run)
    if len(pairs) == 1:
        ((only, default),) = pairs

        def step_one(values: dict[str, Any], out: list[Any]) -> None:
            out.append(pack(values.get(only, default)))

        return step_one

    def step(values: dict[str, Any], out: list[Any]) -> None:
        out.append(pack(*[values.get(n, d) for n, d in pairs]))

    return step


# --- Messages and APIs -----------------------------------------------------------------


class Message:
    """One request or response declaration (the Python twin of a Kafka JSON file)."""

    def __init__(self, name: str, *, valid: str, flexible: str, fields: tuple[Field, ...]):
        self.name = name
        self.valid = parse_versions(valid)
        self.flexible = parse_versions(flexible)
        self.struct = Struct(*fields)
        self._codecs: dict[int, t.WireType] = {}

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible

    def codec(self, version: int) -> t.WireType:
        """The compiled codec for ``version`` (compiled on first use, then cached)."""
        codec = self._codecs.get(version)
        if codec is None:
            if version not in self.valid:
                raise ValueError(f"{self.name} has no version {version}")
            codec = compile_struct(self.struct, version, self.is_flexible(version), self.name)
            self._codecs[version] = codec
        return codec

    def defaults(self, version: int) -> dict[str, Any]:
        """A body with every field at its default, to fill in and encode."""
        return struct_defaults(self.struct, version)

    def __repr__(self) -> str:
        return f"<Message {self.name} v{self.valid.lo}-{self.valid.hi}>"


class Api:
    """An API key with its request and response declarations."""

    def __init__(self, key: ApiKey, *, request: Message, response: Message) -> None:
        if request.valid != response.valid:
            raise ValueError(f"{key.name}: request and response versions differ")
        self.key = key
        self.request = request
        self.response = response

    @property
    def versions(self) -> tuple[int, int]:
        return self.request.valid.lo, self.request.valid.hi
