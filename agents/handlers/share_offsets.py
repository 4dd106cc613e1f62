"""A share group's start offsets for admin clients (KIP-932): DescribeShareGroupOffsets
(v1: KIP-1226's lag), AlterShareGroupOffsets, DeleteShareGroupOffsets.

The offsets are the store's (`metadata_store.share_offsets`): each request is one
`share/offsets/*` call, so any agent answers it. Authorization is the ACL layer's
(agents/security/authorization.py): DESCRIBE, READ or DELETE on the group, DESCRIBE or
READ on each topic, as Kafka's KafkaApis.
"""

from __future__ import annotations

import uuid
from typing import Any

from agents.context import AgentContext
from agents.handlers.errors import error_response
from core.kafka import RequestHeader
from core.kafka.errors import ErrorCode

_EMPTY_ID = "The group id is invalid."


def _uuids(topics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for topic in topics:
        topic["topic_id"] = uuid.UUID(topic["topic_id"])
    return topics


async def handle_describe_share_group_offsets(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Each group's start offsets (and lag): of the named partitions, or with topics
    null of every partition the group has read."""
    asked = [g for g in body["groups"] if g["group_id"]]
    answer: dict[str, Any] = {"groups": []}
    if asked:
        answer = await ctx.client.call(
            "share/offsets/describe",
            {"groups": [{"group_id": g["group_id"], "topics": g.get("topics")} for g in asked]},
        )
    found = iter(answer["groups"])
    groups = []
    for group in body["groups"]:
        if not group["group_id"]:
            groups.append(_describe_error(group, ErrorCode.INVALID_GROUP_ID, _EMPTY_ID))
            continue
        item = next(found)
        for topic in _uuids(item["topics"]):
            for part in topic["partitions"]:
                part["leader_epoch"] = 0
        groups.append(item)
    return {"throttle_time_ms": 0, "groups": groups}


def _describe_error(group: dict[str, Any], error: int, message: str | None) -> dict[str, Any]:
    return {
        "group_id": group["group_id"],
        "topics": [],
        "error_code": int(error),
        "error_message": message,
    }


async def handle_alter_share_group_offsets(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any] | None:
    """Start the named partitions over at the given offsets; the group must be empty."""
    if not body["group_id"]:
        return error_response(header, body, ErrorCode.INVALID_GROUP_ID, _EMPTY_ID)
    answer = await ctx.client.call(
        "share/offsets/alter",
        {
            "group_id": body["group_id"],
            "topics": [
                {"topic_name": t["topic_name"], "partitions": t["partitions"]}
                for t in body["topics"]
            ],
        },
    )
    if answer["error_code"]:
        return error_response(header, body, answer["error_code"], answer["error_message"])
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "responses": _uuids(answer["responses"]),
    }


async def handle_delete_share_group_offsets(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any] | None:
    """Forget the group's state of the named topics; the group must be empty."""
    if not body["group_id"]:
        return error_response(header, body, ErrorCode.INVALID_GROUP_ID, _EMPTY_ID)
    answer = await ctx.client.call(
        "share/offsets/delete",
        {"group_id": body["group_id"], "topics": [t["topic_name"] for t in body["topics"]]},
    )
    return {
        "throttle_time_ms": 0,
        "error_code": answer["error_code"],
        "error_message": answer["error_message"],
        "responses": _uuids(answer["responses"]),
    }
