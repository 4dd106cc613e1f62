"""ListOffsets, OffsetForLeaderEpoch and DeleteRecords: partition offsets, answered by the
control plane's `list-offsets` and `delete-records` calls (one call per request).

By timestamp (and for the max timestamp) the control plane can only name the partition
run holding the answer — it never sees records — so the agent reads that run and
narrows the answer to the exact record, as Kafka does: the first record whose timestamp
is at or after the target (KIP-79), or the first record carrying the largest timestamp
(KIP-734).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from agents.context import AgentContext
from agents.topics import TopicInfo
from core.kafka import RequestHeader
from core.kafka.errors import ErrorCode
from core.kafka.records import decode_records
from core.segment import run_batches

log = logging.getLogger(__name__)

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
# KIP-405 tiered storage specs; Floe has one tier, so they mean earliest / latest.
EARLIEST_LOCAL, LATEST_TIERED = -4, -5
_TIMESTAMP_ALIASES = {EARLIEST_LOCAL: EARLIEST, LATEST_TIERED: LATEST}
_LEADER_EPOCH = 0
# Ripcord answers ListOffsets from watermarks however old once the link has been down
# this long (agents.control_plane_link: a slow answer takes it down for a moment).
STALE_OFFSETS_AFTER_S = 2.0


async def _resolve(
    ctx: AgentContext,
    topics: list[dict[str, Any]],
    name_field: str,
    partitions_field: str,
    index_field: str,
) -> list[tuple[dict[str, Any], TopicInfo | None, int]]:
    """(request partition, topic or None, error) for every partition of the request."""
    names = {t[name_field] for t in topics}
    found = await ctx.topics.by_names(
        names,
        need_partition={
            t[name_field]: max((p[index_field] for p in t[partitions_field]), default=-1)
            for t in topics
        },
    )
    resolved = []
    for topic in topics:
        info = found.get(topic[name_field])
        for partition in topic[partitions_field]:
            ok = info is not None and 0 <= partition[index_field] < info.partitions
            error = 0 if ok else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            resolved.append((partition, info if ok else None, error))
    return resolved


async def _per_partition(
    ctx: AgentContext,
    topics: list[dict[str, Any]],
    *,
    name_field: str,
    index_field: str,
    call: str,
    query_for: Callable[[dict[str, Any], TopicInfo], dict[str, Any]],
    entry_for: Callable[[dict[str, Any], int, dict[str, Any] | None], dict[str, Any]],
    known: Callable[[dict[str, Any], TopicInfo], dict[str, Any] | None] | None = None,
) -> dict[str, Any]:
    """Resolve every partition, make ONE control-plane ``call`` for the known ones, and
    answer per topic in request order. ``entry_for(request, error, answer)`` builds a
    partition's entry; ``answer`` is None for a partition that was never asked about.
    ``known(request, topic)``, when given, may answer a partition from what the agent
    already knows, without asking."""
    resolved = await _resolve(ctx, topics, name_field, "partitions", index_field)
    local: list[dict[str, Any] | None] = [
        known(p, info) if known is not None and info is not None else None
        for p, info, _ in resolved
    ]
    query = [
        query_for(p, info)
        for (p, info, _), answer in zip(resolved, local, strict=True)
        if info is not None and answer is None
    ]
    asked = iter(await ctx.coalesced(call).ask(query) if query else ())
    results = iter(zip(resolved, local, strict=True))
    out_topics = []
    for topic in topics:
        partitions = []
        for _ in topic["partitions"]:
            (request, info, error), answer = next(results)
            if info is not None and answer is None:
                answer = next(asked)
                if call == "list-offsets" and not answer["error_code"]:
                    _learn(ctx, info, request, index_field, answer)
            partitions.append(entry_for(request, error, answer))
        out_topics.append({name_field: topic[name_field], "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": out_topics}


def _learn(
    ctx: AgentContext,
    info: TopicInfo,
    request: dict[str, Any],
    index_field: str,
    answer: dict[str, Any],
) -> None:
    """Keep the partition's watermarks that came with an answer (``partition_offsets``)."""
    if "high_watermark" in answer:
        ctx.offsets.learn(
            info.topic_id_str,
            request[index_field],
            high_watermark=answer["high_watermark"],
            log_start=answer["log_start_offset"],
            last_stable=answer.get("last_stable_offset", -1),
        )


def _known_offset(
    ctx: AgentContext,
    request: dict[str, Any],
    info: TopicInfo,
    index_field: str,
    read_committed: bool = False,
) -> dict[str, Any] | None:
    """A latest or earliest answer from what the agent learned in the last moment
    (read_committed's latest: the last stable offset); while Ripcord answers for a
    control plane that is away, from what it learned at any time."""
    timestamp = _TIMESTAMP_ALIASES.get(request.get("timestamp", LATEST), request.get("timestamp"))
    if "timestamp" in request and timestamp not in (LATEST, EARLIEST):
        return None
    # Ripcord, the control plane away: nothing is committed meanwhile that it could tell
    # us of, so what this agent last learned answers, however old — once it has been
    # away a while: a slow answer takes the link down for a moment too, and meanwhile
    # other agents commit.
    any_age = ctx.ripcord_active and ctx.client.link.down_for_s >= STALE_OFFSETS_AFTER_S
    known = ctx.offsets.fresh(info.topic_id_str, request[index_field], any_age=any_age)
    if known is None:
        return None
    if timestamp == EARLIEST:
        offset = known[1]
    elif read_committed:
        stable = ctx.offsets.fresh_stable(info.topic_id_str, request[index_field], any_age=any_age)
        if stable is None:
            return None
        offset = stable
    else:
        offset = known[0]
    return {"error_code": 0, "offset": offset, "timestamp": -1}


async def handle_list_offsets(
    ctx: AgentContext, header: RequestHeader | None, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka ListOffsets v1+: earliest (-2), latest (-1), max timestamp (-3) or by time."""

    read_committed = body.get("isolation_level", 0) == 1

    def query_for(p: dict[str, Any], info: TopicInfo) -> dict[str, Any]:
        timestamp = _TIMESTAMP_ALIASES.get(p["timestamp"], p["timestamp"])
        query = {
            "topic_id": info.topic_id_str,
            "partition": p["partition_index"],
            "timestamp": timestamp,
        }
        if read_committed:  # KIP-98: latest is the last stable offset
            query["isolation_level"] = 1
        return query

    def entry_for(
        request: dict[str, Any], error: int, answer: dict[str, Any] | None
    ) -> dict[str, Any]:
        entry = {
            "partition_index": request["partition_index"],
            "error_code": error,
            "timestamp": -1,
            "offset": -1,
            "leader_epoch": -1,
            "old_style_offsets": [],
        }
        if answer is not None:
            entry["error_code"] = answer["error_code"]
            entry["offset"] = answer["offset"]
            entry["timestamp"] = answer.get("timestamp", -1)
            if answer["offset"] >= 0 and not answer["error_code"]:
                entry["leader_epoch"] = _LEADER_EPOCH
                entry["old_style_offsets"] = [answer["offset"]]
            if answer.get("batch") and not answer["error_code"]:
                narrowing.append((entry, answer, request["timestamp"]))
        return entry

    narrowing: list[tuple[dict[str, Any], dict[str, Any], int]] = []
    response = await _per_partition(
        ctx,
        body["topics"],
        name_field="name",
        index_field="partition_index",
        call="list-offsets",
        query_for=query_for,
        entry_for=entry_for,
        known=lambda p, info: _known_offset(ctx, p, info, "partition_index", read_committed),
    )
    for entry, answer, target in narrowing:
        found = await _exact_record(ctx, answer, target)
        if found is not None:
            entry["offset"], entry["timestamp"] = found
            entry["old_style_offsets"] = [found[0]]
    return response


async def _exact_record(
    ctx: AgentContext, answer: dict[str, Any], target: int
) -> tuple[int, int] | None:
    """(offset, timestamp) of the record the answer's run holds for `target`: the first
    at or after it, or for MAX_TIMESTAMP the first with the run's largest timestamp.
    Records below the log start offset do not count. None if the run cannot be read (the
    control plane's batch-level answer stands)."""
    run = answer["batch"]
    log_start = answer["offset"]  # the control plane gives at least the log start offset
    wanted = answer["timestamp"] if target == MAX_TIMESTAMP else target
    try:
        views = await ctx.cache.read(run["file_key"], run["pos"], run["len"])
        data = views[0] if len(views) == 1 else memoryview(b"".join(views))
        for batch in run_batches(
            data,
            base_offset=run["base_offset"],
            last_offset=run["last_offset"],
            rewrite=run.get("rewrite", True),
        ):
            if batch.last_offset < log_start or batch.header.max_timestamp < wanted:
                continue
            header, records = decode_records(data[batch.position : batch.position + batch.length])
            for record in records:
                offset = batch.base_offset + (record.offset - header.base_offset)
                if offset < log_start:
                    continue
                if record.timestamp == wanted or (
                    target != MAX_TIMESTAMP and record.timestamp > wanted
                ):
                    return offset, record.timestamp
    except Exception as exc:  # an unreadable run: keep the batch-level answer
        log.warning("narrowing ListOffsets in %s failed: %s", run.get("file_key"), exc)
    return None


async def handle_offset_for_leader_epoch(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """KIP-320 log truncation check. Floe never truncates and has one leader epoch (0),
    so every epoch ends at the high watermark: a client's position is always valid."""

    def query_for(p: dict[str, Any], info: TopicInfo) -> dict[str, Any]:
        return {"topic_id": info.topic_id_str, "partition": p["partition"], "timestamp": LATEST}

    def entry_for(
        request: dict[str, Any], error: int, answer: dict[str, Any] | None
    ) -> dict[str, Any]:
        entry = {
            "error_code": error,
            "partition": request["partition"],
            "leader_epoch": -1,
            "end_offset": -1,
        }
        if answer is not None:
            entry["error_code"] = answer["error_code"]
            if not answer["error_code"]:
                entry["leader_epoch"] = _LEADER_EPOCH
                entry["end_offset"] = answer["offset"]
        return entry

    return await _per_partition(
        ctx,
        body["topics"],
        name_field="topic",
        index_field="partition",
        call="list-offsets",
        query_for=query_for,
        entry_for=entry_for,
        known=lambda p, info: _known_offset(ctx, p, info, "partition"),
    )


async def handle_delete_records(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka DeleteRecords: move each partition's log start offset forward."""

    def query_for(p: dict[str, Any], info: TopicInfo) -> dict[str, Any]:
        ctx.offsets.forget(info.topic_id_str, p["partition_index"])  # the start moves
        return {
            "topic_id": info.topic_id_str,
            "partition": p["partition_index"],
            "offset": p["offset"],
        }

    def entry_for(
        request: dict[str, Any], error: int, answer: dict[str, Any] | None
    ) -> dict[str, Any]:
        entry = {
            "partition_index": request["partition_index"],
            "low_watermark": -1,
            "error_code": error,
        }
        if answer is not None:
            entry["error_code"] = answer["error_code"]
            entry["low_watermark"] = answer.get("low_watermark", -1)
        return entry

    def known(p: dict[str, Any], info: TopicInfo) -> dict[str, Any] | None:
        # -1 is the high watermark (delete everything); anything lower names no offset
        # (librdkafka sends OFFSET_INVALID, -1001, for a partition left as it is).
        if p["offset"] < -1:
            return {"error_code": ErrorCode.OFFSET_OUT_OF_RANGE, "low_watermark": -1}
        return None

    return await _per_partition(
        ctx,
        body["topics"],
        name_field="name",
        index_field="partition_index",
        call="delete-records",
        query_for=query_for,
        entry_for=entry_for,
        known=known,
    )
