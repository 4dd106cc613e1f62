"""A configuration tried on sample records, nothing written: records a person gives, or
the newest records of the input topics, which only the cluster's agents can read (the
control plane holds no bucket credentials) — a live agent takes a ``pipeline_dry_run``
request over the browse channel (`virtualclusters.browsing.asking`), reads them with its
record browser, runs `core.pipelines.dry_run` and posts the result back, checked here
(`dry_run_check`) before it is shown."""

from __future__ import annotations

import time
from typing import Annotated, Any

import msgspec
from msgspec import Meta, Struct

from core.pipelines import InRecord, KafkaInput, dry_run
from metadata_store.agent_api import schemas
from virtualclusters.browsing.agent_api import answer_decoded
from virtualclusters.browsing.asking import agent_ask
from virtualclusters.models import VirtualCluster
from virtualclusters.pipelines.config import ConfigInvalid, config_check

KIND = "pipeline_dry_run"
MAX_SAMPLES = 100
DEFAULT_SAMPLES = 10
MAX_ANSWER_BYTES = 8 * 1024 * 1024
SHORT = Annotated[str, Meta(max_length=1_000)]


class _Body(Struct, forbid_unknown_fields=False, frozen=True):
    pass


class DryRunSource(_Body, frozen=True):
    topic: Annotated[str, Meta(max_length=249)] = ""
    partition: Annotated[int, Meta(ge=0, le=2**31 - 1)] = 0
    offset: Annotated[int, Meta(ge=-1, le=2**62)] = -1


class DryRunError(_Body, frozen=True):
    message: Annotated[str, Meta(max_length=10_000)]
    processor: Annotated[int, Meta(ge=-1, le=10_000)] = -1


class DryRunRecord(_Body, frozen=True):
    source: DryRunSource
    outputs: Annotated[list[dict[str, Any]], Meta(max_length=1_000)] = []
    filtered: bool = False
    error: DryRunError | None = None


class DryRunProblem(_Body, frozen=True):
    line: Annotated[int, Meta(ge=0, le=2**31 - 1)]
    column: Annotated[int, Meta(ge=0, le=2**31 - 1)]
    path: SHORT = ""
    message: Annotated[str, Meta(max_length=10_000)] = ""


class DryRunResult(_Body, frozen=True):
    """A dry run as `core.pipelines.dry_run` answers it (and the agent posts it)."""

    ok: bool
    problems: Annotated[list[DryRunProblem], Meta(max_length=1_000)] = []
    records: Annotated[list[DryRunRecord], Meta(max_length=MAX_SAMPLES * 10)] = []


_result = msgspec.json.Decoder(DryRunResult)


def dry_run_check(raw: bytes, owner: dict[str, Any]) -> dict[str, Any]:
    """An agent's answer to a ``pipeline_dry_run`` request as the console will show it,
    or `schemas.BadBody` saying what is wrong."""
    result = answer_decoded(raw, _result, what="dry run", max_bytes=MAX_ANSWER_BYTES)
    if len(result.records) > int(owner.get("limit") or MAX_SAMPLES):
        raise schemas.BadBody("dry run: more records than asked for")
    topics = set(owner.get("topics") or ())
    if any(r.source.topic not in topics for r in result.records):
        raise schemas.BadBody("dry run: a record of a topic that was not asked for")
    checked: dict[str, Any] = msgspec.to_builtins(result)
    return checked


def _refused(exc: ConfigInvalid) -> dict[str, Any]:
    return {"ok": False, "problems": [p.as_dict() for p in exc.problems], "records": []}


def _encoded(value: str | None) -> bytes | None:
    return None if value is None else value.encode()


def samples_dry_run(
    cluster: VirtualCluster, *, config: str, samples: list[dict[str, Any]]
) -> dict[str, Any]:
    """Run `config` on records a person wrote (value and key as text, headers a
    mapping of text), here: the engine is pure Python and reads nothing."""
    try:
        spec = config_check(cluster, config)
    except ConfigInvalid as exc:
        return _refused(exc)
    first_topic = spec.input.topics[0] if isinstance(spec.input, KafkaInput) else ""
    now_ms = int(time.time() * 1000)
    records = [
        InRecord(
            topic=s.get("topic") or first_topic,
            partition=int(s.get("partition") or 0),
            offset=int(s["offset"]) if s.get("offset") is not None else index,
            timestamp_ms=int(s["timestamp"]) if s.get("timestamp") is not None else now_ms,
            key=_encoded(s.get("key")),
            value=_encoded(s.get("value")),
            headers=tuple((k, _encoded(v)) for k, v in (s.get("headers") or {}).items()),
        )
        for index, s in enumerate(samples)
    ]
    return {**dry_run(config, records), "agent": None}


def topics_dry_run(cluster: VirtualCluster, *, config: str, limit: int) -> dict[str, Any]:
    """Run `config` on the newest `limit` records of its input topics, as a live agent
    of `cluster` reads them. Raises the browse channel's errors (`BrowseUnavailable`
    and its kinds)."""
    try:
        spec = config_check(cluster, config)
    except ConfigInvalid as exc:
        return _refused(exc)
    if not isinstance(spec.input, KafkaInput):
        return {"ok": True, "problems": [], "records": [], "agent": None}
    query = {"kind": KIND, "config": config, "topics": sorted(spec.input.topics), "limit": limit}
    return agent_ask(cluster, query, what="sample records")
