"""Runs of the background jobs (compaction, retention, orphan cleanup, key compaction,
topic tables' appends)."""

from __future__ import annotations

from django.db import models

from tenancy.ids import public_id
from tenancy.models import OrgScopedQuerySet


def _job_run_id() -> str:
    return public_id("job")


class JobRunQuerySet(OrgScopedQuerySet["JobRun"]):
    def active(self) -> JobRunQuerySet:
        return self.filter(state__in=JobRun.ACTIVE_STATES)


class JobRun(models.Model):
    """One run of a background job (a Spark job plus its metadata swap) for one cluster.

    queued (dispatched by a beat check) → running (a jobs-role agent of the cluster
    leased it) → succeeded or failed; a lease that expires puts it back to queued. At
    most one run per cluster and kind is queued or running at a time.
    """

    class Kind(models.TextChoices):
        COMPACTION = "compaction"
        RETENTION = "retention"
        ORPHAN_CLEANUP = "orphan_cleanup"
        KEY_COMPACTION = "key_compaction"
        TABLE_APPEND = "table_append"

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    ACTIVE_STATES = (State.QUEUED, State.RUNNING)

    public_id = models.CharField(max_length=32, unique=True, default=_job_run_id, editable=False)
    cluster = models.ForeignKey(
        "metadata_store.VirtualCluster", on_delete=models.CASCADE, related_name="job_runs"
    )
    kind = models.CharField(max_length=32, choices=Kind.choices)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    input_files = models.IntegerField(default=0)
    input_bytes = models.BigIntegerField(default=0)
    output_files = models.IntegerField(default=0)
    output_bytes = models.BigIntegerField(default=0)
    error = models.TextField(blank=True, default="")
    details = models.JSONField(default=dict, blank=True)
    # The agent that leased the run, and the token of the lease its current attempt runs
    # under ("": none, or driven without one): the lease itself — epoch, expiry on the
    # database's clock — is the metadata store's (`metadata_store.leases`, "job <id>"),
    # so a result from an earlier, lost or expired lease is recognized and refused.
    lease_agent = models.CharField(max_length=64, blank=True, default="")
    lease_token = models.CharField(max_length=64, blank=True, default="")
    attempts = models.IntegerField(default=0)
    # Progress the leasing agent reports: {"stage": …, "bytes_done": …, "bytes_total": …}.
    progress = models.JSONField(default=dict, blank=True)

    objects = JobRunQuerySet.as_manager()
    org_lookup = "cluster__organization"

    class Meta:
        db_table = "floe_job_run"
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "kind"],
                condition=models.Q(state__in=["queued", "running"]),
                name="job_run_one_active_per_kind",
            )
        ]
        indexes = [models.Index(fields=["cluster", "-created_at"], name="job_run_cluster_idx")]

    def __str__(self) -> str:
        return f"{self.kind} {self.public_id} ({self.state})"

    @property
    def duration_s(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()
