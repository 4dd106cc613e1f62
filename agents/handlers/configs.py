"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

Topic configs live in the control plane. There is no broker to configure: a BROKER
resource is described with a few configs made from the cluster's settings (e.g.
default.replication.factor, which Floe reports as 3 because object storage replicates the
data), read-only, followed by the cluster's dynamic broker configs, which AlterConfigs on a
BROKER resource sets in the control plane for every agent of the cluster
(metadata_store/broker_configs.py).
"""

from __future__ import annotations

from typing import Any

from agents.context import REPORTED_REPLICATION_FACTOR, AgentContext
from agents.control_plane import ControlPlaneUnavailable
from agents.topics import DEFAULT_MAX_MESSAGE_BYTES
from core.kafka import RequestHeader
from core.kafka.errors import ErrorCode

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_GROUP = 32  # KIP-848/KIP-932 group configs (share groups' share.*)
SOURCE_DYNAMIC_GROUP = 8
# ConfigSource values (DescribeConfigs v1+)
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_DYNAMIC_DEFAULT_BROKER = 3
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
_OPERATIONS = {0: "set", 1: "delete", 2: "append", 3: "subtract"}


def _broker_configs(ctx: AgentContext) -> dict[str, str]:
    retention = ctx.cluster_config.get("default_retention_ms", 604800000)
    return {
        "broker.id": str(ctx.node_id),
        "default.replication.factor": str(REPORTED_REPLICATION_FACTOR),
        "min.insync.replicas": "1",
        "num.partitions": str(ctx.default_partitions),
        "auto.create.topics.enable": "true" if ctx.auto_create_topics else "false",
        "message.max.bytes": str(DEFAULT_MAX_MESSAGE_BYTES),
        "log.retention.ms": str(retention),
        "delete.topic.enable": "true",
        "group.consumer.session.timeout.ms": str(ctx.groups.consumer.session_timeout_ms),
        "group.consumer.heartbeat.interval.ms": str(ctx.groups.consumer.heartbeat_interval_ms),
    }


def _entry(
    name: str, value: Any, *, is_default: bool, source: int, read_only: bool
) -> dict[str, Any]:
    return {
        "name": name,
        "value": None if value is None else str(value),
        "read_only": read_only,
        "is_default": is_default,
        "config_source": source,
        "is_sensitive": False,
        "synonyms": [],
        "config_type": 0,
        "documentation": None,
    }


def _result(resource: dict[str, Any], error: int = 0, message: str | None = None) -> dict[str, Any]:
    return {
        "error_code": error,
        "error_message": message,
        "resource_type": resource["resource_type"],
        "resource_name": resource["resource_name"],
        "configs": [],
    }


async def _ask_unless_away(
    ctx: AgentContext, call: str, body: dict[str, Any], *, known: bool
) -> dict[str, Any]:
    """The control plane's answer — not even asked while Ripcord answers for it from
    what is `known`."""
    if known and ctx.ripcord_active:
        raise ControlPlaneUnavailable(f"{call}: the control plane is away", outcome_unknown=False)
    return await ctx.client.call(call, body)


async def handle_describe_configs(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka DescribeConfigs for topics (from the control plane) and brokers (synthesised)."""
    resources = body["resources"]
    topic_names = [r["resource_name"] for r in resources if r["resource_type"] == RESOURCE_TOPIC]
    described: dict[str, dict[str, Any]] = {}
    last = ctx.described_configs
    if topic_names:
        try:
            answer = await _ask_unless_away(
                ctx,
                "topics/describe-configs",
                {"names": topic_names},
                known=all(("topic", n) in last for n in topic_names),
            )
        except ControlPlaneUnavailable:
            # Ripcord: the last answers serve; a topic never described waits (retriable).
            if not ctx.config.ripcord or any(("topic", n) not in last for n in topic_names):
                raise
            described = {n: last[("topic", n)] for n in topic_names}
        else:
            described = {t["name"]: t for t in answer["topics"]}
            last.update((("topic", n), t) for n, t in described.items() if not t["error_code"])
    dynamic: dict[str, Any] = {}
    if any(r["resource_type"] == RESOURCE_BROKER for r in resources):
        try:
            dynamic = (
                await _ask_unless_away(
                    ctx, "broker-configs/describe", {}, known=("broker", "") in last
                )
            )["configs"]
        except ControlPlaneUnavailable:
            if not ctx.config.ripcord or ("broker", "") not in last:
                raise
            dynamic = last[("broker", "")]
        else:
            last[("broker", "")] = dynamic
    group_ids = [r["resource_name"] for r in resources if r["resource_type"] == RESOURCE_GROUP]
    groups: dict[str, list[dict[str, Any]]] = {}
    if group_ids:
        answer = await ctx.client.call("share/configs/describe", {"group_ids": group_ids})
        groups = {g["group_id"]: g["configs"] for g in answer["groups"]}
    results = []
    for resource in resources:
        keys = resource.get("configuration_keys")
        wanted = None if keys is None else set(keys)
        result = _result(resource)
        results.append(result)
        if resource["resource_type"] == RESOURCE_TOPIC:
            topic = described.get(resource["resource_name"])
            if topic is None:
                result["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if topic["error_code"]:
                result["error_code"] = topic["error_code"]
                result["error_message"] = topic.get("error_message")
                continue
            result["configs"] = [
                _entry(
                    c["name"],
                    c["value"],
                    is_default=c.get("is_default", False),
                    source=SOURCE_DEFAULT if c.get("is_default") else SOURCE_DYNAMIC_TOPIC,
                    read_only=c.get("read_only", False),
                )
                for c in topic["configs"]
                if wanted is None or c["name"] in wanted
            ]
        elif resource["resource_type"] == RESOURCE_GROUP:
            result["configs"] = [
                _entry(
                    c["name"],
                    c["value"],
                    is_default=c["is_default"],
                    source=SOURCE_DEFAULT if c["is_default"] else SOURCE_DYNAMIC_GROUP,
                    read_only=False,
                )
                for c in groups.get(resource["resource_name"], [])
                if wanted is None or c["name"] in wanted
            ]
        elif resource["resource_type"] == RESOURCE_BROKER:
            if _unknown_broker(ctx, resource, result):
                continue
            result["configs"] = [
                _entry(name, value, is_default=False, source=SOURCE_STATIC_BROKER, read_only=True)
                for name, value in _broker_configs(ctx).items()
                if wanted is None or name in wanted
            ] + [
                _entry(
                    name,
                    value,
                    is_default=False,
                    source=SOURCE_DYNAMIC_DEFAULT_BROKER,
                    read_only=False,
                )
                for name, value in dynamic.items()
                if wanted is None or name in wanted
            ]
        else:
            result["error_code"] = ErrorCode.INVALID_REQUEST
            result["error_message"] = f"unsupported resource type {resource['resource_type']}"
    return {"throttle_time_ms": 0, "results": results}


def _unknown_broker(ctx: AgentContext, resource: dict[str, Any], result: dict[str, Any]) -> bool:
    """A BROKER resource names this agent or the cluster-wide default (""); else refused."""
    if resource["resource_name"] in ("", str(ctx.node_id)):
        return False
    result["error_code"] = ErrorCode.INVALID_REQUEST
    result["error_message"] = f"unknown broker {resource['resource_name']!r}"
    return True


async def _alter(ctx: AgentContext, body: dict[str, Any], *, incremental: bool) -> dict[str, Any]:
    resources = body["resources"]
    topics = []
    results: list[dict[str, Any]] = []
    validate_only = bool(body.get("validate_only", False))
    for resource in resources:
        result = _result(resource)
        del result["configs"]
        results.append(result)
        if resource["resource_type"] not in (RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_GROUP):
            result["error_code"] = ErrorCode.INVALID_REQUEST
            result["error_message"] = (
                f"unsupported resource type {resource['resource_type']}: "
                "Floe changes topic, broker and group configs"
            )
            continue
        if resource["resource_type"] == RESOURCE_BROKER and _unknown_broker(ctx, resource, result):
            continue
        ops = []
        for config in resource["configs"]:
            op = _OPERATIONS.get(config.get("config_operation", 0)) if incremental else "set"
            if op is None:
                result["error_code"] = ErrorCode.INVALID_REQUEST
                result["error_message"] = f"unknown config operation {config['config_operation']}"
                break
            ops.append({"name": config["name"], "op": op, "value": config.get("value")})
        else:
            if resource["resource_type"] == RESOURCE_TOPIC:
                topics.append((result, {"name": resource["resource_name"], "ops": ops}))
                continue
            if resource["resource_type"] == RESOURCE_GROUP:
                answer = await ctx.client.call(
                    "share/configs/alter",
                    {
                        "group_id": resource["resource_name"],
                        "ops": ops,
                        "incremental": incremental,
                        "validate_only": validate_only,
                    },
                )
                result["error_code"] = answer["error_code"]
                result["error_message"] = answer.get("error_message")
                continue
            answer = await ctx.client.call(
                "broker-configs/alter",
                {"ops": ops, "incremental": incremental, "validate_only": validate_only},
            )
            result["error_code"] = answer["error_code"]
            result["error_message"] = answer.get("error_message")
    if topics:
        answer = await ctx.client.call(
            "topics/alter-configs",
            {
                "topics": [request for _, request in topics],
                "incremental": incremental,
                "validate_only": validate_only,
            },
        )
        for (result, _), item in zip(topics, answer["topics"], strict=True):
            result["error_code"] = item["error_code"]
            result["error_message"] = item.get("error_message")
        ctx.topics.invalidate(names=[request["name"] for _, request in topics])
    return {"throttle_time_ms": 0, "responses": results}


async def handle_alter_configs(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka AlterConfigs: replace a topic's overrides with the given set."""
    return await _alter(ctx, body, incremental=False)


async def handle_incremental_alter_configs(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka IncrementalAlterConfigs (KIP-339): set/delete/append/subtract per key."""
    return await _alter(ctx, body, incremental=True)
