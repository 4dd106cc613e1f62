"""OffsetCommit, OffsetFetch and OffsetDelete: committed offsets live in the metadata
store (agent API `offsets/commit`, `offsets/fetch`, `offsets/delete`), so they survive
any agent. The group's coordinator checks generations and members in its memory, then
the store checks them again — with the coordinator's lease epoch — in the transaction
that stores the offsets, so a fenced coordinator or a stale generation never writes."""

from __future__ import annotations

from typing import Any

from agents.context import AgentContext
from agents.control_plane import ControlPlaneError
from agents.groups.state import GroupState
from core.kafka import RequestHeader
from core.kafka.consumer_protocol import PROTOCOL_TYPE
from core.kafka.errors import ErrorCode
from core.offset_metadata import metadata_fields, metadata_text

# Kafka's offset.metadata.max.bytes.
MAX_OFFSET_METADATA_BYTES = 4096


# -- OffsetCommit --------------------------------------------------------------------------


def _commit_answer(
    topics: list[dict[str, Any]], errors: dict[tuple[str, int], int]
) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": t["name"],
                "partitions": [
                    {
                        "partition_index": p["partition_index"],
                        "error_code": int(errors.get((t["name"], p["partition_index"]), 0)),
                    }
                    for p in t["partitions"]
                ],
            }
            for t in topics
        ],
    }


def _everywhere(topics: list[dict[str, Any]], error: int) -> dict[tuple[str, int], int]:
    return {(t["name"], p["partition_index"]): error for t in topics for p in t["partitions"]}


async def handle_offset_commit(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka OffsetCommit v0–8: a member of the current generation, or anyone while the
    group is Empty and the commit carries no generation (assign() consumers, admins)."""
    group_id, topics = body["group_id"], body["topics"]
    if not await ctx.groups.owns(group_id):
        return _commit_answer(topics, _everywhere(topics, ErrorCode.NOT_COORDINATOR))
    async with ctx.groups.commits_in_order(group_id):
        error = ctx.groups.validate_commit(
            group_id,
            body.get("member_id") or "",
            body.get("group_instance_id"),
            body.get("generation_id_or_member_epoch", -1),
        )
        if error is not None:
            return _commit_answer(topics, _everywhere(topics, error))
        errors: dict[tuple[str, int], int] = {}
        offsets = []
        for topic in topics:
            for p in topic["partitions"]:
                key = (topic["name"], p["partition_index"])
                metadata = p.get("committed_metadata")
                if metadata is not None and len(metadata.encode()) > MAX_OFFSET_METADATA_BYTES:
                    errors[key] = ErrorCode.OFFSET_METADATA_TOO_LARGE
                    continue
                offsets.append(
                    {
                        "topic": key[0],
                        "partition": key[1],
                        "offset": p["committed_offset"],
                        "leader_epoch": p.get("committed_leader_epoch", -1),
                        **metadata_fields(metadata),
                    }
                )
        if offsets:
            await ctx.groups.settled(group_id)  # the generation it checks is saved
            epoch = ctx.groups.leases.epoch(group_id)
            if epoch is None:
                return _commit_answer(topics, _everywhere(topics, ErrorCode.NOT_COORDINATOR))
            if ctx.config.ripcord and (
                not ctx.client.link.up or ctx.groups.leases.resuming(group_id)
            ):
                # Ripcord: the commit cannot be stored now. A retriable error that keeps
                # the client on this coordinator (NOT_COORDINATOR or
                # COORDINATOR_NOT_AVAILABLE would send it looking for another): it keeps
                # its offsets and commits them again, and they are stored once the
                # control plane is back and the lease resumed (before, the store would
                # refuse the lease's epoch) — nothing lost, the members kept.
                return _commit_answer(
                    topics, _everywhere(topics, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
                )
            fence = {
                "agent_id": ctx.groups.leases.agent_id,
                "epoch": epoch,
                "generation": body.get("generation_id_or_member_epoch", -1),
                "member_id": body.get("member_id") or "",
                "group_instance_id": body.get("group_instance_id"),
            }
            try:
                answer = await ctx.client.call(
                    "offsets/commit", {"group_id": group_id, "offsets": offsets, **fence}
                )
            except ControlPlaneError as exc:
                # Retriable: the client commits again (to us or the next coordinator) —
                # unless the control plane refused the request itself: then trying again
                # cannot help, and the client is told so once.
                code = (
                    ErrorCode.INVALID_REQUEST
                    if not exc.retriable
                    else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
                    if ctx.config.ripcord
                    else ErrorCode.COORDINATOR_NOT_AVAILABLE
                )
                for o in offsets:
                    errors[(o["topic"], o["partition"])] = code
            else:
                for item in answer["offsets"]:
                    if item["error_code"]:
                        errors[(item["topic"], item["partition"])] = item["error_code"]
                if ErrorCode.NOT_COORDINATOR in errors.values():
                    ctx.groups.lease_refused(group_id)
        return _commit_answer(topics, errors)


# -- OffsetFetch ---------------------------------------------------------------------------


def _partition_entry(index: int, found: dict[str, Any] | None, error: int = 0) -> dict[str, Any]:
    return {
        "partition_index": index,
        "committed_offset": found["offset"] if found else -1,
        "committed_leader_epoch": found.get("leader_epoch", -1) if found else -1,
        "metadata": metadata_text(found) if found else "",
        "error_code": int(found.get("error_code", 0) if found else error),
    }


async def _fetch_group(
    ctx: AgentContext,
    group_id: str,
    topics: list[dict[str, Any]] | None,
    name_field: str,
    require_stable: bool = False,
) -> tuple[int, list[dict[str, Any]]]:
    """(group error, topics) for one group of an OffsetFetch request."""
    if not await ctx.groups.owns(group_id):
        return ErrorCode.NOT_COORDINATOR, []
    partitions = (
        None
        if topics is None
        else [
            {"topic": t[name_field], "partition": p} for t in topics for p in t["partition_indexes"]
        ]
    )
    try:
        query: dict[str, Any] = {"group_id": group_id, "partitions": partitions}
        if require_stable:  # KIP-447: not while a transaction holds offsets of the group
            query["require_stable"] = True
        answer = await ctx.client.call("offsets/fetch", query)
    except ControlPlaneError:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
    found = {(o["topic"], o["partition"]): o for o in answer["offsets"]}
    if topics is None:  # everything the group committed
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), o in found.items():
            by_topic.setdefault(topic, []).append(_partition_entry(partition, o))
        return 0, [{"name": name, "partitions": parts} for name, parts in by_topic.items()]
    return 0, [
        {
            "name": t[name_field],
            "partitions": [
                _partition_entry(p, found.get((t[name_field], p))) for p in t["partition_indexes"]
            ],
        }
        for t in topics
    ]


async def handle_offset_fetch(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka OffsetFetch v0–8: v2+ null topics = everything committed; v8 several groups
    (KIP-709). Uncommitted partitions answer offset -1."""
    version = header.api_version
    if version >= 8:
        groups = []
        for requested in body["groups"]:
            error, topics = await _fetch_group(
                ctx,
                requested["group_id"],
                requested["topics"],
                "name",
                body.get("require_stable", False),
            )
            groups.append(
                {"group_id": requested["group_id"], "topics": topics, "error_code": error}
            )
        return {"throttle_time_ms": 0, "groups": groups}
    requested_topics = body["topics"]
    error, topics = await _fetch_group(
        ctx, body["group_id"], requested_topics, "name", body.get("require_stable", False)
    )
    if error and version < 2 and requested_topics:
        # v0–1 have no top-level error: put it on every partition asked for.
        topics = [
            {
                "name": t["name"],
                "partitions": [_partition_entry(p, None, error) for p in t["partition_indexes"]],
            }
            for t in requested_topics
        ]
    return {"throttle_time_ms": 0, "topics": topics, "error_code": error}


# -- OffsetDelete --------------------------------------------------------------------------


async def handle_offset_delete(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka OffsetDelete (KIP-496): not for topics a live consumer group subscribes to."""
    group_id, topics = body["group_id"], body["topics"]

    def answer(error: int, errors: dict[tuple[str, int], int] | None = None) -> dict[str, Any]:
        return {
            "error_code": int(error),
            "throttle_time_ms": 0,
            "topics": []
            if errors is None
            else [
                {
                    "name": t["name"],
                    "partitions": [
                        {
                            "partition_index": p["partition_index"],
                            "error_code": int(errors.get((t["name"], p["partition_index"]), 0)),
                        }
                        for p in t["partitions"]
                    ],
                }
                for t in topics
            ],
        }

    if not await ctx.groups.owns(group_id):
        return answer(ErrorCode.NOT_COORDINATOR)
    group = ctx.groups.groups.get(group_id)
    subscribed: set[str] = set()
    consumer = ctx.groups.consumer.groups.get(group_id)
    if consumer is not None and consumer.members:  # KIP-848: the broker knows the topics
        subscribed = consumer.subscribed_names()
    elif group is not None and not group.is_(GroupState.EMPTY, GroupState.DEAD):
        topics_of_group = group.subscribed_topics()
        if group.protocol_type != PROTOCOL_TYPE or topics_of_group is None:
            return answer(ErrorCode.NON_EMPTY_GROUP)
        subscribed = topics_of_group
    errors: dict[tuple[str, int], int] = {}
    to_delete = []
    for topic in topics:
        for p in topic["partitions"]:
            key = (topic["name"], p["partition_index"])
            if topic["name"] in subscribed:
                errors[key] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                to_delete.append({"topic": key[0], "partition": key[1]})
    try:
        result = await ctx.client.call(
            "offsets/delete", {"group_id": group_id, "partitions": to_delete}
        )
    except ControlPlaneError:
        return answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if group is None and consumer is None and not result["group_exists"]:
        return answer(ErrorCode.GROUP_ID_NOT_FOUND)
    for item in result["partitions"]:
        if item["error_code"]:
            errors[(item["topic"], item["partition"])] = item["error_code"]
    return answer(0, errors)
