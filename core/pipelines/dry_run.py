"""A dry run: a configuration over sample records, every step's outcome as JSON-able data
(what the console shows before a pipeline is deployed)."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from core.pipelines.config import ConfigError, parse_config
from core.pipelines.engine import compile_spec
from core.pipelines.records import Emit, InRecord, RecordError, SchemaSource


def render_bytes(raw: bytes | None) -> str | dict[str, str] | None:
    """Bytes for people: the text when UTF-8, else ``{"base64": ...}``; null stays null."""
    if raw is None:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(raw).decode("ascii")}


def _emit(emit: Emit) -> dict[str, Any]:
    return {
        "output": emit.output,
        "key": render_bytes(emit.key),
        "value": render_bytes(emit.value),
        "headers": [[name, render_bytes(value)] for name, value in emit.headers],
    }


def dry_run(
    text: str, samples: Sequence[InRecord], schemas: SchemaSource | None = None
) -> dict[str, Any]:
    """`text` parsed and run over `samples` in a fresh pipeline (rate limits do not wait).
    ``{"ok", "problems", "records": [{"source", "outputs", "filtered", "error"}]}``; a
    record that fails shows its error, and in its outputs the dead-letter record when the
    configuration has a dead-letter topic."""
    try:
        spec = parse_config(text)
    except ConfigError as exc:
        return {"ok": False, "problems": [p.as_dict() for p in exc.problems], "records": []}
    compiled = compile_spec(spec, schemas)
    records = []
    for rec in samples:
        source = {"topic": rec.topic, "partition": rec.partition, "offset": rec.offset}
        outputs: list[dict[str, Any]] = []
        error = None
        try:
            outputs = [_emit(e) for e in compiled.process(rec)]
        except RecordError as err:
            error = {"message": err.message, "processor": err.processor}
            if spec.dead_letter is not None:
                outputs = [_emit(compiled.dead_letter_record(rec, err))]
        records.append(
            {
                "source": source,
                "outputs": outputs,
                "filtered": error is None and not outputs,
                "error": error,
            }
        )
    return {"ok": True, "problems": [], "records": records}
