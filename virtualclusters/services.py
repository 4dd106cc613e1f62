"""Writes for virtual clusters, their keys and topics.

The same functions serve the REST API, the web console and the agent API. Kafka-level
failures raise ``TopicError`` carrying the Kafka error code that agents hand to clients.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from agents.protocol.errors import ErrorCode
from controlplane.ids import new_secret, secret_digest
from controlplane.models import Organization

from .models import AgentKey, Partition, Topic, VirtualCluster
from .topic_configs import MAX_PARTITIONS, config_problem, topic_name_problem

CONFIG_BOUNDS = {
    "default_partitions": (1, MAX_PARTITIONS),
    "default_retention_ms": (-1, 2**62),
    "max_flush_age_ms": (5, 60_000),
    "max_flush_bytes": (64 * 1024, 256 * 1024 * 1024),
}


class TopicError(Exception):
    """A Kafka-level refusal (bad name, existing topic, bad config…)."""

    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def _clean_cluster_name(name: str) -> str:
    name = (name or "").strip()
    if not name:
        raise ValidationError({"name": ["A cluster needs a name."]})
    if len(name) > 100:
        raise ValidationError({"name": ["At most 100 characters."]})
    return name


def _check_config(config: dict) -> dict:
    errors: dict[str, list[str]] = {}
    clean: dict = {}
    for field, value in config.items():
        if field not in VirtualCluster.CONFIG_FIELDS:
            errors[field] = ["Unknown configuration field."]
        elif field in ("auto_create_topics", "acls_enabled"):
            if not isinstance(value, bool):
                errors[field] = ["Must be true or false."]
            else:
                clean[field] = value
        else:
            low, high = CONFIG_BOUNDS[field]
            if isinstance(value, bool) or not isinstance(value, int):
                errors[field] = ["Must be an integer."]
            elif not low <= value <= high:
                errors[field] = [f"Must be between {low} and {high}."]
            else:
                clean[field] = value
    if errors:
        raise ValidationError(errors)
    return clean


@transaction.atomic
def cluster_create(
    *, organization: Organization, name: str, config: dict | None = None
) -> VirtualCluster:
    """A new virtual cluster in ``organization``; names are unique per organization."""
    errors: dict[str, list[str]] = {}
    clean: dict = {}
    try:  # collect the name's and the configuration's problems together
        name = _clean_cluster_name(name)
        if VirtualCluster.objects.filter(organization=organization, name=name).exists():
            errors["name"] = ["A cluster with this name already exists."]
    except ValidationError as exc:
        errors.update(exc.message_dict)
    try:
        clean = _check_config(config or {})
    except ValidationError as exc:
        errors.update(exc.message_dict)
    if errors:
        raise ValidationError(errors)
    return VirtualCluster.objects.create(organization=organization, name=name, **clean)


@transaction.atomic
def cluster_rename(*, cluster: VirtualCluster, name: str) -> VirtualCluster:
    name = _clean_cluster_name(name)
    taken = VirtualCluster.objects.filter(organization_id=cluster.organization_id, name=name)
    if taken.exclude(pk=cluster.pk).exists():
        raise ValidationError({"name": ["A cluster with this name already exists."]})
    cluster.name = name
    cluster.save(update_fields=["name"])
    return cluster


@transaction.atomic
def cluster_config_update(*, cluster: VirtualCluster, config: dict) -> VirtualCluster:
    """Update some configuration fields; unknown fields and bad values are refused."""
    clean = _check_config(config)
    for field, value in clean.items():
        setattr(cluster, field, value)
    cluster.save(update_fields=list(clean) or None)
    return cluster


@transaction.atomic
def cluster_delete(*, cluster: VirtualCluster, confirm_name: str) -> None:
    """Delete a cluster and all its metadata; the caller must type its name."""
    if (confirm_name or "").strip() != cluster.name:
        raise ValidationError({"confirm_name": ["Type the cluster's name to confirm deletion."]})
    cluster.delete()


@transaction.atomic
def agent_key_create(*, cluster: VirtualCluster, name: str = "") -> tuple[AgentKey, str]:
    """A new agent key for ``cluster``; the plaintext is returned once."""
    name = (name or "").strip() or "agent key"
    if len(name) > 100:
        raise ValidationError({"name": ["At most 100 characters."]})
    secret = new_secret("agent")
    key = AgentKey.objects.create(
        cluster=cluster, name=name, display_prefix=secret.display_prefix, digest=secret.digest
    )
    return key, secret.plaintext


def agent_key_revoke(*, key: AgentKey) -> None:
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])


def agent_key_authenticate(plaintext: str) -> AgentKey | None:
    """The active agent key with this plaintext (with its cluster), or ``None``."""
    if not plaintext or not plaintext.startswith("floe_agent_"):
        return None
    return (
        AgentKey.objects.active()
        .select_related("cluster")
        .filter(digest=secret_digest(plaintext))
        .first()
    )


# --- topics -----------------------------------------------------------------------


def _validate_configs(configs: dict) -> dict:
    clean = {}
    for name, value in (configs or {}).items():
        problem = config_problem(name, value)
        if problem:
            raise TopicError(ErrorCode.INVALID_CONFIG, problem)
        clean[name] = str(value)
    return clean


def topic_create(
    *,
    cluster: VirtualCluster,
    name: str,
    num_partitions: int = -1,
    replication_factor: int = -1,
    configs: dict | None = None,
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
    except IntegrityError:
        raise TopicError(
            ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists."
        ) from None
    return topic


@transaction.atomic
def topic_delete(*, topic: Topic) -> None:
    """Delete a topic and its metadata; its files are left for the cleanup jobs."""
    topic.delete()


@transaction.atomic
def topic_partitions_create(*, topic: Topic, count: int, validate_only: bool = False) -> Topic:
    """Grow a topic to ``count`` partitions (never shrink, as Kafka)."""
    topic = Topic.objects.select_for_update().get(pk=topic.pk)
    if count <= topic.partition_count:
        raise TopicError(
            ErrorCode.INVALID_PARTITIONS,
            f"Topic currently has {topic.partition_count} partitions, {count} would not be an increase.",
        )
    if count > MAX_PARTITIONS:
        raise TopicError(ErrorCode.INVALID_PARTITIONS, f"At most {MAX_PARTITIONS} partitions.")
    if not validate_only:
        Partition.objects.bulk_create(
            [Partition(topic=topic, index=i) for i in range(topic.partition_count, count)]
        )
        topic.partition_count = count
        topic.save(update_fields=["partition_count"])
    return topic


@transaction.atomic
def topic_configs_alter(
    *, topic: Topic, ops: list[dict], incremental: bool, validate_only: bool = False
) -> Topic:
    """Apply config operations (set/delete/append/subtract) to a topic's overrides.

    Non-incremental (AlterConfigs) replaces the whole set of overrides with the ``set``
    ops, as Kafka does.
    """
    topic = Topic.objects.select_for_update().get(pk=topic.pk)
    configs = dict(topic.configs) if incremental else {}
    for op in ops:
        name, kind, value = op.get("name"), op.get("op", "set"), op.get("value")
        if kind == "delete":
            configs.pop(name, None)
            continue
        if kind in ("append", "subtract"):
            if name != "cleanup.policy":
                raise TopicError(
                    ErrorCode.INVALID_CONFIG, f"Config {name} is not a list; cannot {kind}"
                )
            current = [p for p in configs.get(name, "delete").split(",") if p]
            items = [p.strip() for p in str(value or "").split(",") if p.strip()]
            if kind == "append":
                current += [p for p in items if p not in current]
            else:
                current = [p for p in current if p not in items]
            value = ",".join(current) or "delete"
        elif kind != "set":
            raise TopicError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {kind}")
        problem = config_problem(name, value)
        if problem:
            raise TopicError(ErrorCode.INVALID_CONFIG, problem)
        configs[name] = str(value)
    if not validate_only:
        topic.configs = configs
        topic.save(update_fields=["configs"])
    return topic
