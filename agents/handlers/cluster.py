"""Metadata, DescribeCluster and InitProducerId.

Metadata is zone-aware (`agents.zone_routing`): a client that names its zone in
client.id sees the live agents of that zone as the brokers, the others see every live
agent; each partition's leader is one of those brokers, chosen by a stable hash
weighted away from overloaded agents. Any agent can serve any partition, so a leader
only spreads the load; the rack of a broker is its zone.
"""

from __future__ import annotations

import logging
from typing import Any

from agents.context import AgentContext
from agents.control_plane import ControlPlaneUnavailable
from agents.groups.ring import Peer
from agents.handlers.transactions import fenced_error
from agents.security.access import authorized_operations
from agents.security.session import connection_listener
from agents.topics import TopicInfo
from agents.zone_routing import client_zone, partition_leaders
from core.kafka import RequestHeader
from core.kafka.errors import ErrorCode
from core.kafka.types import ZERO_UUID
from core.security.acl import CLUSTER_NAME, ResourceType

log = logging.getLogger(__name__)

_OPERATIONS_OMITTED = -(2**31)  # "authorized operations not requested" (KIP-430)
_LEADER_EPOCH = 0


def _broker_entry(peer: Peer) -> dict[str, Any]:
    return {
        "node_id": peer.node_id,
        "host": peer.host,
        "port": peer.port,
        "rack": peer.zone or None,
    }


def _topic_entry(
    topic: TopicInfo, brokers: list[Peer], weights: dict[str, float]
) -> dict[str, Any]:
    leaders = partition_leaders(topic.topic_id_str, topic.partitions, brokers, weights)
    return {
        "error_code": 0,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": False,
        "partitions": [
            {
                "error_code": 0,
                "partition_index": index,
                "leader_id": leader.node_id,
                "leader_epoch": _LEADER_EPOCH,
                "replica_nodes": [leader.node_id],
                "isr_nodes": [leader.node_id],
                "offline_replicas": [],
            }
            for index, leader in enumerate(leaders)
        ],
        "topic_authorized_operations": _OPERATIONS_OMITTED,
    }


async def routed_brokers(ctx: AgentContext, header: RequestHeader) -> list[Peer]:
    """The brokers to tell this client about: its zone's live agents (or all of them)
    that serve the kind of listener it came through, at that listener's address,
    having first checked that peers still accept connections (a killed agent stays in
    the control plane's live list for the liveness window)."""
    await ctx.groups.ring.check_all()
    await ctx.groups.ring.check_clients()
    brokers = ctx.zone_peers(client_zone(header.client_id), connection_listener())
    me = ctx.node_id
    return sorted(brokers, key=lambda p: p.node_id != me)  # this agent first, if listed


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


async def handle_metadata(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka Metadata: the client's zone's agents as brokers (`routed_brokers`); topics
    auto-created when both the request and the cluster config allow it.

    While the control plane cannot be reached, the answer comes from what this agent last
    knew (topics it has seen, agents of the last heartbeat), and a topic it never saw is
    LEADER_NOT_AVAILABLE (retriable): clients keep their connections and retry instead of
    reading "all brokers down" while every agent is up.
    """
    brokers = await routed_brokers(ctx, header)
    try:
        entries = await _topic_entries(ctx, body, header.api_version, brokers)
    except ControlPlaneUnavailable as exc:
        log.warning("Metadata: control plane unavailable (%s); answering from the cache", exc)
        entries = _last_known_entries(ctx, body, header.api_version, brokers)
    if body.get("include_topic_authorized_operations"):
        named = [e["name"] for e in entries if not e["error_code"] and e["name"]]
        allowed = await authorized_operations(ctx, ResourceType.TOPIC, named)
        for entry in entries:
            if entry["name"] in allowed and not entry["error_code"]:
                entry["topic_authorized_operations"] = allowed[entry["name"]]
    return {
        "throttle_time_ms": 0,
        "brokers": [_broker_entry(p) for p in brokers],
        "cluster_id": ctx.cluster_id,
        "controller_id": brokers[0].node_id,
        "topics": entries,
        "cluster_authorized_operations": await _cluster_operations(
            ctx, body.get("include_cluster_authorized_operations")
        ),
    }


async def _cluster_operations(ctx: AgentContext, asked: bool | None) -> int:
    """The cluster's authorized-operations bit field, when the client asked for it."""
    if not asked:
        return _OPERATIONS_OMITTED
    allowed = await authorized_operations(ctx, ResourceType.CLUSTER, [CLUSTER_NAME])
    return allowed[CLUSTER_NAME]


def _lists_all(body: dict[str, Any], api_version: int) -> bool:
    requested = body.get("topics")
    return requested is None or (api_version == 0 and not requested)


async def _topic_entries(
    ctx: AgentContext, body: dict[str, Any], api_version: int, brokers: list[Peer]
) -> list[dict[str, Any]]:
    weights = ctx.leader_weights.weights
    if _lists_all(body, api_version):
        return [_topic_entry(t, brokers, weights) for t in await ctx.topics.all_topics()]
    requested = body["topics"]
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
                _topic_entry(topic, brokers, weights)
                if topic
                else _error_entry(name, ZERO_UUID, error)
            )
        else:
            topic_id = request.get("topic_id")
            topic = by_id.get(topic_id)
            entries.append(
                _topic_entry(topic, brokers, weights)
                if topic
                else _error_entry(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID)
            )
    return entries


def _last_known_entries(
    ctx: AgentContext, body: dict[str, Any], api_version: int, brokers: list[Peer]
) -> list[dict[str, Any]]:
    """Topic entries from the topic cache, fresh or not, without calling anyone."""
    weights = ctx.leader_weights.weights
    if _lists_all(body, api_version):
        return [_topic_entry(t, brokers, weights) for t in ctx.topics.last_known_all()]
    entries = []
    for request in body["topics"]:
        name = request.get("name")
        topic = ctx.topics.last_known(name=name, topic_id=None if name else request.get("topic_id"))
        if topic is not None:
            entries.append(_topic_entry(topic, brokers, weights))
        else:
            entries.append(
                _error_entry(
                    name,
                    ZERO_UUID if name else request.get("topic_id"),
                    ErrorCode.LEADER_NOT_AVAILABLE,
                )
            )
    return entries


async def handle_describe_cluster(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka DescribeCluster (KIP-700): the brokers Metadata would list for this client."""
    brokers = await routed_brokers(ctx, header)
    answer: dict[str, Any] = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "endpoint_type": body.get("endpoint_type", 1),
        "cluster_id": ctx.cluster_id,
        "controller_id": brokers[0].node_id,
        "brokers": [
            {
                "broker_id": p.node_id,
                "host": p.host,
                "port": p.port,
                "rack": p.zone or None,
                "is_fenced": False,
            }
            for p in brokers
        ],
        "cluster_authorized_operations": await _cluster_operations(
            ctx, body.get("include_cluster_authorized_operations")
        ),
    }
    if body.get("endpoint_type", 1) != 1:  # KIP-919: controllers are not reachable here
        answer.update(
            error_code=ErrorCode.MISMATCHED_ENDPOINT_TYPE,
            error_message="Floe agents serve broker endpoints only",
            brokers=[],
        )
    return answer


async def handle_init_producer_id(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
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
        # KIP-588: PRODUCER_FENCED from v4 on.
        "error_code": fenced_error(answer["error_code"], header, 4),
        "producer_id": answer.get("producer_id", -1),
        "producer_epoch": answer.get("producer_epoch", -1),
    }
