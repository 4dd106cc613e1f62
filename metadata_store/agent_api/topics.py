"""Agent-API operations on topics.

Thin adapters from the JSON shapes of docs/AGENT_API.md to the services in ``topics.py``;
Kafka refusals become ``error_code``/``error_message`` pairs, never HTTP errors.
"""

from __future__ import annotations

import uuid
from typing import Any

from core.kafka.errors import ErrorCode
from metadata_store.clusters import VirtualCluster
from metadata_store.models import Topic
from metadata_store.store import JSON
from metadata_store.topic_configs import effective_configs
from metadata_store.topics import (
    TopicError,
    topic_configs_alter,
    topic_create,
    topic_delete,
    topic_partitions_create,
)


def _topic_json(topic: Topic) -> JSON:
    return {
        "name": topic.name,
        "topic_id": str(topic.id),
        "partitions": topic.partition_count,
        "configs": topic.configs,
        "mirrored_by": topic.mirrored_by,  # a migration's id: read-only until its cutover
    }


def topics_list(
    cluster: VirtualCluster, names: list[str] | None, topic_ids: list[str] | None = None
) -> JSON:
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


def _error(name: object, code: int, message: str | None, **extra: Any) -> JSON:
    return {"name": name, "error_code": int(code), "error_message": message, **extra}


def topics_create(cluster: VirtualCluster, requests: list[JSON], validate_only: bool) -> JSON:
    answers = []
    for request in requests:
        name = str(request.get("name", ""))
        try:
            topic = topic_create(
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
                    topic.configs,
                    default_retention_ms=cluster.default_retention_ms,
                    default_topic_type=cluster.default_topic_type,
                ),
            )
        )
    return {"topics": answers}


def topics_delete(
    cluster: VirtualCluster, names: list[str] | None, topic_ids: list[str] | None
) -> JSON:
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
        topic_delete(topic=topic)
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
        topic_delete(topic=topic)
        answers.append(_error(name, 0, None, topic_id=str(topic_id)))
    return {"topics": answers}


def topics_create_partitions(
    cluster: VirtualCluster, requests: list[JSON], validate_only: bool
) -> JSON:
    answers = []
    for request in requests:
        name = str(request.get("name", ""))
        topic = Topic.objects.filter(cluster=cluster, name=name).first()
        if topic is None:
            answers.append(_error(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unknown topic."))
            continue
        try:
            topic_partitions_create(
                topic=topic, count=int(request["count"]), validate_only=validate_only
            )
        except TopicError as exc:
            answers.append(_error(name, exc.code, exc.message))
            continue
        answers.append(_error(name, 0, None))
    return {"topics": answers}


def topics_describe_configs(cluster: VirtualCluster, names: list[str]) -> JSON:
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
                topic.configs,
                default_retention_ms=cluster.default_retention_ms,
                default_topic_type=cluster.default_topic_type,
            )
        ]
        answers.append(_error(name, 0, None, configs=configs))
    return {"topics": answers}


def topics_alter_configs(
    cluster: VirtualCluster, requests: list[JSON], incremental: bool, validate_only: bool
) -> JSON:
    answers = []
    for request in requests:
        name = str(request.get("name", ""))
        topic = Topic.objects.filter(cluster=cluster, name=name).first()
        if topic is None:
            answers.append(_error(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unknown topic."))
            continue
        try:
            topic_configs_alter(
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
