"""Writes for virtual clusters and their agent keys.

The same functions serve the REST API and the web console. What the agent API needs of
clusters (an agent key's lookup, the bucket the first agent fixes) is the metadata
store's (``metadata_store.clusters``), as are topics (``metadata_store.topics``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from core.topic_types import TOPIC_TYPES
from metadata_store.clusters import bucket_url_clean
from metadata_store.topic_configs import MAX_PARTITIONS
from tenancy.errors import CONFLICT, conflict
from tenancy.ids import new_secret
from tenancy.models import Organization
from virtualclusters.models import AgentKey, VirtualCluster

CLUSTER_TAKEN = "A cluster with this name already exists."

CONFIG_BOUNDS = {
    "default_partitions": (1, MAX_PARTITIONS),
    "default_retention_ms": (-1, 2**62),
    "max_flush_age_ms": (5, 60_000),
    "max_flush_bytes": (64 * 1024, 256 * 1024 * 1024),
    # KIP-848 groups: Kafka's group.consumer.session.timeout.ms (45 s; Kafka allows
    # 45-60 s by default, lower here for tests and impatient deployments) and
    # group.consumer.heartbeat.interval.ms (5 s), below the session timeout.
    "consumer_session_timeout_ms": (1_000, 30 * 60 * 1000),
    "consumer_heartbeat_interval_ms": (100, 10 * 60 * 1000),
}


# What an agent's --agent-group accepts (agents.config.AGENT_GROUP_PATTERN).
AGENT_GROUP_PATTERN = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
MAX_JOBS_AGENT_GROUPS = 32


def _clean_cluster_name(name: str) -> str:
    name = (name or "").strip()
    if not name:
        raise ValidationError({"name": ["A cluster needs a name."]})
    if len(name) > 100:
        raise ValidationError({"name": ["At most 100 characters."]})
    return name


def _check_config(config: dict[str, Any]) -> dict[str, Any]:
    errors: dict[str, list[str]] = {}
    clean: dict[str, Any] = {}
    for field, value in config.items():
        if field not in VirtualCluster.CONFIG_FIELDS:
            errors[field] = ["Unknown configuration field."]
        elif field == "default_topic_type":
            if value not in TOPIC_TYPES:
                errors[field] = [f"Must be one of {', '.join(TOPIC_TYPES)}."]
            else:
                clean[field] = value
        elif field == "jobs_agent_groups":
            groups = value if isinstance(value, list) else None
            if groups is None or not all(
                isinstance(g, str) and re.fullmatch(AGENT_GROUP_PATTERN, g) for g in groups
            ):
                errors[field] = ["A list of agent group names (lowercase letters, digits, dashes)."]
            elif len(groups) > MAX_JOBS_AGENT_GROUPS:
                errors[field] = [f"At most {MAX_JOBS_AGENT_GROUPS} agent groups."]
            else:
                clean[field] = sorted(set(groups))
        elif field in ("auto_create_topics", "acls_enabled", "ripcord"):
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
def cluster_bucket_change(*, cluster: VirtualCluster, bucket_url: str) -> VirtualCluster:
    """Point the cluster at another bucket (an explicit operation: its files must have
    been copied there, object keys unchanged, while its agents were stopped). Agents
    with the old URL are refused from their next start."""
    cluster.bucket_url = bucket_url_clean(bucket_url) if bucket_url else ""
    cluster.save(update_fields=["bucket_url"])
    return cluster


@transaction.atomic
def cluster_create(
    *,
    organization: Organization,
    name: str,
    config: dict[str, Any] | None = None,
    bucket_url: str = "",
) -> VirtualCluster:
    """A new virtual cluster in ``organization``; names are unique per organization."""
    errors: dict[str, list[Any]] = {}  # messages, or errors keeping their code (a conflict)
    clean: dict[str, Any] = {}
    try:  # collect the name's and the configuration's problems together
        name = _clean_cluster_name(name)
        if VirtualCluster.objects.filter(organization=organization, name=name).exists():
            errors["name"] = [ValidationError(CLUSTER_TAKEN, code=CONFLICT)]
    except ValidationError as exc:
        errors.update(exc.message_dict)
    try:
        clean = _check_config(config or {})
    except ValidationError as exc:
        errors.update(exc.message_dict)
    try:
        if bucket_url:
            clean["bucket_url"] = bucket_url_clean(bucket_url)
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
        raise conflict("name", CLUSTER_TAKEN)
    cluster.name = name
    cluster.save(update_fields=["name"])
    return cluster


@transaction.atomic
def cluster_config_update(*, cluster: VirtualCluster, config: dict[str, Any]) -> VirtualCluster:
    """Update some configuration fields; unknown fields and bad values are refused."""
    clean = _check_config(config)
    session = clean.get("consumer_session_timeout_ms", cluster.consumer_session_timeout_ms)
    heartbeat = clean.get("consumer_heartbeat_interval_ms", cluster.consumer_heartbeat_interval_ms)
    if heartbeat >= session:
        # Each value is valid alone; together they conflict (with each other, or with the
        # one the cluster keeps): 409, as the schema can only bound each.
        raise conflict(
            "consumer_heartbeat_interval_ms",
            f"Must be below the consumer session timeout ({session} ms); got {heartbeat} ms.",
        )
    for field, value in clean.items():
        setattr(cluster, field, value)
    cluster.save(update_fields=list(clean) or None)
    return cluster


@transaction.atomic
def cluster_delete(*, cluster: VirtualCluster, confirm_name: str) -> None:
    """Delete a cluster and all its metadata; the caller must type its name."""
    if (confirm_name or "").strip() != cluster.name:
        raise conflict("confirm_name", "Type the cluster's name to confirm deletion.")
    cluster.delete()


@transaction.atomic
def agent_key_create(
    *, cluster: VirtualCluster, name: str = "", agent_group: str = ""
) -> tuple[AgentKey, str]:
    """A new agent key for ``cluster``, limited to agents of ``agent_group`` when given;
    the plaintext is returned once."""
    name = (name or "").strip()
    if len(name) > 100:
        raise ValidationError({"name": ["At most 100 characters."]})
    agent_group = (agent_group or "").strip()
    if agent_group and not re.fullmatch(AGENT_GROUP_PATTERN, agent_group):
        raise ValidationError(
            {"agent_group": ["1-63 lowercase letters, digits or dashes (not first or last)."]}
        )
    taken = set(cluster.agent_keys.active().values_list("name", flat=True))
    if name in taken:
        raise conflict("name", "An active agent key with this name already exists.")
    if not name:  # unnamed keys are numbered: "agent key", "agent key 2", …
        name = next(n for n in _numbered("agent key") if n not in taken)
    secret = new_secret("agent")
    key = AgentKey.objects.create(
        cluster=cluster,
        name=name,
        display_prefix=secret.display_prefix,
        digest=secret.digest,
        agent_group=agent_group,
    )
    return key, secret.plaintext


def _numbered(base: str) -> Iterator[str]:

    yield base
    n = 2
    while True:
        yield f"{base} {n}"
        n += 1


def agent_key_revoke(*, key: AgentKey) -> None:
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
