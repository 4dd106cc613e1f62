"""The metadata store: topics, partitions, segment files, the batch index, producer
state, committed group offsets and live agents.

The tables are named ``floe_*`` because the hot paths in ``store.py`` address them in
plain SQL; keep those names stable. Every row belongs to one virtual cluster (directly
or through its topic), and every query here is scoped by cluster.
"""

from __future__ import annotations

import uuid

from django.contrib.postgres.fields import ArrayField
from django.db import models

# The clusters and their agent keys, which every row here hangs from (Django finds models
# through this module).
from metadata_store.clusters import AgentKey, VirtualCluster  # noqa: F401


class Topic(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    cluster = models.ForeignKey(
        "metadata_store.VirtualCluster", on_delete=models.CASCADE, related_name="topics"
    )
    name = models.CharField(max_length=249)
    partition_count = models.PositiveIntegerField()
    configs = models.JSONField(default=dict, blank=True)  # overrides only
    created_at = models.DateTimeField(auto_now_add=True)
    # The public id of the migration mirroring this topic from another Kafka ("": none):
    # clients may read it but not produce to it (docs/ARCHITECTURE.md "Migration").
    mirrored_by = models.CharField(max_length=32, blank=True, default="")

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
    # Under a migration (its topic's `mirrored_by`): only mirrored commits move the high
    # watermark (``metadata_store.mirroring``; a trigger of migration 0016 refuses others).
    mirrored = models.BooleanField(default=False, db_default=False)

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

    cluster = models.ForeignKey(  # file_key_unique and file_state_idx lead with it
        "metadata_store.VirtualCluster",
        on_delete=models.CASCADE,
        related_name="files",
        db_index=False,
    )
    key = models.CharField(max_length=512)
    size = models.BigIntegerField()
    level = models.SmallIntegerField(default=0)
    state = models.CharField(max_length=16, choices=State.choices, default=State.LIVE)
    batch_count = models.IntegerField(default=0)
    # The commit's answer, for a retry of it: each batch's base offset, its error code
    # (None: all 0), its log start offset (None: 0, or -1 when refused) and the positions
    # of idempotent duplicates (None: none). Files committed before metadata_store 0008
    # have theirs in `commit_result` instead.
    commit_offsets = ArrayField(models.BigIntegerField(), null=True, blank=True)
    commit_errors = ArrayField(models.IntegerField(), null=True, blank=True)
    commit_log_starts = ArrayField(models.BigIntegerField(), null=True, blank=True)
    commit_duplicates = ArrayField(models.IntegerField(), null=True, blank=True)
    commit_result = models.JSONField(null=True, blank=True)
    # The record bytes of the batches the commit gave offsets to (not an idempotent
    # producer's resent duplicates, which the file holds too); None before 0007.
    data_bytes = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    unreferenced_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "floe_file"
        constraints = [models.UniqueConstraint(fields=["cluster", "key"], name="file_key_unique")]
        indexes = [models.Index(fields=["cluster", "state", "level"], name="file_state_idx")]


class Batch(models.Model):
    """One partition run of a file: consecutive record batches of one partition, side by
    side in one file, with the offsets the metadata store gave them.

    A file holds one run per partition it writes (agents lay segments out that way), so
    the index grows with files, not with batches. The batches inside a run are found by
    walking their headers; in level-0 files their baseOffset fields are the producers',
    and readers rewrite them from the run's base offset, batch by batch (dense); in
    compacted files they already carry their offsets (possibly with gaps, after key
    compaction). Offsets never overlap, so (partition, last offset) identifies a run.
    No surrogate id: every index on this, the hottest table, costs on every commit.
    Idempotent producers' recent batches are remembered in `ProducerState`.
    """

    pk = models.CompositePrimaryKey("partition", "last_offset")
    # The primary key (partition, last_offset) and batch_file_idx serve the lookups by
    # these two: no index of their own (each would cost on every commit).
    partition = models.ForeignKey(
        Partition, on_delete=models.CASCADE, db_constraint=False, db_index=False
    )
    base_offset = models.BigIntegerField()
    last_offset = models.BigIntegerField()
    file = models.ForeignKey(
        SegmentFile, on_delete=models.CASCADE, db_constraint=False, db_index=False
    )
    position = models.BigIntegerField()
    length = models.IntegerField()
    record_count = models.IntegerField()
    batch_count = models.IntegerField(default=1)
    max_timestamp = models.BigIntegerField()

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
            models.CheckConstraint(
                condition=models.Q(batch_count__gte=1)
                & models.Q(batch_count__lte=models.F("record_count")),
                name="run_batch_count_valid",
            ),
        ]


class ProducerState(models.Model):
    """KIP-98: the last sequence each idempotent producer wrote to a partition, and the
    base sequence and base offset of its last (up to 5) batches, oldest first, so that a
    retried batch is recognised and answered with its original offset (Kafka keeps the
    same five)."""

    partition = models.ForeignKey(Partition, on_delete=models.CASCADE, db_constraint=False)
    producer_id = models.BigIntegerField()
    producer_epoch = models.SmallIntegerField()
    last_sequence = models.IntegerField()
    last_offset = models.BigIntegerField()
    recent_sequences = ArrayField(models.IntegerField(), default=list)
    recent_offsets = ArrayField(models.BigIntegerField(), default=list)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "floe_producer_state"
        constraints = [
            models.UniqueConstraint(
                fields=["partition", "producer_id"], name="producer_state_unique"
            )
        ]


class ProducerId(models.Model):
    """Producer ids come from this table's sequence; transactional ids keep theirs.

    A transactional id's row is also its transaction (KIP-98): the state, the timeout and
    when the open transaction began. Every transactional call locks this row, so the
    state, the epoch and the partitions of the transaction change together.
    """

    class TxnState(models.TextChoices):
        EMPTY = "empty"
        ONGOING = "ongoing"
        COMPLETE_COMMIT = "complete_commit"
        COMPLETE_ABORT = "complete_abort"

    cluster = models.ForeignKey("metadata_store.VirtualCluster", on_delete=models.CASCADE)
    transactional_id = models.CharField(max_length=255, null=True, blank=True)
    epoch = models.SmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    txn_state = models.CharField(
        max_length=16, choices=TxnState.choices, default=TxnState.EMPTY, db_default="empty"
    )
    txn_timeout_ms = models.IntegerField(default=60_000, db_default=60_000)
    txn_started_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "floe_producer_id"
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "transactional_id"], name="transactional_id_unique"
            )
        ]


class TransactionPartition(models.Model):
    """A partition of an open transaction, and the offset of the transaction's first
    batch in it (none written yet: NULL). The smallest first offset of a partition's open
    transactions is its last stable offset (LSO): read_committed consumers stop there."""

    producer = models.ForeignKey(ProducerId, on_delete=models.CASCADE)
    partition = models.ForeignKey(Partition, on_delete=models.CASCADE, db_constraint=False)
    first_offset = models.BigIntegerField(null=True, blank=True)

    class Meta:
        db_table = "floe_txn_partition"
        constraints = [
            models.UniqueConstraint(fields=["producer", "partition"], name="txn_partition_unique")
        ]


class TransactionOffset(models.Model):
    """A consumer-group offset sent to an open transaction (TxnOffsetCommit): it becomes
    the group's committed offset when the transaction commits, and vanishes if it aborts."""

    producer = models.ForeignKey(ProducerId, on_delete=models.CASCADE)
    group_id = models.CharField(max_length=255)
    partition = models.ForeignKey(Partition, on_delete=models.CASCADE, db_constraint=False)
    committed_offset = models.BigIntegerField()
    leader_epoch = models.IntegerField(default=-1)
    metadata = models.BinaryField(blank=True, default=b"")  # Kafka's string, NUL and all

    class Meta:
        db_table = "floe_txn_offset"
        constraints = [
            models.UniqueConstraint(
                fields=["producer", "group_id", "partition"], name="txn_offset_unique"
            )
        ]


class TransactionMarker(models.Model):
    """A commit or abort marker (a Kafka control batch) at its own offset of a partition.

    Markers hold no record data, so they live here rather than in a file: the fetch plan
    names them among the runs and the agent builds the control batch. An abort marker's
    `first_offset` (the transaction's first batch in the partition) makes it an entry of
    the aborted-transactions list read_committed fetches get.
    """

    pk = models.CompositePrimaryKey("partition", "marker_offset")
    partition = models.ForeignKey(Partition, on_delete=models.CASCADE, db_constraint=False)
    marker_offset = models.BigIntegerField()
    producer_id = models.BigIntegerField()
    producer_epoch = models.SmallIntegerField()
    committed = models.BooleanField()
    first_offset = models.BigIntegerField(null=True, blank=True)
    timestamp = models.BigIntegerField()

    class Meta:
        db_table = "floe_txn_marker"


class GroupOffset(models.Model):
    cluster = models.ForeignKey("metadata_store.VirtualCluster", on_delete=models.CASCADE)
    group_id = models.CharField(max_length=255)
    partition = models.ForeignKey(Partition, on_delete=models.CASCADE)
    committed_offset = models.BigIntegerField()
    leader_epoch = models.IntegerField(default=-1)
    metadata = models.BinaryField(blank=True, default=b"")  # Kafka's string, NUL and all
    committed_at = models.DateTimeField(auto_now=True)
    # Written by a migration's copier (the source's offset), not by a client of Floe: a
    # group whose offsets are all mirrored is still copied to (metadata_store.group_offsets).
    mirrored = models.BooleanField(default=False, db_default=False)

    class Meta:
        db_table = "floe_group_offset"
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "group_id", "partition"], name="group_offset_unique"
            )
        ]


class Agent(models.Model):
    cluster = models.ForeignKey(
        "metadata_store.VirtualCluster", on_delete=models.CASCADE, related_name="agents"
    )
    agent_id = models.CharField(max_length=64)
    host = models.CharField(max_length=255)
    port = models.IntegerField()
    zone = models.CharField(max_length=64, blank=True, default="")
    # Clients of an agent only learn the agents of its group (--agent-group) ...
    agent_group = models.CharField(max_length=63, default="default", db_default="default")
    # ... that have a listener of their kind: [{"name", "protocol", "host", "port"}]
    # (advertised addresses; host/port above are the first's; [] from older agents).
    listeners = models.JSONField(default=list, blank=True, db_default=[])
    load = models.FloatField(default=0.0)
    http_port = models.IntegerField(default=0)  # /metrics and the zone's peer channel
    # The schema-registry role's REST API at host:port (0: not served); listed per group.
    schema_registry_port = models.IntegerField(default=0, db_default=0)
    version = models.CharField(max_length=32, blank=True, default="")
    roles = models.JSONField(default=list, blank=True)
    stats = models.JSONField(default=dict, blank=True)  # read-path counters, last heartbeat
    started_at = models.DateTimeField(auto_now_add=True)
    last_heartbeat = models.DateTimeField()

    class Meta:
        db_table = "floe_agent"
        constraints = [models.UniqueConstraint(fields=["cluster", "agent_id"], name="agent_unique")]


class GroupLease(models.Model):
    """Who coordinates a consumer group, and the group as of its last completed rebalance.

    The lease (`agent_id`, `epoch`, `expires_at`) is taken and renewed through the agent
    API (`metadata_store.group_leases`); `expires_at` is the database's clock plus the
    lease's ttl, so no agent's clock decides it. `epoch` grows on every acquisition and
    fences the previous holder: a state save or an offset commit carrying another epoch,
    or made after the lease expired, is refused. The group's state (generation, protocol,
    leader, members with their protocols and assignments) is what a new holder loads.
    The row outlives its holders (the epoch must never repeat)."""

    cluster = models.ForeignKey("metadata_store.VirtualCluster", on_delete=models.CASCADE)
    group_id = models.CharField(max_length=255)
    agent_id = models.CharField(max_length=64)
    epoch = models.BigIntegerField()
    expires_at = models.DateTimeField()
    generation = models.IntegerField(default=0)
    protocol_type = models.CharField(max_length=255, blank=True, default="")
    protocol_name = models.CharField(max_length=255, blank=True, default="")
    leader = models.CharField(max_length=255, blank=True, default="")
    # [{member_id, group_instance_id, client_id, client_host, session_timeout_ms,
    #   rebalance_timeout_ms, protocols: [{name, metadata (base64)}], assignment (base64)}]
    members = models.JSONField(default=list, blank=True)
    # "classic" (JoinGroup/SyncGroup) or "consumer" (KIP-848, agents.groups.consumer:
    # members carry their epochs, subscriptions and partitions, `extra` the assignment
    # epoch and the subscribed topics).
    group_type = models.CharField(max_length=16, default="classic")
    extra = models.JSONField(default=dict, blank=True)
    # When a member first joined the group in Floe (its first save with members): from
    # then on a migration never copies the source's offsets over the group's.
    joined_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "floe_group_lease"
        constraints = [
            models.UniqueConstraint(fields=["cluster", "group_id"], name="group_lease_unique"),
            models.CheckConstraint(condition=models.Q(epoch__gte=1), name="group_lease_epoch"),
        ]


class Lease(models.Model):
    """A lease on one piece of a cluster's background work — a migration's copier, a job
    run — held by one agent (`metadata_store.leases`: the one rule for both).

    `subject` names the work ("migration mig_…", "job jr_…"). `epoch` grows on every new
    lease of the subject and `token` is new with it, so a holder that was superseded can
    never act again; `expires_at` is the database's clock plus the lease's length, so no
    web process's or agent's clock decides it. The row outlives its holders (the epoch
    must never repeat); an ended lease is one that expired at its end."""

    cluster = models.ForeignKey("metadata_store.VirtualCluster", on_delete=models.CASCADE)
    subject = models.CharField(max_length=64)
    holder = models.CharField(max_length=64)
    epoch = models.BigIntegerField()
    token = models.CharField(max_length=64)
    expires_at = models.DateTimeField()

    class Meta:
        db_table = "floe_lease"
        constraints = [
            models.UniqueConstraint(fields=["cluster", "subject"], name="lease_unique"),
            models.CheckConstraint(condition=models.Q(epoch__gte=1), name="lease_epoch"),
        ]

    def __str__(self) -> str:
        return f"lease {self.subject} epoch {self.epoch} ({self.holder})"


class ShareGroup(models.Model):
    """A KIP-932 share group: its members as their last heartbeats left them, and its
    `share.*` configuration (overrides only). Membership needs no coordinator's memory:
    every member is assigned every partition of the topics it subscribes to (the
    partitions' records are shared record by record, `SharePartition`), so any agent
    answers any member's heartbeat from this row (`metadata_store.share_groups`)."""

    cluster = models.ForeignKey("metadata_store.VirtualCluster", on_delete=models.CASCADE)
    group_id = models.CharField(max_length=255)
    # Grows whenever the membership or a subscription changes.
    group_epoch = models.IntegerField(default=0)
    # {member_id: {member_epoch, client_id, client_host, rack_id, topics: [names],
    #  agent_id, expires_ms (epoch ms: last heartbeat + session timeout)}}
    members = models.JSONField(default=dict, blank=True)
    configs = models.JSONField(default=dict, blank=True)  # share.* overrides
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "floe_share_group"
        constraints = [
            models.UniqueConstraint(fields=["cluster", "group_id"], name="share_group_unique")
        ]


class SharePartition(models.Model):
    """One partition as a share group reads it (KIP-932's share-partition state).

    Offsets below `start_offset` are done with (acknowledged or archived); offsets from
    `end_offset` on were never acquired. Between them, `in_flight` lists consecutive
    ranges covering [start_offset, end_offset) exactly, each
    ``[first, last, state, delivery_count, member_id, lock_deadline_ms]`` with Kafka's
    record states (0 available, 1 acquired, 2 acknowledged, 4 archived); the member and
    deadline matter only while acquired. One row a partition: a share fetch acquires a
    range in one statement and a batch of acknowledgements is one more, so the store's
    work grows with fetches, not records."""

    cluster = models.ForeignKey("metadata_store.VirtualCluster", on_delete=models.CASCADE)
    group_id = models.CharField(max_length=255)
    partition = models.ForeignKey(Partition, on_delete=models.CASCADE)
    start_offset = models.BigIntegerField()
    end_offset = models.BigIntegerField()
    in_flight = models.JSONField(default=list, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "floe_share_partition"
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "group_id", "partition"], name="share_partition_unique"
            ),
            models.CheckConstraint(
                condition=models.Q(end_offset__gte=models.F("start_offset")),
                name="share_partition_range",
            ),
        ]
