"""Writes for topics: create, delete, grow, configure.

The same functions serve the REST API, the web console and the agent API. Kafka-level
failures raise ``TopicError`` carrying the Kafka error code that agents hand to clients.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from core.kafka.errors import ErrorCode
from metadata_store import tail_feed
from metadata_store.clusters import VirtualCluster
from metadata_store.models import Partition, Topic
from metadata_store.store import JSON
from metadata_store.topic_configs import (
    MAX_PARTITIONS,
    ConfigOpError,
    canonical_config_name,
    config_ops_apply,
    config_problem,
    topic_name_problem,
)


class TopicError(Exception):
    """A Kafka-level refusal (bad name, existing topic, bad config…)."""

    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def _validate_configs(configs: dict[str, Any] | None) -> dict[str, str]:
    clean = {}
    for name, value in (configs or {}).items():
        problem = config_problem(name, value)
        if problem:
            raise TopicError(ErrorCode.INVALID_CONFIG, problem)
        clean[str(canonical_config_name(name))] = str(value)
    return clean


def topic_create(
    *,
    cluster: VirtualCluster,
    name: str,
    num_partitions: int = -1,
    replication_factor: int = -1,
    configs: dict[str, Any] | None = None,
    validate_only: bool = False,
) -> Topic:
    """Create a topic with its partitions. Raises ``TopicError`` as Kafka would."""
    problem = topic_name_problem(name)
    if problem:
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
    if num_partitions == -1:
        num_partitions = cluster.default_partitions
    if not 1 <= num_partitions <= MAX_PARTITIONS:
        raise TopicError(
            ErrorCode.INVALID_PARTITIONS,
            f"Number of partitions must be between 1 and {MAX_PARTITIONS}, got {num_partitions}",
        )
    if replication_factor != -1 and not 1 <= replication_factor <= 3:
        # Storage is replicated by the object store; we accept what clients usually ask.
        raise TopicError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Replication factor must be between 1 and 3 (storage is replicated by the object store), got {replication_factor}",
        )
    clean = _validate_configs(configs or {})
    if Topic.objects.filter(cluster=cluster, name=name).exists():
        raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    if validate_only:
        return Topic(cluster=cluster, name=name, partition_count=num_partitions, configs=clean)
    try:
        with transaction.atomic():
            topic = Topic.objects.create(
                cluster=cluster, name=name, partition_count=num_partitions, configs=clean
            )
            Partition.objects.bulk_create(
                [Partition(topic=topic, index=i) for i in range(num_partitions)]
            )
            tail_feed.partitions_created(cluster.pk, str(topic.pk), 0, num_partitions)
    except IntegrityError:
        raise TopicError(
            ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists."
        ) from None
    return topic


@transaction.atomic
def topic_delete(*, topic: Topic) -> None:
    """Delete a topic and its metadata; its files are left for the cleanup jobs.

    The topic's row is locked first: a writer of a row pointing at it that holds it FOR
    KEY SHARE (the heartbeat's consumed totals, `cluster_topics_held`) either finishes
    before the delete collects the rows to delete with it, or waits and finds it gone —
    never commits in between (a foreign key violation at this commit)."""
    Topic.objects.select_for_update().filter(pk=topic.pk).first()
    tail_feed.partitions_changed(topic.cluster_id, topic.partitions.values_list("id", flat=True))
    topic.delete()


@transaction.atomic
def topic_partitions_create(
    *, topic: Topic, count: int, validate_only: bool = False, mirrored_by: str = ""
) -> Topic:
    """Grow a topic to ``count`` partitions (never shrink, as Kafka).

    A topic a migration mirrors follows its source's partition count: only that
    migration (``mirrored_by``, its copier) grows it, and the new partitions are
    mirrored too; anyone else is refused until the topic's cutover."""
    topic = Topic.objects.select_for_update().get(pk=topic.pk)
    if topic.mirrored_by and topic.mirrored_by != mirrored_by:
        raise TopicError(
            ErrorCode.POLICY_VIOLATION,
            f"topic '{topic.name}' is mirrored by migration {topic.mirrored_by}: its"
            " partitions follow the source's until its cutover",
        )
    if count <= topic.partition_count:
        raise TopicError(
            ErrorCode.INVALID_PARTITIONS,
            f"Topic currently has {topic.partition_count} partitions, {count} would not be an increase.",
        )
    if count > MAX_PARTITIONS:
        raise TopicError(ErrorCode.INVALID_PARTITIONS, f"At most {MAX_PARTITIONS} partitions.")
    if not validate_only:
        Partition.objects.bulk_create(
            [
                Partition(topic=topic, index=i, mirrored=bool(topic.mirrored_by))
                for i in range(topic.partition_count, count)
            ]
        )
        if not topic.mirrored_by:  # a mirrored partition starts where its source's does
            tail_feed.partitions_created(
                topic.cluster_id, str(topic.pk), topic.partition_count, count
            )
        topic.partition_count = count
        topic.save(update_fields=["partition_count"])
    return topic


@transaction.atomic
def topic_configs_alter(
    *, topic: Topic, ops: list[JSON], incremental: bool, validate_only: bool = False
) -> Topic:
    """Apply config operations (set/delete/append/subtract) to a topic's overrides.

    Non-incremental (AlterConfigs) replaces the whole set of overrides with the ``set``
    ops, as Kafka does.
    """
    topic = Topic.objects.select_for_update().get(pk=topic.pk)
    try:
        configs = config_ops_apply(
            topic.configs,
            ops,
            incremental=incremental,
            problem=config_problem,
            list_base=lambda name: "delete" if name == "cleanup.policy" else None,
        )
    except ConfigOpError as exc:
        raise TopicError(exc.code, exc.message) from None
    if not validate_only:
        topic.configs = configs
        topic.save(update_fields=["configs"])
    return topic
