"""CreateTopics, DeleteTopics and CreatePartitions: passed to the control plane's topic
calls, with this agent's topic cache invalidated for what changed."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from agents.context import REPORTED_REPLICATION_FACTOR, AgentContext
from agents.topics import topic_from_json
from core.kafka import RequestHeader
from core.kafka.errors import ErrorCode
from core.kafka.types import ZERO_UUID


def _assigned_partitions(topic: dict[str, Any]) -> tuple[int, int, str | None]:
    """A CreateTopics entry's (partition count, replication factor, error message). With
    replica assignments, Kafka's checks: the counts left at -1, partitions 0..n-1, each
    with the same number of distinct broker ids. Placement itself means nothing here (no
    broker owns a partition), as the replication factor means nothing: the count is kept,
    the brokers ignored."""
    assignments = topic.get("assignments") or []
    if not assignments:
        return topic["num_partitions"], topic["replication_factor"], None
    if topic["num_partitions"] != -1 or topic["replication_factor"] != -1:
        return 0, 0, "both a partition count or replication factor and replica assignments were set"
    if sorted(a["partition_index"] for a in assignments) != list(range(len(assignments))):
        return 0, 0, "replica assignments must name partitions 0 to n-1, each once"
    sizes = {len(a["broker_ids"]) for a in assignments}
    if (
        len(sizes) != 1
        or 0 in sizes
        or any(len(set(a["broker_ids"])) != len(a["broker_ids"]) for a in assignments)
        or any(b < 0 for a in assignments for b in a["broker_ids"])
    ):
        return 0, 0, "each partition needs the same number of distinct, non-negative broker ids"
    return len(assignments), -1, None


async def handle_create_topics(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka CreateTopics. Replica assignments are checked as Kafka checks them and give
    the partition count; where they place replicas means nothing here."""
    requests = []
    early: dict[int, tuple[int, str]] = {}
    for position, topic in enumerate(body["topics"]):
        partitions, replication, problem = _assigned_partitions(topic)
        if problem is not None:
            invalid = topic["num_partitions"] != -1 or topic["replication_factor"] != -1
            error = ErrorCode.INVALID_REQUEST if invalid else ErrorCode.INVALID_REPLICA_ASSIGNMENT
            early[position] = (error, problem)
            continue
        requests.append(
            {
                "name": topic["name"],
                "num_partitions": partitions,
                "replication_factor": replication,
                "configs": {c["name"]: c["value"] for c in topic.get("configs") or []},
            }
        )
    answers: Iterator[dict[str, Any]] = iter([])
    if requests:
        answer = await ctx.client.call(
            "topics/create",
            {"topics": requests, "validate_only": bool(body.get("validate_only", False))},
        )
        answers = iter(answer["topics"])
    created = []
    results = []
    for position, topic in enumerate(body["topics"]):
        if position in early:
            code, message = early[position]
            results.append(_create_result(topic["name"], code, message))
            continue
        item = next(answers)
        result = _create_result(item["name"], item["error_code"], item.get("error_message"))
        if not item["error_code"]:
            result["topic_id"] = uuid.UUID(item["topic_id"]) if item.get("topic_id") else ZERO_UUID
            result["num_partitions"] = item["num_partitions"]
            result["replication_factor"] = REPORTED_REPLICATION_FACTOR
            result["configs"] = [
                {
                    "name": c["name"],
                    "value": None if c["value"] is None else str(c["value"]),
                    "read_only": False,
                    "config_source": 5 if c.get("is_default") else 1,  # DEFAULT / DYNAMIC_TOPIC
                    "is_sensitive": False,
                }
                for c in _config_entries(item.get("configs"))
            ]
            if item.get("topic_id") and not body.get("validate_only"):
                overrides = {
                    c["name"]: c["value"]
                    for c in _config_entries(item.get("configs"))
                    if not c.get("is_default")
                }
                created.append(
                    topic_from_json(
                        {
                            "name": item["name"],
                            "topic_id": item["topic_id"],
                            "partitions": item["num_partitions"],
                            "configs": overrides,
                        }
                    )
                )
        results.append(result)
    ctx.topics.invalidate(names=[t["name"] for t in body["topics"]])
    ctx.topics.store(created)
    return {"throttle_time_ms": 0, "topics": results}


def _config_entries(configs: Any) -> list[dict[str, Any]]:
    """Configs as [{name, value, is_default}]; the control plane answers topics/create
    with that list, topics/list with a {name: value} dict of overrides."""
    if isinstance(configs, dict):
        return [{"name": k, "value": v, "is_default": False} for k, v in sorted(configs.items())]
    return list(configs or [])


def _create_result(name: str, error: int, message: str | None) -> dict[str, Any]:
    return {
        "name": name,
        "topic_id": ZERO_UUID,
        "error_code": error,
        "error_message": message,
        "topic_config_error_code": 0,
        "num_partitions": -1,
        "replication_factor": -1,
        "configs": [],
    }


async def handle_delete_topics(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka DeleteTopics: by name (v0–5 `topic_names`, v6+ `topics`) or by id (v6+)."""
    if header.api_version >= 6:
        names = [t["name"] for t in body["topics"] if t.get("name")]
        ids = [str(t["topic_id"]) for t in body["topics"] if not t.get("name")]
    else:
        names, ids = list(body["topic_names"]), []
    results = []
    if names:
        results += (await ctx.client.call("topics/delete", {"names": names}))["topics"]
    if ids:
        results += (await ctx.client.call("topics/delete", {"topic_ids": ids}))["topics"]
    ctx.topics.invalidate(
        names=[r["name"] for r in results if r.get("name")],
        topic_ids=[uuid.UUID(r["topic_id"]) for r in results if r.get("topic_id")],
    )
    return {
        "throttle_time_ms": 0,
        "responses": [
            {
                "name": r.get("name"),
                "topic_id": uuid.UUID(r["topic_id"]) if r.get("topic_id") else ZERO_UUID,
                "error_code": r["error_code"],
                "error_message": r.get("error_message"),
            }
            for r in results
        ],
    }


async def handle_create_partitions(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka CreatePartitions: raise a topic's partition count (`count` is the new total)."""
    answer = await ctx.client.call(
        "topics/create-partitions",
        {
            "topics": [{"name": t["name"], "count": t["count"]} for t in body["topics"]],
            "validate_only": bool(body.get("validate_only", False)),
        },
    )
    ctx.topics.invalidate(names=[t["name"] for t in body["topics"]])
    return {
        "throttle_time_ms": 0,
        "results": [
            {
                "name": r["name"],
                "error_code": r["error_code"],
                "error_message": r.get("error_message"),
            }
            for r in answer["topics"]
        ],
    }
