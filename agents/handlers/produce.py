"""Produce: validate each partition's record batches, put the whole request into the open
segment, and answer after the segment's commit with the assigned base offsets.

No per-record work happens here: `validate_batches` reads the 61-byte batch headers and
runs the C CRC-32C over a memoryview of the request frame, which the segment keeps by
reference until it is written out (the only copy of the payload).
"""

from __future__ import annotations

import uuid
from typing import Any

from agents.arrival_order import TURN
from agents.client_stats import PRODUCERS
from agents.context import AgentContext
from agents.metrics import Counter, error_label
from agents.schema_registry.validation import ValidationUnavailable, validated_fields
from agents.topics import TopicInfo
from agents.write_path import MAX_SEGMENT_BATCHES, BatchToWrite
from core.kafka import RequestHeader
from core.kafka.errors import ErrorCode
from core.kafka.records import BatchHeader, CorruptRecord, RecordTooLarge, validate_batches
from core.topic_types import LIGHTNING, STANDARD, TOPIC_TYPE

_PRODUCED_BYTES = Counter("floe_produce_bytes_total", "Record batch bytes accepted for writing.")
_PRODUCED_BATCHES = Counter("floe_produce_batches_total", "Record batches accepted for writing.")
_PARTITION_ERRORS = Counter(
    "floe_produce_partition_errors_total", "Produce partition results by error code.", ("error",)
)


# How long a client refused by its plan's cap is asked to wait before trying again.
QUOTA_THROTTLE_MS = 1000
QUOTA_EXCEEDED_MESSAGE = "the organization's plan caps this month's writes and the cap is reached"


def lightning_topic(ctx: AgentContext, info: TopicInfo) -> bool:
    """The topic's floe.topic.type (the cluster's default_topic_type when unset)."""
    default = ctx.cluster_config.get("default_topic_type") or STANDARD
    return str(info.configs.get(TOPIC_TYPE, default)) == LIGHTNING


def lightning_txn_message(info: TopicInfo) -> str:
    """Why a transactional batch to a lightning topic is refused."""
    return (
        f"topic {info.name!r} is a lightning topic ({TOPIC_TYPE}=lightning): transactions"
        " are not supported on lightning topics; use a standard topic"
    )


def mirrored_message(info: TopicInfo) -> str:
    """Why produce to a mirrored topic is refused (Produce v8+ carries the message)."""
    return (
        f"topic {info.name!r} is mirrored by migration {info.mirrored_by}: read-only"
        " until its cutover"
    )


def _partition_result(index: int, error: int = 0, message: str | None = None) -> dict[str, Any]:
    return {
        "index": index,
        "error_code": error,
        "base_offset": -1,
        "log_append_time_ms": -1,
        "log_start_offset": -1,
        "record_errors": [],
        "error_message": message,
    }


async def _resolve_topics(
    ctx: AgentContext, topic_data: list[dict[str, Any]]
) -> list[TopicInfo | None]:
    """The topic of each `topic_data` entry, by name (or by id where the version uses ids)."""
    names: dict[str, int] = {}
    ids: list[uuid.UUID] = []
    for topic in topic_data:
        name = topic.get("name")
        if name:
            highest = max((p["index"] for p in topic["partition_data"]), default=-1)
            names[name] = max(names.get(name, -1), highest)
        elif topic.get("topic_id"):
            ids.append(topic["topic_id"])
    by_name = await ctx.topics.by_names(names, need_partition=names) if names else {}
    by_id = await ctx.topics.by_ids(ids) if ids else {}
    return [
        by_name.get(t["name"])
        if t.get("name")
        else (by_id.get(t["topic_id"]) if t.get("topic_id") else None)
        for t in topic_data
    ]


async def handle_produce(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any] | None:
    """Kafka Produce (v3+: magic-2 batches only). None for acks=0: no response at all."""
    acks = body["acks"]
    topic_data = body["topic_data"]
    if acks not in (0, 1, -1):
        return _all_failed(topic_data, ErrorCode.INVALID_REQUIRED_ACKS)
    if ctx.produce_quota_exceeded:
        # The organization's plan caps this month's writes and the cap is reached (the
        # control plane says so on every heartbeat): refuse rather than store data nobody
        # pays for, and ask the client to slow down.
        if acks == 0:
            return None
        refused = _all_failed(
            topic_data, ErrorCode.THROTTLING_QUOTA_EXCEEDED, QUOTA_EXCEEDED_MESSAGE
        )
        refused["throttle_time_ms"] = QUOTA_THROTTLE_MS
        _PARTITION_ERRORS.inc(
            sum(len(t["partition_data"]) for t in topic_data),
            ErrorCode.THROTTLING_QUOTA_EXCEEDED.name,
        )
        return refused

    topics = await _resolve_topics(ctx, topic_data)
    responses = []
    batches: list[BatchToWrite] = []
    # (partition result to fill in, index of its first batch, number of batches)
    slots: list[tuple[dict[str, Any], int, int]] = []
    for topic, info in zip(topic_data, topics, strict=True):
        partition_results: list[dict[str, Any]] = []
        responses.append(
            {
                "name": topic.get("name"),
                "topic_id": topic.get("topic_id"),
                "partition_responses": partition_results,
            }
        )
        for partition in topic["partition_data"]:
            index = partition["index"]
            result = _partition_result(index)
            partition_results.append(result)
            if info is None or not 0 <= index < info.partitions:
                result["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if info.mirrored_by:  # issue 30: a mirrored topic is read-only until its cutover
                result["error_code"] = ErrorCode.POLICY_VIOLATION
                result["error_message"] = mirrored_message(info)
                continue
            records = partition["records"]
            if not records:
                result["error_code"] = ErrorCode.INVALID_RECORD
                result["error_message"] = "produce request with no record batch"
                continue
            try:
                validated = validate_batches(records, max_batch_bytes=info.max_message_bytes)
            except (CorruptRecord, RecordTooLarge) as exc:
                result["error_code"] = exc.error_code
                result["error_message"] = str(exc)
                continue
            view = memoryview(records)
            problem = await _schema_problem(ctx, info, view, validated)
            if problem is not None:
                result.update(problem)
                continue
            lightning = lightning_topic(ctx, info)
            if lightning and any(h.is_transactional for _, _, h in validated):
                result["error_code"] = ErrorCode.POLICY_VIOLATION
                result["error_message"] = lightning_txn_message(info)
                continue
            first = len(batches)
            for pos, length, batch_header in validated:
                batches.append(
                    BatchToWrite(
                        info.topic_id, index, view[pos : pos + length], batch_header, lightning
                    )
                )
            slots.append((result, first, len(validated)))

    if batches:  # the Diagnostics page's records per batch, per client id
        PRODUCERS.count(header.client_id, len(batches), sum(b.header.record_count for b in batches))
    if len(batches) > MAX_SEGMENT_BATCHES:
        # A request is one segment and one commit; beyond this the commit is refused.
        return _all_failed(topic_data, ErrorCode.INVALID_REQUEST)
    if batches:
        # After every earlier produce of this connection (agents.arrival_order): an
        # idempotent producer's batches must be committed in the order it sent them.
        turn = TURN.get()
        if turn is not None:
            await turn.wait()
        try:
            await ctx.writer.wait_for_room()
            if ctx.writer.closed:
                # Shutting down: nothing more is written here. NOT_LEADER_OR_FOLLOWER is
                # retriable and sends the client to refresh metadata and try another agent.
                return _all_failed(topic_data, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            # In arrival order (the turn): the journal path's sequence checks.
            batches, slots = _journal_sequence_checks(ctx, batches, slots)
            pending = None
            if batches:
                _PRODUCED_BATCHES.inc(len(batches))
                _PRODUCED_BYTES.inc(sum(len(b.data) for b in batches))
                pending = ctx.writer.append(batches, wait=acks != 0)
        finally:
            if turn is not None:
                turn.release()
    else:
        pending = None
    if acks == 0:
        return None
    if pending is not None:
        committed = await pending
        for result, first, count in slots:
            answers = committed[first : first + count]
            error = next((a["error_code"] for a in answers if a["error_code"]), 0)
            result["error_code"] = error
            if not error:
                result["base_offset"] = answers[0]["base_offset"]
                result["log_start_offset"] = answers[0].get("log_start_offset", -1)
    for topic in responses:
        for result in topic["partition_responses"]:
            _PARTITION_ERRORS.inc(1, error_label(int(result["error_code"])))
    return {"responses": responses, "throttle_time_ms": 0}


def _journal_sequence_checks(
    ctx: AgentContext,
    batches: list[BatchToWrite],
    slots: list[tuple[dict[str, Any], int, int]],
) -> tuple[list[BatchToWrite], list[tuple[dict[str, Any], int, int]]]:
    """The batches and slots left once lightning partitions whose idempotent producer
    skipped sequences (or whose earlier batch the commit refused after it was answered)
    are refused: agents/journal_sequences.py."""
    writer = ctx.writer
    kept: list[BatchToWrite] = []
    kept_slots: list[tuple[dict[str, Any], int, int]] = []
    for result, first, count in slots:
        mine = batches[first : first + count]
        problem: tuple[int, str] | None = None
        for batch in mine:
            if not batch.lightning or batch.header.producer_id < 0:
                continue
            key = (batch.header.producer_id, str(batch.topic_id), batch.partition)
            refused = writer.refused_after_ack.pop(key, None)
            if refused is not None:
                problem = (
                    refused,
                    "an earlier batch of this producer, acknowledged from the journal, was "
                    "refused when it was sequenced (error "
                    f"{error_label(refused)}): its records were not written",
                )
                break
            gap = writer.sequences.gap(str(batch.topic_id), batch.partition, batch.header)
            if gap is not None:
                problem = (ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, gap)
                break
        if problem is not None:
            result["error_code"], result["error_message"] = problem
            continue
        for batch in mine:
            if batch.lightning:
                writer.sequences.answered(str(batch.topic_id), batch.partition, batch.header)
        kept_slots.append((result, len(kept), count))
        kept.extend(mine)
    return kept, kept_slots


async def _schema_problem(
    ctx: AgentContext,
    info: TopicInfo,
    view: memoryview,
    validated: list[tuple[int, int, BatchHeader]],
) -> dict[str, Any] | None:
    """The partition's refusal when its topic validates schemas and a record fails
    (INVALID_RECORD naming the record), or None. Nothing of a refused batch is written."""
    parts = validated_fields(info.configs)
    if not parts or ctx.schema_validator is None:
        return None
    batches = [view[pos : pos + length] for pos, length, _ in validated]
    try:
        problem = await ctx.schema_validator.problem(info.name, info.configs, parts, batches)
    except ValidationUnavailable as exc:
        message = f"schema validation unavailable: {exc}"
        return {"error_code": ErrorCode.REQUEST_TIMED_OUT, "error_message": message}
    if problem is None:
        return None
    index, message = problem
    return {
        "error_code": ErrorCode.INVALID_RECORD,
        "error_message": message,
        "record_errors": [{"batch_index": index, "batch_index_error_message": message}],
    }


def _all_failed(
    topic_data: list[dict[str, Any]], error: int, message: str | None = None
) -> dict[str, Any]:
    return {
        "responses": [
            {
                "name": topic.get("name"),
                "topic_id": topic.get("topic_id"),
                "partition_responses": [
                    _partition_result(p["index"], error, message) for p in topic["partition_data"]
                ],
            }
            for topic in topic_data
        ],
        "throttle_time_ms": 0,
    }
