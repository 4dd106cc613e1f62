"""A pipeline of a virtual cluster, its configuration versions, and the last report of
each agent that runs it (imported into ``virtualclusters/models.py``)."""

from __future__ import annotations

from django.db import models

from tenancy.ids import public_id
from tenancy.models import OrgScopedQuerySet


def _pipeline_id() -> str:
    return public_id("ppl")


class Pipeline(models.Model):
    """A named pipeline of one cluster: running (its agents run the current version) or
    paused. Its Kafka principal is the SASL user ``pipeline-<name>`` (`principal`), whose
    generated password is kept sealed (tenancy.sealed) to hand to the agents."""

    class State(models.TextChoices):
        RUNNING = "running"
        PAUSED = "paused"

    public_id = models.CharField(max_length=32, unique=True, default=_pipeline_id, editable=False)
    cluster = models.ForeignKey(
        "metadata_store.VirtualCluster", on_delete=models.CASCADE, related_name="pipelines"
    )
    name = models.CharField(max_length=100)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PAUSED)
    # The version the agents run (the newest: a new version becomes current at once).
    current_version = models.PositiveIntegerField(default=1)
    # The SASL user's password, sealed; the user and its ACLs are `principal`'s.
    password_sealed = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = OrgScopedQuerySet.as_manager()
    org_lookup = "cluster__organization"

    class Meta:
        db_table = "floe_pipeline"
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="pipeline_name_unique")
        ]
        indexes = [models.Index(fields=["cluster", "state"], name="pipeline_cluster_state_idx")]

    def __str__(self) -> str:
        return f"pipeline {self.name} ({self.public_id}, {self.state})"


class PipelineVersion(models.Model):
    """One configuration of a pipeline, as written (`config`) and as the engine reads it
    (`canonical`, ``PipelineSpec.canonical()``); never changed once made."""

    pipeline = models.ForeignKey(Pipeline, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    config = models.TextField()
    canonical = models.JSONField()
    created_by = models.CharField(max_length=255, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = OrgScopedQuerySet.as_manager()
    org_lookup = "pipeline__cluster__organization"

    class Meta:
        db_table = "floe_pipeline_version"
        constraints = [
            models.UniqueConstraint(fields=["pipeline", "version"], name="pipeline_version_unique")
        ]

    def __str__(self) -> str:
        return f"pipeline {self.pipeline_id} v{self.version}"


class PipelineReport(models.Model):
    """The last report of one agent about one pipeline (``pipelines/report``), and the
    one before it: the throughput is the counters' rise between them."""

    pipeline = models.ForeignKey(Pipeline, on_delete=models.CASCADE, related_name="reports")
    agent_id = models.CharField(max_length=64)
    version = models.PositiveIntegerField()
    state = models.CharField(max_length=16)  # running | stopped | failing
    reported_at = models.DateTimeField()
    records_in = models.BigIntegerField(default=0)
    records_out = models.BigIntegerField(default=0)
    records_dead_lettered = models.BigIntegerField(default=0)
    records_filtered = models.BigIntegerField(default=0)
    lag = models.BigIntegerField(null=True, blank=True)
    # The newest errors the agent reported, newest last: [{"at", "message"}] (≤ 20).
    errors = models.JSONField(default=list, blank=True)
    # The report before this one (for the rates): when, and its records in and out.
    previous_at = models.DateTimeField(null=True, blank=True)
    previous_records_in = models.BigIntegerField(null=True, blank=True)
    previous_records_out = models.BigIntegerField(null=True, blank=True)

    objects = OrgScopedQuerySet.as_manager()
    org_lookup = "pipeline__cluster__organization"

    class Meta:
        db_table = "floe_pipeline_report"
        constraints = [
            models.UniqueConstraint(fields=["pipeline", "agent_id"], name="pipeline_report_unique")
        ]

    def __str__(self) -> str:
        return f"pipeline {self.pipeline_id} on {self.agent_id}"
