"""Virtual clusters and their agent keys: the root every other row of the metadata store
hangs from. The models' tables are the ones virtualclusters made (``db_table``); the
virtualclusters app (above) writes them through its services, console and REST API, and
re-exports the models from ``virtualclusters.models``. Here too: what the agent API needs
of them — an agent key's cluster (``agent_key_authenticate``) and the bucket the first
agent fixes (``cluster_bucket_claim``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone

from tenancy.ids import public_id, secret_digest
from tenancy.models import Organization, OrgScopedQuerySet

# "Last used" of an agent key is kept to this resolution (agents authenticate often).
LAST_USED_RESOLUTION = timedelta(minutes=1)

DEFAULT_RETENTION_MS = 7 * 24 * 3600 * 1000


def _cluster_id() -> str:
    return public_id("vci")


def _agent_key_id() -> str:
    return public_id("akn")


class VirtualCluster(models.Model):
    public_id = models.CharField(max_length=32, unique=True, default=_cluster_id, editable=False)
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="clusters"
    )
    name = models.CharField(max_length=100)
    created_at = models.DateTimeField(auto_now_add=True)
    # Configuration (read by agents on every heartbeat).
    auto_create_topics = models.BooleanField(default=True)
    default_partitions = models.PositiveIntegerField(default=1)
    default_retention_ms = models.BigIntegerField(default=DEFAULT_RETENTION_MS)
    acls_enabled = models.BooleanField(default=False)
    max_flush_age_ms = models.PositiveIntegerField(default=250)
    max_flush_bytes = models.PositiveIntegerField(default=8 * 1024 * 1024)
    # KIP-848 groups (group.protocol=consumer): Kafka's group.consumer.session.timeout.ms
    # and group.consumer.heartbeat.interval.ms, for every such group of the cluster.
    consumer_session_timeout_ms = models.PositiveIntegerField(default=45_000)
    consumer_heartbeat_interval_ms = models.PositiveIntegerField(default=5_000)
    # floe.topic.type of topics that do not set it: "standard" or "lightning".
    default_topic_type = models.CharField(max_length=16, default="standard")
    # Ripcord: agents keep producing (journaled to the bucket, committed later) and keep
    # serving metadata, groups and committed data while the control plane is unreachable.
    # An agent's --ripcord flag turns it on for that agent whatever this says.
    ripcord = models.BooleanField(default=False)
    # The agent groups whose jobs-role agents lease jobs (compaction, retention, table
    # appends…) and migrations; [] = any group (metadata_store.selectors.agent_runs_jobs).
    jobs_agent_groups = models.JSONField(default=list, blank=True, db_default=[])
    # The cluster's bucket (BYOC): fixed by the first agent that registers (or at
    # creation); agents with another bucket are refused. A URL, never credentials.
    bucket_url = models.CharField(max_length=1024, blank=True, default="")
    # Dynamic broker configs (AlterConfigs on a BROKER resource), name → value; the
    # cluster's, since its agents are interchangeable (metadata_store/broker_configs.py).
    broker_configs = models.JSONField(default=dict, blank=True)

    objects = OrgScopedQuerySet.as_manager()  # the one choke point for tenancy

    class Meta:
        db_table = "virtualclusters_virtualcluster"  # made by virtualclusters, kept
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "name"], name="cluster_name_unique_in_org"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.public_id})"

    CONFIG_FIELDS = (
        "auto_create_topics",
        "default_partitions",
        "default_retention_ms",
        "acls_enabled",
        "max_flush_age_ms",
        "max_flush_bytes",
        "consumer_session_timeout_ms",
        "consumer_heartbeat_interval_ms",
        "default_topic_type",
        "ripcord",
        "jobs_agent_groups",
    )

    def config(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.CONFIG_FIELDS}


class AgentKeyQuerySet(OrgScopedQuerySet["AgentKey"]):
    def active(self) -> AgentKeyQuerySet:
        return self.filter(revoked_at__isnull=True)


class AgentKey(models.Model):
    """A key that lets agents act for exactly one virtual cluster."""

    public_id = models.CharField(max_length=32, unique=True, default=_agent_key_id, editable=False)
    cluster = models.ForeignKey(VirtualCluster, on_delete=models.CASCADE, related_name="agent_keys")
    name = models.CharField(max_length=100)
    display_prefix = models.CharField(max_length=32)
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Agents with this key must be of this agent group (--agent-group); "" = any group.
    agent_group = models.CharField(max_length=63, blank=True, default="", db_default="")

    objects = AgentKeyQuerySet.as_manager()
    org_lookup = "cluster__organization"

    class Meta:
        db_table = "virtualclusters_agentkey"  # made by virtualclusters, kept


BUCKET_SCHEMES = ("file", "s3", "mem")


class BucketMismatch(Exception):
    """An agent came with another bucket than its cluster's; the message names both."""


def bucket_url_clean(url: str) -> str:
    """A bucket URL as stored: file://, s3:// or mem://, and never credentials (those
    stay in the agents' environment: AWS_* variables, instance roles…)."""
    url = (url or "").strip()
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unclosed "[" (an IPv6 host)
        raise ValidationError({"bucket_url": ["Use a file://, s3:// or mem:// URL."]}) from None
    if parts.scheme not in BUCKET_SCHEMES or not (parts.netloc or parts.path):
        raise ValidationError({"bucket_url": ["Use a file://, s3:// or mem:// URL."]})
    if parts.username or parts.password or len(url) > 1024:
        raise ValidationError(
            {"bucket_url": ["A bucket URL of at most 1024 characters, without credentials."]}
        )
    return url


@transaction.atomic
def cluster_bucket_claim(*, cluster: VirtualCluster, bucket_url: str) -> str:
    """The cluster's bucket, fixed by the first agent that names one; an agent naming
    another is refused (`BucketMismatch`) rather than writing where jobs never look."""
    url = bucket_url_clean(bucket_url)
    locked = VirtualCluster.objects.select_for_update().get(pk=cluster.pk)
    if not locked.bucket_url:
        locked.bucket_url = url
        locked.save(update_fields=["bucket_url"])
    elif locked.bucket_url != url:
        raise BucketMismatch(
            f"this agent's bucket {url} is not the bucket of cluster {locked.public_id}, "
            f"{locked.bucket_url}: start the agent with --bucket-url {locked.bucket_url}, "
            "or change the cluster's bucket first (PUT /api/v1/clusters/<id>/bucket/)"
        )
    cluster.bucket_url = locked.bucket_url
    return locked.bucket_url


def agent_key_authenticate(plaintext: str) -> AgentKey | None:
    """The active agent key with this plaintext (with its cluster), or ``None``."""
    if not plaintext or not plaintext.startswith("floe_agent_"):
        return None
    key = (
        AgentKey.objects.active()
        .select_related("cluster")
        .filter(digest=secret_digest(plaintext))
        .first()
    )
    if key is not None:  # at most one write a minute per key, however many agents use it
        now = timezone.now()
        AgentKey.objects.filter(pk=key.pk).filter(
            Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_RESOLUTION)
        ).update(last_used_at=now)
    return key
