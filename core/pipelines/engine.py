"""A parsed pipeline made runnable: its processors compiled once, then applied to each
record (`CompiledPipeline.process`). Stateful processors (rate_limit, dedupe) keep their
state in the compiled pipeline, one per runner."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from core.pipelines import processors as p
from core.pipelines.config import DEAD_LETTER, DEFAULT_OUTPUT, PipelineSpec
from core.pipelines.records import Emit, InRecord, RecordError, SchemaSource

_DEFAULT_TARGETS = (DEFAULT_OUTPUT,)


class CompiledPipeline:
    """The processors of `spec`, ready to run."""

    def __init__(
        self,
        spec: PipelineSpec,
        schemas: SchemaSource | None = None,
        clock: Callable[[], float] = p.wall_clock,
    ) -> None:
        self.spec = spec
        self.schemas = schemas
        outputs = frozenset(spec.outputs)
        steps: list[p.Step] = []
        self._rate_limits: list[p.RateLimit] = []
        for proc in spec.processors:
            options = proc.options
            step: p.Step
            if proc.kind == "route":
                step = p.route(options, schemas, outputs)
            elif proc.kind == "rate_limit":
                limit = p.RateLimit(options, clock)
                self._rate_limits.append(limit)
                step = limit
            elif proc.kind == "dedupe":
                step = p.Dedupe(options)
            else:
                step = _FACTORIES[proc.kind](options, schemas)
            steps.append(step)
        self._steps = tuple(steps)
        self._names = tuple(
            f"processors[{i}] ({proc.kind})" for i, proc in enumerate(spec.processors)
        )

    def process(self, rec: InRecord) -> list[Emit]:
        """What `rec` becomes: one `Emit` per output it goes to, [] when filtered out.
        Raises `RecordError` naming the processor that failed."""
        flow = p.Flow(rec)
        i = 0
        try:
            for i, step in enumerate(self._steps):  # noqa: B007 (i names the failed one)
                if not step(flow):
                    return []
        except Exception as exc:
            raise RecordError(f"{self._names[i]}: {_reason(exc)}", i) from None
        try:
            value = p.to_bytes(flow.value)
        except Exception as exc:
            raise RecordError(f"writing the value out: {_reason(exc)}", -1) from None
        headers = _headers(rec)
        key = flow.key
        ts = rec.timestamp_ms
        return [Emit(out, key, value, headers, ts) for out in flow.targets or _DEFAULT_TARGETS]

    def process_batch(self, recs: Sequence[InRecord]) -> list[list[Emit] | RecordError]:
        """`process` of each record, its `RecordError` in its place when it failed."""
        out: list[list[Emit] | RecordError] = []
        process = self.process
        for rec in recs:
            try:
                out.append(process(rec))
            except RecordError as err:
                out.append(err)
        return out

    def wait_seconds(self) -> float:
        """How long the runner should wait before handing over more records (the rate
        limits' debt; 0 without rate_limit)."""
        return max((limit.wait_seconds() for limit in self._rate_limits), default=0.0)

    def dead_letter_record(self, rec: InRecord, err: RecordError) -> Emit:
        """`rec` unchanged for the dead-letter topic, with why in its headers."""
        return dead_letter_record(rec, err)


def dead_letter_record(rec: InRecord, err: RecordError) -> Emit:
    headers = _headers(rec) + (
        ("floe.error", err.message.encode("utf-8", "replace")),
        ("floe.error.processor", str(err.processor).encode()),
        ("floe.source.topic", rec.topic.encode()),
        ("floe.source.partition", str(rec.partition).encode()),
        ("floe.source.offset", str(rec.offset).encode()),
    )
    return Emit(DEAD_LETTER, rec.key, rec.value, headers, rec.timestamp_ms)


def compile_spec(
    spec: PipelineSpec,
    schemas: SchemaSource | None = None,
    *,
    clock: Callable[[], float] = p.wall_clock,
) -> CompiledPipeline:
    """`spec` ready to run; `schemas` serves the Avro processors, `clock` (monotonic
    seconds) the rate limits."""
    return CompiledPipeline(spec, schemas, clock)


def _headers(rec: InRecord) -> tuple[tuple[str, bytes], ...]:
    headers = rec.headers
    for _, value in headers:
        if value is None:
            return tuple((name, value or b"") for name, value in headers)
    return cast(tuple[tuple[str, bytes], ...], headers)  # checked: no None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"no such key: {exc.args[0] if exc.args else exc}"
    text = str(exc)
    return text or type(exc).__name__


_FACTORIES: dict[str, Callable[[Any, SchemaSource | None], p.Step]] = {
    "parse_json": p.parse_json,
    "encode_json": p.encode_json,
    "parse_avro": p.parse_avro,
    "encode_avro": p.encode_avro,
    "map": p.map_,
    "set": p.set_,
    "remove": p.remove,
    "filter": p.filter_,
    "key": p.key,
}
