"""Metadata, DescribeCluster and InitProducerId.

Every agent tells its clients that it alone is the cluster: the only broker, the
controller, and the leader (epoch 0) of every partition. Any agent can serve any
partition, so there is nothing to route.
"""

from __future__ import annotations

from typing import Any

from agents.context import AgentContext
from agents.topics import TopicInfo
from core.kafka.errors import ErrorCode
from core.kafka.types import ZERO_UUID

_OPERATIONS_OMITTED = -(2**31)  # "authorized operations not requested" (KIP-430)
_LEADER_EPOCH = 0


def _topic_entry(ctx: AgentContext, topic: TopicInfo) -> dict[str, Any]:
    node = ctx.node_id
    return {
        "error_code": 0,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": False,
        "partitions": [
            {
                "error_code": 0,
                "partition_index": index,
                "leader_id": node,
                "leader_epoch": _LEADER_EPOCH,
                "replica_nodes": [node],
                "isr_nodes": [node],
                "offline_replicas": [],
            }
            for index in range(topic.partitions)
        ],
        "topic_authorized_operations": _OPERATIONS_OMITTED,
    }


def _error_entry(name: str | None, topic_id: Any, error: int) -> dict[str, Any]:
    return {
        "error_code": error,
        "name": name,
        "topic_id": topic_id,
        "is_internal": False,
        "partitions": [],
        "topic_authorized_operations": _OPERATIONS_OMITTED,
    }


async def _auto_create(
    ctx: AgentContext, names: list[str]
) -> dict[str, tuple[TopicInfo | None, int]]:
    answer = await ctx.client.call(
        "topics/create",
        {
            "topics": [
                {"name": n, "num_partitions": -1, "replication_factor": -1, "configs": {}}
                for n in names
            ],
            "validate_only": False,
        },
    )
    errors = {
        item["name"]: item["error_code"]
        for item in answer["topics"]
        if item["error_code"] not in (0, ErrorCode.TOPIC_ALREADY_EXISTS)
    }
    # Created, or created meanwhile by someone else: read them back as topics/list has
    # them (the create answer lists every effective config; the cache keeps overrides).
    present = [n for n in names if n not in errors]
    ctx.topics.invalidate(names=present)
    found = await ctx.topics.by_names(present) if present else {}
    created: dict[str, tuple[TopicInfo | None, int]] = {
        name: (None, error) for name, error in errors.items()
    }
    for name in present:
        topic = found.get(name)
        created[name] = (topic, 0 if topic else ErrorCode.LEADER_NOT_AVAILABLE)
    return created


async def handle_metadata(ctx: AgentContext, header, body: dict[str, Any]) -> dict[str, Any]:
    """Kafka Metadata: this agent as the only broker; topics auto-created when both the
    request and the cluster config allow it."""
    requested = body.get("topics")
    if requested is None or (header.api_version == 0 and not requested):
        entries = [_topic_entry(ctx, t) for t in await ctx.topics.all_topics()]
    else:
        names = [t["name"] for t in requested if t.get("name")]
        ids = [t["topic_id"] for t in requested if not t.get("name") and t.get("topic_id")]
        by_name = await ctx.topics.by_names(names) if names else {}
        by_id = await ctx.topics.by_ids(ids) if ids else {}
        missing = [n for n in dict.fromkeys(names) if by_name.get(n) is None]
        created: dict[str, tuple[TopicInfo | None, int]] = {}
        if missing and body.get("allow_auto_topic_creation", True) and ctx.auto_create_topics:
            created = await _auto_create(ctx, missing)
        entries = []
        for request in requested:
            name = request.get("name")
            if name:
                topic = by_name.get(name)
                error = 0
                if topic is None:
                    topic, error = created.get(name, (None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                entries.append(
                    _topic_entry(ctx, topic) if topic else _error_entry(name, ZERO_UUID, error)
                )
            else:
                topic_id = request.get("topic_id")
                topic = by_id.get(topic_id)
                entries.append(
                    _topic_entry(ctx, topic)
                    if topic
                    else _error_entry(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID)
                )
    return {
        "throttle_time_ms": 0,
        "brokers": ctx.brokers(),
        "cluster_id": ctx.cluster_id,
        "controller_id": ctx.node_id,
        "topics": entries,
        "cluster_authorized_operations": _OPERATIONS_OMITTED,
    }


async def handle_describe_cluster(
    ctx: AgentContext, header, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka DescribeCluster (KIP-700): this agent as the only broker and the controller."""
    answer: dict[str, Any] = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "endpoint_type": body.get("endpoint_type", 1),
        "cluster_id": ctx.cluster_id,
        "controller_id": ctx.node_id,
        "brokers": [
            {
                "broker_id": ctx.node_id,
                "host": ctx.host,
                "port": ctx.port,
                "rack": None,
                "is_fenced": False,
            }
        ],
        "cluster_authorized_operations": _OPERATIONS_OMITTED,
    }
    if body.get("endpoint_type", 1) != 1:  # KIP-919: controllers are not reachable here
        answer.update(
            error_code=ErrorCode.MISMATCHED_ENDPOINT_TYPE,
            error_message="Floe agents serve broker endpoints only",
            brokers=[],
        )
    return answer


async def handle_init_producer_id(
    ctx: AgentContext, header, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka InitProducerId: producer ids and epochs come from the control plane."""
    answer = await ctx.client.call(
        "init-producer-id",
        {
            "transactional_id": body.get("transactional_id"),
            "transaction_timeout_ms": body.get("transaction_timeout_ms", 60000),
            "producer_id": body.get("producer_id", -1),
            "producer_epoch": body.get("producer_epoch", -1),
        },
    )
    return {
        "throttle_time_ms": 0,
        "error_code": answer["error_code"],
        "producer_id": answer.get("producer_id", -1),
        "producer_epoch": answer.get("producer_epoch", -1),
    }
