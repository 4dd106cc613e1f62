"""Virtual clusters and their agent keys.

The metadata store's tables (topics, partitions, files, the batch index…) are the
``metadata_store`` app's; SASL users and ACLs, group reports and job runs are models of
this app that live in its ``security``, ``groups`` and ``jobs`` packages.
"""

from __future__ import annotations

from django.db import models

from tenancy.ids import public_id
from tenancy.models import Organization, OrgScopedQuerySet

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
    # The cluster's bucket (BYOC): fixed by the first agent that registers (or at
    # creation); agents with another bucket are refused. A URL, never credentials.
    bucket_url = models.CharField(max_length=1024, blank=True, default="")

    objects = OrgScopedQuerySet.as_manager()  # the one choke point for tenancy

    class Meta:
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
    )

    def config(self) -> dict:
        return {name: getattr(self, name) for name in self.CONFIG_FIELDS}


class AgentKeyQuerySet(OrgScopedQuerySet):
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

    objects = AgentKeyQuerySet.as_manager()
    org_lookup = "cluster__organization"


# Models of this app that live beside their services (Django finds models through this
# module). They name VirtualCluster by string, so none of them imports this module.
from virtualclusters.groups.models import GroupReport  # noqa: E402,F401
from virtualclusters.jobs.models import JobRun  # noqa: E402,F401
from virtualclusters.security.models import Acl, SaslCredential  # noqa: E402,F401
from virtualclusters.throughput.models import (  # noqa: E402,F401
    GroupLagSample,
    ThroughputSample,
    TopicConsumed,
)
