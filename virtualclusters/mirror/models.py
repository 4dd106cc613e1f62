"""Migrations from another Kafka into a virtual cluster, offsets kept (issue 30;
docs/ARCHITECTURE.md "Migration")."""

from __future__ import annotations

from django.db import models

from tenancy.ids import public_id
from tenancy.models import OrgScopedQuerySet


def _migration_id() -> str:
    return public_id("mig")


class MigrationQuerySet(OrgScopedQuerySet["Migration"]):
    def running(self) -> MigrationQuerySet:
        return self.filter(state=Migration.State.RUNNING)


class Migration(models.Model):
    """One source Kafka mirrored into one cluster by its jobs-role agents.

    running (a copier leases it, renewing with its report) → stopped (DELETE: every topic
    it still mirrors becomes writable). The copier's lease (`metadata_store.leases`) has
    an epoch and a token per lease and expires on the database's clock, so a report or
    a commit from a superseded or expired lease is refused.
    """

    class State(models.TextChoices):
        RUNNING = "running"
        STOPPED = "stopped"

    public_id = models.CharField(max_length=32, unique=True, default=_migration_id, editable=False)
    cluster = models.ForeignKey(
        "metadata_store.VirtualCluster", on_delete=models.CASCADE, related_name="migrations"
    )
    state = models.CharField(max_length=16, choices=State.choices, default=State.RUNNING)
    source_bootstrap = models.CharField(max_length=1024)
    # {protocol, sasl_mechanism, username, ca}: never the password, which is sealed
    # (tenancy.sealed) in `source_password_sealed` and never shown again.
    source_security = models.JSONField(default=dict, blank=True)
    source_password_sealed = models.TextField(blank=True, default="")
    topics_regex = models.CharField(max_length=1000)
    groups_regex = models.CharField(max_length=1000, blank=True, default="")
    start_from_now = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    stopped_at = models.DateTimeField(null=True, blank=True)
    # The agent that last leased it; the lease itself (epoch, token, expiry) is the
    # metadata store's (`metadata_store.leases`, subject "migration <public id>").
    lease_agent = models.CharField(max_length=64, blank=True, default="")
    # The copier's last report: what it waits for ("" while copying), its error, when.
    waiting_for = models.CharField(max_length=1000, blank=True, default="")
    reported_at = models.DateTimeField(null=True, blank=True)
    # Per group: {"state": …, "error": …, "partitions": [{topic, partition,
    # source_offset, copied_offset}]}, as the copier reported it.
    groups = models.JSONField(default=dict, blank=True)
    # Schema linking (issue 38): a source Schema Registry (Confluent's REST API) whose
    # subjects matching `subjects_regex` the copier's agent imports into the cluster's
    # registry and keeps in sync until the schemas are cut over (or the migration stops).
    # The basic-auth password is sealed as the Kafka source's is.
    schema_registry_url = models.CharField(max_length=1024, blank=True, default="")
    schema_registry_username = models.CharField(max_length=255, blank=True, default="")
    schema_registry_password_sealed = models.TextField(blank=True, default="")
    subjects_regex = models.CharField(max_length=1000, blank=True, default="")
    schemas_cut_over_at = models.DateTimeField(null=True, blank=True)
    # As the linker last reported: {subjects, subjects_copied, versions_copied,
    # last_sync, error, errors: {subject: error}}.
    schema_link = models.JSONField(default=dict, blank=True)

    objects = MigrationQuerySet.as_manager()
    org_lookup = "cluster__organization"

    class Meta:
        db_table = "floe_migration"
        indexes = [models.Index(fields=["cluster", "state"], name="migration_cluster_idx")]

    def __str__(self) -> str:
        return f"migration {self.public_id} ({self.state})"

    @property
    def source_schema_registry(self) -> dict[str, str] | None:
        """The source registry as shown: its URL and username, never the password."""
        if not self.schema_registry_url:
            return None
        return {"url": self.schema_registry_url, "username": self.schema_registry_username}

    @property
    def schemas_linked(self) -> bool:
        """Whether the linker keeps the source registry's subjects in sync now."""
        return (
            bool(self.schema_registry_url)
            and self.state == self.State.RUNNING
            and self.schemas_cut_over_at is None
        )


class MigrationTopic(models.Model):
    """A source topic the migration mirrors: mirroring → cut_over (writable in Floe)."""

    class State(models.TextChoices):
        MIRRORING = "mirroring"
        CUT_OVER = "cut_over"
        FAILED = "failed"  # e.g. a topic of that name that Floe clients wrote

    migration = models.ForeignKey(Migration, on_delete=models.CASCADE, related_name="topics")
    name = models.CharField(max_length=249)
    topic = models.ForeignKey(
        "metadata_store.Topic", on_delete=models.SET_NULL, null=True, blank=True
    )
    state = models.CharField(max_length=16, choices=State.choices, default=State.MIRRORING)
    error = models.TextField(blank=True, default="")
    cut_over_at = models.DateTimeField(null=True, blank=True)
    # As the copier last reported: [{partition, source_log_start, source_end_offset,
    # bytes_copied, error}]; the destination's offsets are read from the partitions.
    partitions = models.JSONField(default=list, blank=True)
    # The source's topic configs copied onto the Floe topic, in force from the cutover
    # on: {name: {"value", "origin": "topic" | "source_default" | "kafka_default"} (and
    # "error" when Floe refused the value, which is then not set)}.
    configs = models.JSONField(default=dict, blank=True)

    objects = OrgScopedQuerySet.as_manager()
    org_lookup = "migration__cluster__organization"

    class Meta:
        db_table = "floe_migration_topic"
        constraints = [
            models.UniqueConstraint(fields=["migration", "name"], name="migration_topic_unique")
        ]
