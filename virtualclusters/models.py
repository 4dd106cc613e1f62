"""Virtual clusters, their keys, and the metadata store.

The metadata store tables (topics, partitions, files, the batch index, producer state,
committed group offsets, live agents) are named ``floe_*`` because the hot paths in
``metadata.py`` address them in plain SQL; keep those names stable.
"""

from __future__ import annotations

import uuid

from django.db import models

from controlplane.ids import public_id
from controlplane.models import Organization

DEFAULT_RETENTION_MS = 7 * 24 * 3600 * 1000


def _cluster_id() -> str:
    return public_id("vci")


def _agent_key_id() -> str:
    return public_id("akn")


class VirtualClusterQuerySet(models.QuerySet):
    def for_org(self, org: Organization | None) -> VirtualClusterQuerySet:
        """The one choke point for tenancy: no organization, no clusters."""
        return self.filter(organization=org) if org is not None else self.none()


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

    objects = VirtualClusterQuerySet.as_manager()

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


class AgentKeyQuerySet(models.QuerySet):
    def for_org(self, org: Organization | None) -> AgentKeyQuerySet:
        return self.filter(cluster__organization=org) if org is not None else self.none()

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


# --- the metadata store ------------------------------------------------------------


class Topic(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    cluster = models.ForeignKey(VirtualCluster, on_delete=models.CASCADE, related_name="topics")
    name = models.CharField(max_length=249)
    partition_count = models.PositiveIntegerField()
    configs = models.JSONField(default=dict, blank=True)  # overrides only
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "floe_topic"
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="topic_name_unique")
        ]


class Partition(models.Model):
    topic = models.ForeignKey(Topic, on_delete=models.CASCADE, related_name="partitions")
    index = models.IntegerField()
    high_watermark = models.BigIntegerField(default=0)
    log_start_offset = models.BigIntegerField(default=0)

    class Meta:
        db_table = "floe_partition"
        constraints = [
            models.UniqueConstraint(fields=["topic", "index"], name="partition_unique"),
            # Behind the agent-API validation: offsets can never go negative or cross.
            # (Migration 0006 also refuses any update that moves either one back.)
            models.CheckConstraint(
                condition=models.Q(log_start_offset__gte=0)
                & models.Q(high_watermark__gte=models.F("log_start_offset")),
                name="partition_offsets_ordered",
            ),
        ]


class SegmentFile(models.Model):
    class State(models.TextChoices):
        LIVE = "live"
        REPLACED = "replaced"  # compacted away or expired: delete after the grace period
        DELETED = "deleted"

    cluster = models.ForeignKey(VirtualCluster, on_delete=models.CASCADE, related_name="files")
    key = models.CharField(max_length=512)
    size = models.BigIntegerField()
    level = models.SmallIntegerField(default=0)
    state = models.CharField(max_length=16, choices=State.choices, default=State.LIVE)
    batch_count = models.IntegerField(default=0)
    commit_result = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    unreferenced_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "floe_file"
        constraints = [models.UniqueConstraint(fields=["cluster", "key"], name="file_key_unique")]
        indexes = [models.Index(fields=["cluster", "state", "level"], name="file_state_idx")]


class Batch(models.Model):
    """One record batch: where it lives and which offsets the metadata store gave it."""

    # Offsets are dense and batches never overlap, so (partition, last offset) identifies a
    # batch; fetch plans and offset lookups walk a partition by last offset. No surrogate
    # id: every index on this, the hottest table, costs on every commit.
    pk = models.CompositePrimaryKey("partition", "last_offset")
    partition = models.ForeignKey(Partition, on_delete=models.CASCADE, db_constraint=False)
    base_offset = models.BigIntegerField()
    last_offset = models.BigIntegerField()
    file = models.ForeignKey(SegmentFile, on_delete=models.CASCADE, db_constraint=False)
    position = models.BigIntegerField()
    length = models.IntegerField()
    record_count = models.IntegerField()
    max_timestamp = models.BigIntegerField()
    producer_id = models.BigIntegerField(default=-1)
    producer_epoch = models.SmallIntegerField(default=-1)
    base_sequence = models.IntegerField(default=-1)

    class Meta:
        db_table = "floe_batch"
        indexes = [models.Index(fields=["file"], name="batch_file_idx")]
        constraints = [
            # Key compaction may drop records inside a batch (fewer records than its
            # offset span), never add any; a batch always holds at least one.
            models.CheckConstraint(
                condition=models.Q(base_offset__gte=0)
                & models.Q(record_count__gte=1)
                & models.Q(last_offset__gte=models.F("base_offset") + models.F("record_count") - 1)
                & models.Q(position__gte=0)
                & models.Q(length__gt=0),
                name="batch_offsets_and_bytes_valid",
            ),
        ]


class ProducerState(models.Model):
    """KIP-98: the last sequence each idempotent producer wrote to a partition."""

    partition = models.ForeignKey(Partition, on_delete=models.CASCADE, db_constraint=False)
    producer_id = models.BigIntegerField()
    producer_epoch = models.SmallIntegerField()
    last_sequence = models.IntegerField()
    last_offset = models.BigIntegerField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "floe_producer_state"
        constraints = [
            models.UniqueConstraint(
                fields=["partition", "producer_id"], name="producer_state_unique"
            )
        ]


class ProducerId(models.Model):
    """Producer ids come from this table's sequence; transactional ids keep theirs."""

    cluster = models.ForeignKey(VirtualCluster, on_delete=models.CASCADE)
    transactional_id = models.CharField(max_length=255, null=True, blank=True)
    epoch = models.SmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "floe_producer_id"
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "transactional_id"], name="transactional_id_unique"
            )
        ]


class GroupOffset(models.Model):
    cluster = models.ForeignKey(VirtualCluster, on_delete=models.CASCADE)
    group_id = models.CharField(max_length=255)
    partition = models.ForeignKey(Partition, on_delete=models.CASCADE)
    committed_offset = models.BigIntegerField()
    leader_epoch = models.IntegerField(default=-1)
    metadata = models.TextField(blank=True, default="")
    committed_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "floe_group_offset"
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "group_id", "partition"], name="group_offset_unique"
            )
        ]


class Agent(models.Model):
    cluster = models.ForeignKey(VirtualCluster, on_delete=models.CASCADE, related_name="agents")
    agent_id = models.CharField(max_length=64)
    host = models.CharField(max_length=255)
    port = models.IntegerField()
    zone = models.CharField(max_length=64, blank=True, default="")
    load = models.FloatField(default=0.0)
    started_at = models.DateTimeField(auto_now_add=True)
    last_heartbeat = models.DateTimeField()

    class Meta:
        db_table = "floe_agent"
        constraints = [models.UniqueConstraint(fields=["cluster", "agent_id"], name="agent_unique")]


class GroupReport(models.Model):
    """A consumer group as its coordinator agent last reported it: state, members and
    their assignments (groups.py). Live while `reported_at` is within the agent liveness
    window; committed offsets are `GroupOffset` rows, independent of this."""

    cluster = models.ForeignKey(VirtualCluster, on_delete=models.CASCADE)
    group_id = models.CharField(max_length=255)
    agent_id = models.CharField(max_length=64)
    state = models.CharField(max_length=32)
    protocol_type = models.CharField(max_length=64, blank=True, default="")
    protocol = models.CharField(max_length=255, blank=True, default="")
    generation = models.IntegerField(default=0)
    leader = models.CharField(max_length=255, blank=True, default="")
    members = models.JSONField(default=list, blank=True)
    reported_at = models.DateTimeField()

    class Meta:
        db_table = "floe_group_report"
        constraints = [
            models.UniqueConstraint(fields=["cluster", "group_id"], name="group_report_unique")
        ]


# --- background jobs ----------------------------------------------------------------


def _job_run_id() -> str:
    return public_id("job")


class JobRunQuerySet(models.QuerySet):
    def for_org(self, org: Organization | None) -> JobRunQuerySet:
        return self.filter(cluster__organization=org) if org is not None else self.none()

    def active(self) -> JobRunQuerySet:
        return self.filter(state__in=JobRun.ACTIVE_STATES)


class JobRun(models.Model):
    """One run of a background job (a Spark job plus its metadata swap) for one cluster.

    queued (dispatched by a beat check) → running (a worker took it) → succeeded or
    failed. At most one run per cluster and kind is queued or running at a time.
    """

    class Kind(models.TextChoices):
        COMPACTION = "compaction"
        RETENTION = "retention"
        ORPHAN_CLEANUP = "orphan_cleanup"
        KEY_COMPACTION = "key_compaction"

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    ACTIVE_STATES = (State.QUEUED, State.RUNNING)

    public_id = models.CharField(max_length=32, unique=True, default=_job_run_id, editable=False)
    cluster = models.ForeignKey(VirtualCluster, on_delete=models.CASCADE, related_name="job_runs")
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

    objects = JobRunQuerySet.as_manager()

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


from .security_models import Acl, SaslCredential  # noqa: E402,F401
