"""The processors: each a step over one record in flight (`Flow`), returning False when
the record goes no further (filtered, a duplicate) and raising when it cannot be handled
(the engine names the processor in the record's error). docs/PIPELINES.md describes each.
"""

from __future__ import annotations

import datetime
import decimal
import io
import json
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import fastavro
import msgspec

from core.pipelines.expressions import Expression, field, project, whole
from core.pipelines.fastpath import compile_fast, value_variable
from core.pipelines.records import InRecord, SchemaSource
from core.schemas.framed import frame_split

_json_decode = msgspec.json.Decoder().decode
# An object's fields stay JSON text until read (expressions.field): decoding a 1 KiB
# record whole costs several times what finding its fields does.
_json_decode_fields = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode
_json_encode = msgspec.json.Encoder().encode


class StepError(Exception):
    """A processor's own refusal of a record (its message is the whole story)."""


class Flow:
    """One record on its way through the processors."""

    __slots__ = ("rec", "value", "key", "targets")

    def __init__(self, rec: InRecord) -> None:
        self.rec = rec
        self.value: Any = rec.value
        self.key: bytes | None = rec.key
        self.targets: tuple[str, ...] | None = None  # None: the default output


Step = Callable[[Flow], bool]


# --- the variables an expression reads -----------------------------------------------------


def _key_variable(flow: Flow) -> Any:
    key = flow.key
    if key is None:
        return None
    try:
        return key.decode()
    except UnicodeDecodeError:
        return key


def _headers_variable(flow: Flow) -> Any:
    return {
        name: (value.decode("utf-8", "replace") if value is not None else "")
        for name, value in flow.rec.headers
    }


_VARIABLES: dict[str, Callable[[Flow], Any]] = {
    "value": value_variable,
    "key": _key_variable,
    "headers": _headers_variable,
    "topic": lambda flow: flow.rec.topic,
    "partition": lambda flow: flow.rec.partition,
    "offset": lambda flow: flow.rec.offset,
    "timestamp": lambda flow: flow.rec.timestamp_ms,
}


def evaluator(expression: Expression) -> Callable[[Flow], Any]:
    """A function of a flow that evaluates `expression`: on the fast road when it can
    (`fastpath`), else by CEL with only the variables (and the fields of `value`) that
    it reads. Maps in the result have their keys sorted (`ordered`)."""
    cel_run = _cel_evaluator(expression)

    def slow(flow: Flow) -> Any:
        return ordered(cel_run(flow))

    fast = compile_fast(expression.source, _VARIABLES)
    if fast is None:
        return slow

    def run(flow: Flow) -> Any:
        try:
            return fast(flow)
        except Exception:  # Fallback, or anything unforeseen: CEL has the last word
            return slow(flow)

    return run


def _cel_evaluator(expression: Expression) -> Callable[[Flow], Any]:
    execute = expression.program.execute
    projection = expression.projection
    names = expression.variables
    functions = expression.functions
    if names == ("value",) and not functions:
        if projection is None:
            return lambda flow: execute({"value": whole(flow.value)})
        return lambda flow: execute({"value": project(flow.value, projection)})
    others = tuple((name, _VARIABLES[name]) for name in names if name != "value")
    reads_value = "value" in names

    def run(flow: Flow) -> Any:
        activation = {name: get(flow) for name, get in others}
        if functions:
            activation.update(functions)
        if reads_value:
            value = flow.value
            activation["value"] = whole(value) if projection is None else project(value, projection)
        return execute(activation)

    return run


# --- plain values ------------------------------------------------------------------------


def to_bytes(value: Any) -> bytes | None:
    """A value as a record's bytes: bytes and null as they are, anything else as JSON."""
    if value is None or type(value) is bytes:
        return value
    return _json_encode(value)


def ordered(value: Any) -> Any:
    """A value from the evaluator with its maps' keys sorted: CEL maps have no order, and
    the binding hands them over in an order that changes from process to process; the
    records written must not."""
    kind = type(value)
    if kind is dict:
        if all(type(k) is str for k in value):
            return {k: ordered(value[k]) for k in sorted(value)}
        return {k: ordered(v) for k, v in sorted(value.items(), key=lambda kv: repr(kv[0]))}
    if kind is list:
        return [ordered(v) for v in value]
    return value


def _path(name: str) -> tuple[str, ...]:
    return tuple(name.split("."))


def _structured(flow: Flow, what: str) -> dict[str, Any]:
    value = flow.value
    if type(value) is not dict:
        raise StepError(f"{what} needs a structured value (parse it first), not {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return "bytes"
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "a map"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


# --- the processors ----------------------------------------------------------------------


def parse_json(options: Any, schemas: SchemaSource | None) -> Step:
    def step(flow: Flow) -> bool:
        raw = flow.value
        if type(raw) is not bytes:
            raise StepError(f"parse_json reads bytes, the value is {_kind(raw)}")
        try:
            try:
                flow.value = _json_decode_fields(raw)
            except msgspec.ValidationError:  # JSON, but not an object
                flow.value = _json_decode(raw)
        except msgspec.DecodeError as exc:
            raise StepError(f"the value is not JSON: {exc}") from None
        return True

    return step


def encode_json(options: Any, schemas: SchemaSource | None) -> Step:
    def step(flow: Flow) -> bool:
        flow.value = _json_encode(flow.value)
        return True

    return step


def map_(options: Any, schemas: SchemaSource | None) -> Step:
    run = evaluator(Expression(options))

    def step(flow: Flow) -> bool:
        flow.value = run(flow)
        return True

    return step


def set_(options: Any, schemas: SchemaSource | None) -> Step:
    fields = tuple((_path(name), evaluator(Expression(source))) for name, source in options.items())

    def step(flow: Flow) -> bool:
        results = [(path, run(flow)) for path, run in fields]  # all read the value as it was
        value = _structured(flow, "set")
        for path, result in results:
            node = value
            for name in path[:-1]:
                inner = field(node, name) if name in node else None
                if inner is None:
                    inner = node[name] = {}
                elif type(inner) is not dict:
                    raise StepError(f"cannot set {'.'.join(path)}: {name} is {_kind(inner)}")
                node = inner
            node[path[-1]] = result
        return True

    return step


def remove(options: Any, schemas: SchemaSource | None) -> Step:
    paths = tuple(_path(name) for name in options)

    def step(flow: Flow) -> bool:
        value = _structured(flow, "remove")
        for path in paths:
            node: Any = value
            for name in path[:-1]:
                node = field(node, name) if name in node else None
                if type(node) is not dict:
                    break
            else:
                node.pop(path[-1], None)
        return True

    return step


def filter_(options: Any, schemas: SchemaSource | None) -> Step:
    run = evaluator(Expression(options))

    def step(flow: Flow) -> bool:
        keep = run(flow)
        if type(keep) is not bool:
            raise StepError(f"the filter gave {_kind(keep)}, not a bool")
        return keep

    return step


def route(options: Any, schemas: SchemaSource | None, outputs: frozenset[str]) -> Step:
    if "expression" in options:
        run = evaluator(Expression(options["expression"]))

        def by_expression(flow: Flow) -> bool:
            names = run(flow)
            if type(names) is str:
                names = (names,)
            elif type(names) is list and all(type(n) is str for n in names):
                names = tuple(names)
            else:
                raise StepError(f"the route gave {_kind(names)}, not an output name or a list")
            unknown = [n for n in names if n not in outputs]
            if unknown:
                raise StepError(f"the route names no output {unknown[0]!r}")
            flow.targets = names
            return bool(names)

        return by_expression
    cases = tuple(
        (evaluator(Expression(case["when"])), tuple(case["output"])) for case in options["cases"]
    )
    default = tuple(options["default"])

    def by_cases(flow: Flow) -> bool:
        for when, targets in cases:
            matched = when(flow)
            if type(matched) is not bool:
                raise StepError(f"a route's when gave {_kind(matched)}, not a bool")
            if matched:
                flow.targets = targets
                return True
        flow.targets = default
        return bool(default)

    return by_cases


def key(options: Any, schemas: SchemaSource | None) -> Step:
    run = evaluator(Expression(options))

    def step(flow: Flow) -> bool:
        result = run(flow)
        if result is None or type(result) is bytes:
            flow.key = result
        elif type(result) is str:
            flow.key = result.encode()
        elif type(result) is int:
            flow.key = str(result).encode()
        else:
            raise StepError(f"the key gave {_kind(result)}, not a string, bytes or null")
        return True

    return step


class RateLimit:
    """A token bucket: each record takes a token; the bucket may go into debt, and
    `wait_seconds` says how long until it is out of it (the runner waits that long before
    handing over more records; nothing here sleeps)."""

    def __init__(self, options: Any, clock: Callable[[], float]) -> None:
        self.rate = float(options["records_per_second"])
        self.burst = float(options["burst"])
        self.clock = clock
        self.tokens = self.burst
        self.at = clock()

    def _refill(self) -> None:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now

    def __call__(self, flow: Flow) -> bool:
        self._refill()
        self.tokens -= 1.0
        return True

    def wait_seconds(self) -> float:
        self._refill()
        return max(0.0, -self.tokens / self.rate)


class Dedupe:
    """Drops a record whose key (an expression) was seen within `window_seconds` of record
    time before it; remembers at most `max_keys` keys (the oldest are forgotten first)."""

    def __init__(self, options: Any) -> None:
        self.run = evaluator(Expression(options["key"]))
        self.window_ms = float(options["window_seconds"]) * 1000.0
        self.max_keys = int(options["max_keys"])
        self.seen: OrderedDict[Any, int] = OrderedDict()

    def __call__(self, flow: Flow) -> bool:
        found = self.run(flow)
        if isinstance(found, list | dict):
            found = _json_encode(found)
        now = flow.rec.timestamp_ms
        seen = self.seen
        while seen:
            oldest, since = next(iter(seen.items()))
            if now - since < self.window_ms:
                break
            del seen[oldest]
        first = seen.get(found)
        if first is not None and abs(now - first) < self.window_ms:
            return False
        seen[found] = now
        seen.move_to_end(found)
        if len(seen) > self.max_keys:
            seen.popitem(last=False)
        return True


# --- Avro, framed with a schema id (Confluent's wire format) --------------------------------

_SCHEMA_CACHE = 256


def _avro_plain(value: Any) -> Any:
    """An Avro value the expression language can hold (decimals, UUIDs, dates and times as
    strings)."""
    if isinstance(value, dict):
        return {k: _avro_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_avro_plain(v) for v in value]
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, datetime.date | datetime.time) and not isinstance(
        value, datetime.datetime
    ):
        return value.isoformat()
    return value


def _parsed(text: str) -> Any:
    return fastavro.parse_schema(json.loads(text))


def parse_avro(options: Any, schemas: SchemaSource | None) -> Step:
    cache: dict[int, Any] = {}

    def step(flow: Flow) -> bool:
        raw = flow.value
        if type(raw) is not bytes:
            raise StepError(f"parse_avro reads bytes, the value is {_kind(raw)}")
        framed = frame_split(raw)
        if framed is None:
            raise StepError("the value is not framed with a schema id (no magic byte 0)")
        schema_id, payload = framed
        schema = cache.get(schema_id)
        if schema is None:
            if schemas is None:
                raise StepError("no schema registry is at hand to read schema ids")
            try:
                schema = _parsed(schemas.schema_by_id(schema_id))
            except Exception as exc:
                raise StepError(f"schema id {schema_id}: {exc}") from None
            if len(cache) >= _SCHEMA_CACHE:
                cache.clear()
            cache[schema_id] = schema
        stream = io.BytesIO(payload)
        try:
            value = fastavro.schemaless_reader(stream, schema, None)
        except Exception as exc:
            raise StepError(f"the value does not read with schema {schema_id}: {exc}") from None
        if stream.tell() != len(payload):
            raise StepError(f"{len(payload) - stream.tell()} bytes left after the Avro value")
        flow.value = _avro_plain(value)
        return True

    return step


def encode_avro(options: Any, schemas: SchemaSource | None) -> Step:
    subject = options["subject"]
    resolved: list[tuple[bytes, Any]] = []  # the frame header and parsed schema, once known

    def step(flow: Flow) -> bool:
        if not resolved:
            if schemas is None:
                raise StepError("no schema registry is at hand to find the subject's schema")
            try:
                schema_id, text = schemas.latest(subject)
                resolved.append((b"\x00" + schema_id.to_bytes(4, "big"), _parsed(text)))
            except Exception as exc:
                raise StepError(f"subject {subject!r}: {exc}") from None
        header, schema = resolved[0]
        out = io.BytesIO()
        out.write(header)
        try:
            fastavro.schemaless_writer(out, schema, whole(flow.value))
        except Exception as exc:
            raise StepError(f"the value does not fit subject {subject!r}: {exc}") from None
        flow.value = out.getvalue()
        return True

    return step


def wall_clock() -> float:
    return time.monotonic()
