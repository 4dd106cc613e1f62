"""Agent-API operations on topics, group offsets and agent liveness.

Thin adapters from the JSON shapes of AGENT_API.md to the services in ``services.py``;
Kafka refusals become ``error_code``/``error_message`` pairs, never HTTP errors.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents.protocol.errors import ErrorCode

from . import services
from .agent_schemas import HeartbeatRequest
from .models import Agent, GroupOffset, Partition, Topic, VirtualCluster
from .services import TopicError
from .topic_configs import effective_configs


def _topic_json(topic: Topic) -> dict:
    return {
        "name": topic.name,
        "topic_id": str(topic.id),
        "partitions": topic.partition_count,
        "configs": topic.configs,
    }


def topics_list(cluster: VirtualCluster, names: list | None, topic_ids: list | None = None) -> dict:
    topics = Topic.objects.filter(cluster=cluster).order_by("name")
    if names is not None:
        topics = topics.filter(name__in=[str(n) for n in names])
    if topic_ids is not None:
        valid = []
        for value in topic_ids:
            try:
                valid.append(uuid.UUID(str(value)))
            except ValueError:
                continue  # a malformed id names no topic
        topics = topics.filter(id__in=valid)
    return {"topics": [_topic_json(t) for t in topics]}


def _error(name, code: int, message: str | None, **extra) -> dict:
    return {"name": name, "error_code": int(code), "error_message": message, **extra}


def topics_create(cluster: VirtualCluster, requests: list, validate_only: bool) -> dict:
    answers = []
    for request in requests:
        name = str(request.get("name", ""))
        try:
            topic = services.topic_create(
                cluster=cluster,
                name=name,
                num_partitions=int(request.get("num_partitions", -1)),
                replication_factor=int(request.get("replication_factor", -1)),
                configs=request.get("configs") or {},
                validate_only=validate_only,
            )
        except TopicError as exc:
            answers.append(
                _error(name, exc.code, exc.message, topic_id=None, num_partitions=-1, configs={})
            )
            continue
        answers.append(
            _error(
                name,
                0,
                None,
                topic_id=str(topic.id) if not validate_only else None,
                num_partitions=topic.partition_count,
                configs=effective_configs(
                    topic.configs, default_retention_ms=cluster.default_retention_ms
                ),
            )
        )
    return {"topics": answers}


def topics_delete(cluster: VirtualCluster, names: list | None, topic_ids: list | None) -> dict:
    answers = []
    for name in names or []:
        topic = Topic.objects.filter(cluster=cluster, name=str(name)).first()
        if topic is None:
            answers.append(
                _error(
                    name,
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    "This server does not host this topic-partition.",
                    topic_id=None,
                )
            )
            continue
        topic_id = str(topic.id)
        services.topic_delete(topic=topic)
        answers.append(_error(name, 0, None, topic_id=topic_id))
    for topic_id in topic_ids or []:
        try:
            topic = Topic.objects.filter(cluster=cluster, id=topic_id).first()
        except Exception:  # a malformed uuid is simply unknown
            topic = None
        if topic is None:
            answers.append(
                _error(
                    None,
                    ErrorCode.UNKNOWN_TOPIC_ID,
                    "This server does not host this topic ID.",
                    topic_id=topic_id,
                )
            )
            continue
        name = topic.name
        services.topic_delete(topic=topic)
        answers.append(_error(name, 0, None, topic_id=str(topic_id)))
    return {"topics": answers}


def topics_create_partitions(cluster: VirtualCluster, requests: list, validate_only: bool) -> dict:
    answers = []
    for request in requests:
        name = str(request.get("name", ""))
        topic = Topic.objects.filter(cluster=cluster, name=name).first()
        if topic is None:
            answers.append(_error(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unknown topic."))
            continue
        try:
            services.topic_partitions_create(
                topic=topic, count=int(request["count"]), validate_only=validate_only
            )
        except TopicError as exc:
            answers.append(_error(name, exc.code, exc.message))
            continue
        answers.append(_error(name, 0, None))
    return {"topics": answers}


def topics_describe_configs(cluster: VirtualCluster, names: list) -> dict:
    topics = {
        t.name: t for t in Topic.objects.filter(cluster=cluster, name__in=[str(n) for n in names])
    }
    answers = []
    for name in names:
        topic = topics.get(name)
        if topic is None:
            answers.append(
                _error(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unknown topic.", configs=[])
            )
            continue
        configs = [
            {**c, "read_only": False, "sensitive": False}
            for c in effective_configs(
                topic.configs, default_retention_ms=cluster.default_retention_ms
            )
        ]
        answers.append(_error(name, 0, None, configs=configs))
    return {"topics": answers}


def topics_alter_configs(
    cluster: VirtualCluster, requests: list, incremental: bool, validate_only: bool
) -> dict:
    answers = []
    for request in requests:
        name = str(request.get("name", ""))
        topic = Topic.objects.filter(cluster=cluster, name=name).first()
        if topic is None:
            answers.append(_error(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unknown topic."))
            continue
        try:
            services.topic_configs_alter(
                topic=topic,
                ops=list(request.get("ops") or []),
                incremental=incremental,
                validate_only=validate_only,
            )
        except TopicError as exc:
            answers.append(_error(name, exc.code, exc.message))
            continue
        answers.append(_error(name, 0, None))
    return {"topics": answers}


# --- consumer-group offsets ---------------------------------------------------------


def _partition_map(cluster: VirtualCluster, pairs: set[tuple[str, int]]) -> dict:
    names = {p[0] for p in pairs}
    rows = Partition.objects.filter(topic__cluster=cluster, topic__name__in=names).values_list(
        "topic__name", "index", "id"
    )
    return {(name, index): pid for name, index, pid in rows if (name, index) in pairs}


@transaction.atomic
def group_offsets_commit(cluster: VirtualCluster, group_id: str, offsets: list) -> dict:
    pairs = {(str(o["topic"]), int(o["partition"])) for o in offsets}
    partitions = _partition_map(cluster, pairs)
    answers, rows = [], []
    for o in offsets:
        key = (str(o["topic"]), int(o["partition"]))
        pid = partitions.get(key)
        code = 0 if pid is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        answers.append({"topic": key[0], "partition": key[1], "error_code": int(code)})
        if pid is not None:
            rows.append(
                GroupOffset(
                    cluster=cluster,
                    group_id=group_id,
                    partition_id=pid,
                    committed_offset=int(o["offset"]),
                    leader_epoch=int(o.get("leader_epoch", -1)),
                    metadata=str(o.get("metadata") or ""),
                )
            )
    if rows:
        GroupOffset.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["cluster", "group_id", "partition"],
            update_fields=["committed_offset", "leader_epoch", "metadata", "committed_at"],
        )
    return {"offsets": answers}


def group_offsets_fetch(cluster: VirtualCluster, group_id: str, partitions: list | None) -> dict:
    committed = {
        (o.partition.topic.name, o.partition.index): o
        for o in GroupOffset.objects.filter(cluster=cluster, group_id=group_id).select_related(
            "partition__topic"
        )
    }
    if partitions is None:
        keys = sorted(committed)
    else:
        keys = [(str(p["topic"]), int(p["partition"])) for p in partitions]
    answers = []
    for key in keys:
        o = committed.get(key)
        answers.append(
            {
                "topic": key[0],
                "partition": key[1],
                "offset": o.committed_offset if o else -1,
                "leader_epoch": o.leader_epoch if o else -1,
                "metadata": o.metadata if o else "",
                "error_code": 0,
            }
        )
    return {"offsets": answers}


# --- agents -------------------------------------------------------------------------


def agents_heartbeat(cluster: VirtualCluster, body: HeartbeatRequest) -> dict:
    """Record an agent's heartbeat; answer the live agents and the cluster config."""
    now = timezone.now()
    Agent.objects.update_or_create(
        cluster=cluster,
        agent_id=body.agent_id,
        defaults={
            "host": body.host or "127.0.0.1",
            "port": body.port or 9092,
            "zone": body.zone,
            "load": body.load,
            "last_heartbeat": now,
        },
    )
    live_since = now - timedelta(seconds=settings.FLOE_AGENT_LIVENESS_S)
    agents = Agent.objects.filter(cluster=cluster, last_heartbeat__gte=live_since).order_by(
        "agent_id"
    )
    return {
        "cluster": {"id": cluster.public_id, "name": cluster.name, "config": cluster.config()},
        "agents": [
            {"agent_id": a.agent_id, "host": a.host, "port": a.port, "zone": a.zone, "load": a.load}
            for a in agents
        ],
    }
