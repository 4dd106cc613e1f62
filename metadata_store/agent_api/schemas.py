"""The shape and bounds of every agent-API request body, in one place.

Agents run in customers' environments: a bug, an old version or a stolen key can send
anything. Each endpoint decodes its body straight into one of these types (``msgspec``:
decoding and validation in one pass, in C, which matters on the commit path); a body
that does not fit is refused with HTTP 400 naming the field (``$.batches[3].records``),
before any of it reaches the metadata store. Unknown fields are ignored, so an agent
newer than the control plane can still talk to it.

The bounds are those of the Kafka protocol's own types (int16/int32/int64) unless a
tighter one is stated; the database keeps CHECK constraints behind them
(virtualclusters migration 0006) so that a missed check still cannot make an offset negative or move one back.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from typing import Annotated, Any, Literal, TypeVar

import msgspec
from msgspec import Meta, Struct

INT16 = Annotated[int, Meta(ge=-(2**15), le=2**15 - 1)]
INT32 = Annotated[int, Meta(ge=-(2**31), le=2**31 - 1)]
INT64 = Annotated[int, Meta(ge=-(2**63), le=2**63 - 1)]
PARTITION = Annotated[int, Meta(ge=0, le=2**31 - 1)]
OFFSET = Annotated[int, Meta(ge=0, le=2**62)]  # dense offsets from 0; room for growth
BYTES = Annotated[int, Meta(ge=0, le=2**40)]  # positions and sizes in a file (≤ 1 TiB)
NAME = Annotated[str, Meta(max_length=1_000)]  # names the services check further
SHORT = Annotated[str, Meta(max_length=255)]
AGENT_ID = Annotated[str, Meta(min_length=1, max_length=64)]
ISOLATION = Annotated[int, Meta(ge=0, le=1)]  # KIP-98: 0 read_uncommitted, 1 read_committed
LEASE_EPOCH = Annotated[int, Meta(ge=1, le=2**62)]  # a group lease's fencing token

# A commit carries one entry per record batch of a segment. Agents seal a segment at
# `agents.write_path.MAX_SEGMENT_BATCHES` (half this), so a real commit never nears it.
MAX_COMMIT_BATCHES = 100_000
MAX_ITEMS = 100_000  # any other list: partitions, topics, offsets, groups, ACLs


_Item = TypeVar("_Item")
Items = Annotated[list[_Item], Meta(max_length=MAX_ITEMS)]  # `Items[X]`: a bounded list of X


class _Body(Struct, forbid_unknown_fields=False, frozen=True):
    """Every body is a JSON object; unknown fields are ignored.

    Subclasses inherit `frozen` at run time but say it again: type checkers read it
    per class (PEP 681's dataclass_transform), as msgspec advises."""


# --- data path -------------------------------------------------------------------------


class CommitBatch(_Body, frozen=True):
    """One record batch of a segment file, or several side by side of one partition that
    carry no producer id (`batch_count`; docs/AGENT_API.md "commit")."""

    topic_id: uuid.UUID
    partition: PARTITION
    pos: BYTES
    len: Annotated[int, Meta(gt=0, le=2**31 - 1)]
    # Kafka's batch header holds an int32 count; a batch has at least one record.
    records: Annotated[int, Meta(ge=1, le=2**31 - 1)]
    base_ts: INT64 = -1
    max_ts: INT64 = -1
    producer_id: Annotated[int, Meta(ge=-1, le=2**63 - 1)] = -1
    producer_epoch: Annotated[int, Meta(ge=-1, le=2**15 - 1)] = -1
    base_sequence: Annotated[int, Meta(ge=-1, le=2**31 - 1)] = -1
    transactional: bool = False  # KIP-98: part of a transaction (the batch attribute)
    # Batches this entry covers: `records`, `len` and `max_ts` are then their totals and
    # maximum, and the answer's base offset is the first one's (the agent knows the rest).
    batch_count: Annotated[int, Meta(ge=1, le=2**31 - 1)] = 1


class CommitRequest(_Body, frozen=True):
    file_key: Annotated[str, Meta(min_length=1, max_length=512)]
    size: Annotated[int, Meta(gt=0, le=2**40)]
    batches: Annotated[list[CommitBatch], Meta(max_length=MAX_COMMIT_BATCHES)]


# Files in one `commit-files` call: an agent's journal entries sequenced together after an
# outage (agents/write_path.py). Their batches together stay under MAX_COMMIT_BATCHES.
MAX_COMMIT_FILES = 64


class CommitFilesRequest(_Body, frozen=True):
    files: Annotated[list[CommitRequest], Meta(min_length=1, max_length=MAX_COMMIT_FILES)]


class MirrorBatch(_Body, frozen=True):
    """One source batch of a mirrored segment file (or several side by side, contiguous
    in offsets), at the source's offsets (docs/AGENT_API.md "mirror/commit")."""

    topic_id: uuid.UUID
    partition: PARTITION
    base_offset: OFFSET
    last_offset: OFFSET
    records: Annotated[int, Meta(ge=1, le=2**31 - 1)]
    pos: BYTES
    len: Annotated[int, Meta(gt=0, le=2**31 - 1)]
    max_ts: INT64 = -1
    batch_count: Annotated[int, Meta(ge=1, le=2**31 - 1)] = 1


class MirrorLogStart(_Body, frozen=True):
    topic_id: uuid.UUID
    partition: PARTITION
    offset: OFFSET


class MirrorMarker(_Body, frozen=True):
    """A source's transaction marker (control batch) at its offset; an abort names its
    transaction's first offset in the partition."""

    topic_id: uuid.UUID
    partition: PARTITION
    offset: OFFSET
    producer_id: Annotated[int, Meta(ge=0, le=2**63 - 1)]
    producer_epoch: Annotated[int, Meta(ge=0, le=2**15 - 1)]
    committed: bool
    first_offset: OFFSET | None = None
    timestamp: INT64 = -1


class MirrorCommitRequest(_Body, frozen=True):
    """A mirrored file (`file_key` None: only log start offsets and markers), committed
    under the migration's lease (its id and the lease's token: a superseded or expired
    lease is refused, 409)."""

    migration_id: Annotated[str, Meta(min_length=1, max_length=32)]
    lease: Annotated[str, Meta(min_length=1, max_length=64)]
    file_key: Annotated[str, Meta(min_length=1, max_length=512)] | None = None
    size: BYTES = 0
    batches: Annotated[list[MirrorBatch], Meta(max_length=MAX_COMMIT_BATCHES)] = []
    log_starts: Items[MirrorLogStart] = []
    markers: Annotated[list[MirrorMarker], Meta(max_length=MAX_COMMIT_BATCHES)] = []


def validate_mirror_commit(request: MirrorCommitRequest, *, cluster_prefix: str) -> None:
    """What the types cannot say: the file is the cluster's and holds its batches, in file
    order without overlaps, each spanning at least its records. `BadBody` names it."""
    for i, m in enumerate(request.markers):
        if not m.committed and (m.first_offset is None or m.first_offset > m.offset):
            raise BadBody(f"$.markers[{i}]: an abort marker names its transaction's first offset")
    if request.file_key is None:
        if request.batches:
            raise BadBody("$.batches: batches need a file_key")
        return
    if not request.file_key.startswith(cluster_prefix) or ".." in request.file_key:
        raise BadBody(f"file_key must be a path under '{cluster_prefix}'")
    end_of_previous = 0
    for i, b in enumerate(request.batches):
        if b.pos < end_of_previous or b.pos + b.len > request.size:
            raise BadBody(f"$.batches[{i}]: bytes {b.pos}..{b.pos + b.len} out of file order")
        if b.last_offset - b.base_offset + 1 < b.records:
            raise BadBody(
                f"$.batches[{i}]: offsets {b.base_offset}..{b.last_offset} hold fewer than its records"
            )
        end_of_previous = b.pos + b.len


class FetchPartition(_Body, omit_defaults=True, frozen=True):
    topic_id: uuid.UUID
    partition: PARTITION
    offset: INT64 = 0  # out of range is a Kafka answer (OFFSET_OUT_OF_RANGE), not a 400
    max_bytes: Annotated[int, Meta(ge=0, le=2**31 - 1)] | None = None


class FetchPlanRequest(_Body, frozen=True):
    partitions: Items[FetchPartition]
    max_bytes: Annotated[int, Meta(ge=0, le=2**31 - 1)] = 50 * 1024 * 1024
    isolation_level: ISOLATION = 0


class TailFeedRequest(_Body, frozen=True):
    """The tail feed's long-poll: what came after `after` of `epoch` ("": none yet)."""

    epoch: Annotated[str, Meta(max_length=32)] = ""
    after: Annotated[int, Meta(ge=0, le=2**62)] = 0
    wait_ms: Annotated[int, Meta(ge=0, le=10_000)] = 5_000


class ListOffsetsPartition(_Body, frozen=True):
    topic_id: uuid.UUID
    partition: PARTITION
    timestamp: INT64 = -1  # -1 latest, -2 earliest, -3 max timestamp, else a time
    isolation_level: ISOLATION = 0  # read_committed's latest is the last stable offset


class ListOffsetsRequest(_Body, frozen=True):
    partitions: Items[ListOffsetsPartition]


class DeleteRecordsPartition(_Body, frozen=True):
    topic_id: uuid.UUID
    partition: PARTITION
    offset: Annotated[int, Meta(ge=-1, le=2**63 - 1)] = -1  # -1: the high watermark


class DeleteRecordsRequest(_Body, frozen=True):
    partitions: Items[DeleteRecordsPartition]


class InitProducerIdRequest(_Body, frozen=True):
    transactional_id: SHORT | None = None
    transaction_timeout_ms: Annotated[int, Meta(ge=-1, le=2**31 - 1)] = 60_000
    producer_id: Annotated[int, Meta(ge=-1, le=2**63 - 1)] = -1
    producer_epoch: Annotated[int, Meta(ge=-1, le=2**15 - 1)] = -1


# --- agents ----------------------------------------------------------------------------


COUNT = Annotated[int, Meta(ge=0, le=2**62)]  # a counter since the agent started
ZONE = Annotated[str, Meta(max_length=64)]


class AgentReadStats(_Body, frozen=True):
    """The read path's counters since the agent started (docs/AGENT_API.md)."""

    get_requests: COUNT = 0  # object-store GETs this agent made
    get_bytes: COUNT = 0
    peer_served_bytes: COUNT = 0  # chunk bytes this agent sent to agents of its zone
    peer_fetched_bytes: COUNT = 0  # chunk bytes this agent got from them
    cache_hits: COUNT = 0
    cache_misses: COUNT = 0
    # Record bytes sent to consumers, by the zone the client named ("" = no hint,
    # "other" = a zone no agent of the cluster is in); few keys: agents bound them.
    client_bytes_by_zone: Annotated[dict[ZONE, COUNT], Meta(max_length=64)] = {}
    # Committed batches with their records decompressed (billing's logical bytes).
    written_uncompressed_bytes: COUNT = 0
    # Record batch bytes and records sent to consumers, by topic id: [bytes, records]
    # (the throughput out's source; the agent reports at most 2000 topics).
    consumed_by_topic: Annotated[
        dict[uuid.UUID, Annotated[list[COUNT], Meta(min_length=2, max_length=2)]],
        Meta(max_length=2000),
    ] = {}
    # Fetch plans from the tail index and from fetch-plan calls; what the index holds;
    # the tail feed's lag (docs/AGENT_API.md "tail-feed").
    tail_plans: COUNT = 0
    control_plane_plans: COUNT = 0
    tail_index_partitions: COUNT = 0
    tail_index_runs: COUNT = 0
    tail_feed_lag_ms: COUNT = 0
    # Journal entries in the bucket (acknowledged) whose commit has not answered, and
    # the oldest one's age (lightning topics, Ripcord).
    journal_unsequenced_bytes: COUNT = 0
    journal_oldest_ms: COUNT = 0
    # The Diagnostics page's (agents/client_stats.py), since the agent started: segment
    # files committed and their bytes, why segments were sealed, and per client id
    # (the first 32; the rest under "") [produce requests, batches, records].
    uptime_s: COUNT = 0
    files_committed: COUNT = 0
    file_bytes_committed: COUNT = 0
    flush_reasons: Annotated[
        dict[Annotated[str, Meta(max_length=32)], COUNT], Meta(max_length=8)
    ] = {}
    producers: Annotated[
        dict[
            Annotated[str, Meta(max_length=255)],
            Annotated[list[COUNT], Meta(min_length=3, max_length=3)],
        ],
        Meta(max_length=33),
    ] = {}


SECURITY_PROTOCOL = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
# An agent group's name (the agent's --agent-group): lowercase letters, digits, dashes.
AGENT_GROUP = Annotated[str, Meta(pattern=r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")]


class AgentListener(_Body, frozen=True):
    """One Kafka listener of an agent as clients are told of it (its advertised address)."""

    name: Annotated[str, Meta(pattern=r"^[A-Z][A-Z0-9_]{0,31}$")]
    protocol: SECURITY_PROTOCOL
    host: SHORT
    port: Annotated[int, Meta(ge=1, le=65_535)]


class HeartbeatRequest(_Body, frozen=True):
    agent_id: AGENT_ID
    host: SHORT = "127.0.0.1"
    port: Annotated[int, Meta(ge=0, le=65_535)] = 9092
    # Every Kafka listener (host/port above: the first); empty from older agents.
    listeners: Annotated[list[AgentListener], Meta(max_length=16)] = []
    agent_group: AGENT_GROUP = "default"
    zone: ZONE = ""
    load: Annotated[float, Meta(ge=0, le=1e9)] = 0.0
    # The agent's HTTP port (/metrics, and the zone's peer channel); 0 = none.
    http_port: Annotated[int, Meta(ge=0, le=65_535)] = 0
    # The schema-registry role's REST API port (at `host`); 0 = not served.
    schema_registry_port: Annotated[int, Meta(ge=0, le=65_535)] = 0
    version: Annotated[str, Meta(max_length=32)] = ""
    roles: Annotated[
        list[Annotated[str, Meta(min_length=1, max_length=32)]], Meta(max_length=8)
    ] = []
    stats: AgentReadStats | None = None
    # The bucket the agent writes to (a URL, never credentials); register checks it
    # against the cluster's. Empty from agents older than bring-your-own-cloud.
    bucket_url: Annotated[str, Meta(max_length=1024)] = ""


# --- jobs (docs/AGENT_API.md "jobs/…") ---------------------------------------------------

LEASE_S = Annotated[int, Meta(ge=10, le=3600)]
RUN_ID = Annotated[str, Meta(min_length=1, max_length=32)]
TOKEN = Annotated[str, Meta(min_length=1, max_length=64)]


class JobLeaseRequest(_Body, frozen=True):
    agent_id: AGENT_ID
    lease_s: LEASE_S = 120


class JournalLeaseRequest(_Body, frozen=True):
    """Take or renew the lease of an agent's journal (docs/AGENT_API.md "journal/lease")."""

    journal: Annotated[str, Meta(min_length=3, max_length=200, pattern=r"^[^/\s]+/[^/\s]+$")]
    agent_id: AGENT_ID
    lease_s: LEASE_S = 15
    token: TOKEN | None = None


class JournalStatusRequest(_Body, frozen=True):
    """Which of these journal entries the metadata store has as files."""

    file_keys: Annotated[list[Annotated[str, Meta(max_length=512)]], Meta(max_length=MAX_ITEMS)]


class MigrationLeaseRequest(_Body, frozen=True):
    agent_id: AGENT_ID
    lease_s: LEASE_S = 60


class MigrationPartitionState(_Body, frozen=True):
    """A mirrored partition as the copier sees it (the destination's offsets are the
    store's own)."""

    partition: PARTITION
    source_log_start: Annotated[int, Meta(ge=-1, le=2**63 - 1)] = -1
    source_end_offset: Annotated[int, Meta(ge=-1, le=2**63 - 1)] = -1
    bytes_copied: COUNT = 0
    error: Annotated[str, Meta(max_length=1000)] = ""


class MigrationTopicState(_Body, frozen=True):
    name: NAME
    partitions: Items[MigrationPartitionState] = []
    error: Annotated[str, Meta(max_length=1000)] = ""


class SchemaLinkState(_Body, frozen=True):
    """The schema linker's progress (schema linking, issue 38), shown as reported; the
    subjects it linked are given back to normal registration when the link ends."""

    subjects: Annotated[list[SHORT], Meta(max_length=10_000)] = []
    subjects_copied: COUNT = 0
    versions_copied: COUNT = 0
    last_sync: Annotated[str, Meta(max_length=64)] | None = None
    error: Annotated[str, Meta(max_length=1000)] = ""
    errors: Annotated[dict[SHORT, Annotated[str, Meta(max_length=1000)]], Meta(max_length=50)] = {}


class MigrationReportRequest(_Body, frozen=True):
    migration_id: RUN_ID
    lease: TOKEN
    lease_s: LEASE_S = 60
    waiting_for: Annotated[str, Meta(max_length=1000)] = ""
    topics: Items[MigrationTopicState] = []
    # Per group: {"state", "error", "partitions": [{topic, partition, source_offset,
    # copied_offset}]} (shown as reported).
    groups: Annotated[dict[str, Any], Meta(max_length=10_000)] = {}
    schema_link: SchemaLinkState | None = None


class MigrationLinkSubjectRequest(_Body, frozen=True):
    migration_id: RUN_ID
    lease: TOKEN
    subject: Annotated[str, Meta(min_length=1, max_length=255)]


class MirrorTopicCreateRequest(_Body, frozen=True):
    migration_id: RUN_ID
    lease: TOKEN
    name: NAME
    partitions: Annotated[int, Meta(ge=1, le=100_000)]
    configs: Annotated[dict[str, str], Meta(max_length=1000)] = {}
    # Where each config's value came from: "topic" (set on the source topic) or
    # "source_default" (the source's default, its effective value there).
    config_origins: Annotated[dict[str, str], Meta(max_length=1000)] = {}


class MirrorGroupOffsetsRequest(_Body, frozen=True):
    migration_id: RUN_ID
    lease: TOKEN
    group_id: SHORT
    offsets: Items[OffsetCommit]


class JobProgress(_Body, omit_defaults=True, frozen=True):
    stage: Annotated[str, Meta(max_length=64)] = ""
    bytes_done: COUNT = 0
    bytes_total: COUNT = 0


class JobHeartbeatRequest(_Body, frozen=True):
    run_id: RUN_ID
    lease: TOKEN
    lease_s: LEASE_S = 120
    progress: JobProgress | None = None


class JobReportRequest(_Body, frozen=True):
    run_id: RUN_ID
    lease: TOKEN
    lease_s: LEASE_S = 120
    # The Spark job's own result (its shape is the job's: jobs/<name>.py), or an error.
    result: dict[str, Any] | None = None
    error: Annotated[str, Meta(max_length=10_000)] = ""


# --- topics ----------------------------------------------------------------------------

ConfigValue = str | int | float | bool | None


class TopicsListRequest(_Body, frozen=True):
    names: Items[NAME] | None = None
    topic_ids: Items[NAME] | None = None  # a malformed id names no topic


class TopicCreate(_Body, frozen=True):
    name: NAME
    num_partitions: INT32 = -1
    replication_factor: INT16 = -1
    configs: dict[NAME, ConfigValue] = {}


class TopicsCreateRequest(_Body, frozen=True):
    topics: Items[TopicCreate]
    validate_only: bool = False


class TopicsDeleteRequest(_Body, frozen=True):
    names: Items[NAME] | None = None
    topic_ids: Items[NAME] | None = None


class TopicPartitionsCreate(_Body, frozen=True):
    name: NAME
    count: INT32


class TopicsCreatePartitionsRequest(_Body, frozen=True):
    topics: Items[TopicPartitionsCreate]
    validate_only: bool = False


class TopicsDescribeConfigsRequest(_Body, frozen=True):
    names: Items[NAME]


class ConfigOp(_Body, frozen=True):
    name: NAME
    op: Literal["set", "delete", "append", "subtract"] = "set"
    value: ConfigValue = None


class TopicConfigsAlter(_Body, frozen=True):
    name: NAME
    ops: Items[ConfigOp] = []


class TopicsAlterConfigsRequest(_Body, frozen=True):
    topics: Items[TopicConfigsAlter]
    incremental: bool = False
    validate_only: bool = False


class BrokerConfigsDescribeRequest(_Body, frozen=True):
    pass


class BrokerConfigsAlterRequest(_Body, frozen=True):
    ops: Items[ConfigOp] = []
    incremental: bool = False
    validate_only: bool = False


# --- consumer groups -------------------------------------------------------------------


class OffsetCommit(_Body, frozen=True):
    topic: NAME
    partition: PARTITION
    offset: Annotated[int, Meta(ge=-1, le=2**63 - 1)]
    leader_epoch: INT32 = -1
    metadata: Annotated[str, Meta(max_length=100_000)] | None = None
    # The metadata as bytes (base64 in JSON) when it holds what a JSON string here may
    # not: a NUL. Given, it wins over `metadata`.
    metadata_b64: Annotated[bytes, Meta(max_length=100_000)] | None = None


class OffsetsCommitRequest(_Body, frozen=True):
    group_id: SHORT
    offsets: Items[OffsetCommit]
    # The coordinator's lease and the committing member (metadata_store.group_leases):
    # checked in the transaction that stores the offsets. No epoch: a caller that is no
    # coordinator, allowed only while nobody holds the group's lease.
    agent_id: AGENT_ID | None = None
    epoch: LEASE_EPOCH | None = None
    generation: INT32 = -1
    member_id: SHORT = ""
    group_instance_id: SHORT | None = None


class TopicPartition(_Body, frozen=True):
    topic: NAME
    partition: PARTITION


class OffsetsFetchRequest(_Body, frozen=True):
    group_id: SHORT
    partitions: Items[TopicPartition] | None = None
    require_stable: bool = False  # KIP-447


class OffsetsDeleteRequest(_Body, frozen=True):
    group_id: SHORT
    partitions: Items[TopicPartition]


class MemberAssignment(_Body, frozen=True):
    topic: NAME
    partitions: Items[PARTITION] = []


class GroupMember(_Body, frozen=True):
    member_id: SHORT = ""
    group_instance_id: SHORT | None = None
    client_id: SHORT = ""
    client_host: SHORT = ""
    assignment: Items[MemberAssignment] = []
    # KIP-848 groups: the member's epoch and its target assignment (`assignment` is what
    # it was given and may own).
    member_epoch: INT32 | None = None
    target_assignment: Items[MemberAssignment] | None = None


GROUP_TYPE = Literal["classic", "consumer"]


class GroupReport(_Body, frozen=True):
    group_id: Annotated[str, Meta(min_length=1, max_length=255)]
    group_type: GROUP_TYPE = "classic"
    assignment_epoch: INT32 = 0  # KIP-848 groups: the target assignment's epoch
    state: Annotated[str, Meta(max_length=32)] = "Empty"
    protocol_type: Annotated[str, Meta(max_length=64)] = ""
    protocol: SHORT = ""
    generation: INT32 = 0
    leader: SHORT = ""
    members: Items[GroupMember] = []


class GroupsReportRequest(_Body, frozen=True):
    agent_id: AGENT_ID
    groups: Items[GroupReport]


class GroupsListRequest(_Body, frozen=True):
    group_ids: Items[SHORT] | None = None


class GroupsDeleteRequest(_Body, frozen=True):
    group_ids: Items[SHORT]


GROUP_ID = Annotated[str, Meta(min_length=1, max_length=255)]
MAX_LEASES = 100_000


class LeaseRef(_Body, frozen=True):
    group_id: GROUP_ID
    epoch: LEASE_EPOCH


class LeaseOffer(_Body, frozen=True):
    group_id: GROUP_ID
    agent_id: AGENT_ID


class GroupsLeasesRequest(_Body, frozen=True):
    """One agent's lease traffic (docs/AGENT_API.md `groups/leases`)."""

    agent_id: AGENT_ID
    ttl_ms: Annotated[int, Meta(ge=500, le=60_000)] = 4_000
    acquire: Annotated[list[GROUP_ID], Meta(max_length=MAX_LEASES)] = []
    renew: Annotated[list[LeaseRef], Meta(max_length=MAX_LEASES)] = []
    release: Annotated[list[LeaseRef], Meta(max_length=MAX_LEASES)] = []
    offer: Annotated[list[LeaseOffer], Meta(max_length=MAX_LEASES)] = []
    # Leases kept through a control-plane outage: renewed even if expired, unless taken.
    resume: Annotated[list[LeaseRef], Meta(max_length=MAX_LEASES)] = []


class SavedProtocol(_Body, frozen=True):
    name: SHORT
    metadata: Annotated[bytes, Meta(max_length=1_000_000)] = b""  # base64 in JSON


class SavedMember(_Body, frozen=True):
    member_id: GROUP_ID
    group_instance_id: SHORT | None = None
    client_id: SHORT = ""
    client_host: SHORT = ""
    session_timeout_ms: Annotated[int, Meta(ge=1, le=2**31 - 1)] = 10_000
    rebalance_timeout_ms: Annotated[int, Meta(ge=1, le=2**31 - 1)] = 10_000
    protocols: Annotated[list[SavedProtocol], Meta(max_length=100)] = []
    assignment: Annotated[bytes, Meta(max_length=10_000_000)] = b""  # base64 in JSON
    # KIP-848 members (agents.groups.consumer): subscription, epochs, partitions as
    # [topic id, partition] pairs — assigned, being revoked, and the target.
    rack_id: SHORT | None = None
    topic_names: Items[NAME] = []
    topic_regex: Annotated[str, Meta(max_length=10_000)] | None = None
    server_assignor: SHORT | None = None
    member_epoch: INT32 = 0
    previous_member_epoch: INT32 = -1
    state: SHORT = ""
    assigned: Items[tuple[SHORT, PARTITION]] = []
    revoking: Items[tuple[SHORT, PARTITION]] = []
    target: Items[tuple[SHORT, PARTITION]] = []


class SavedConsumerGroup(_Body, frozen=True):
    """A KIP-848 group's own state: the target assignment's epoch and the subscribed
    topics as last looked up (name -> [topic id, partition count])."""

    assignment_epoch: INT32 = 0
    topics: dict[NAME, tuple[SHORT, PARTITION]] | None = None


class GroupsSaveRequest(_Body, frozen=True):
    """A group's state, saved by its lease holder (docs/AGENT_API.md `groups/save`)."""

    agent_id: AGENT_ID
    group_id: GROUP_ID
    epoch: LEASE_EPOCH
    generation: Annotated[int, Meta(ge=0, le=2**31 - 1)]
    protocol_type: SHORT = ""
    protocol_name: SHORT | None = None
    leader: SHORT | None = None
    members: Annotated[list[SavedMember], Meta(max_length=10_000)] = []
    group_type: GROUP_TYPE = "classic"
    extra: SavedConsumerGroup | None = None


# --- share groups (KIP-932) -------------------------------------------------------------


class ShareHeartbeatRequest(_Body, frozen=True):
    """A ShareGroupHeartbeat, answered from the group's row (docs/AGENT_API.md)."""

    group_id: GROUP_ID
    member_epoch: Annotated[int, Meta(ge=-1, le=2**31 - 1)]
    member_id: SHORT = ""
    topics: Items[NAME] | None = None
    client_id: SHORT = ""
    client_host: SHORT = ""
    rack_id: SHORT | None = None
    agent_id: SHORT = ""


ACK_TYPE = Annotated[int, Meta(ge=0, le=4)]  # 0 gap, 1 accept, 2 release, 3 reject, 4 renew


class ShareAck(_Body, frozen=True):
    first: OFFSET
    last: OFFSET
    types: Annotated[list[ACK_TYPE], Meta(min_length=1, max_length=MAX_ITEMS)]


class ShareRange(_Body, frozen=True):
    first: OFFSET
    last: OFFSET


class ShareFetchPartition(_Body, frozen=True):
    topic_id: SHORT
    partition: PARTITION
    acks: Items[ShareAck] = []
    give_back: Items[ShareRange] = []  # acquired, not sent (past the fetch's MaxBytes)
    acquire: bool = False
    release: bool = False  # its share session (on the calling agent) closed: held, released


class ShareGroupsListRequest(_Body, frozen=True):
    group_ids: Items[GROUP_ID] | None = None


class ShareGroupsDeleteRequest(_Body, frozen=True):
    group_ids: Items[GROUP_ID]


class ShareConfigsDescribeRequest(_Body, frozen=True):
    group_ids: Items[GROUP_ID]


class ShareConfigsAlterRequest(_Body, frozen=True):
    group_id: SHORT
    ops: Items[ConfigOp] = []
    incremental: bool = False
    validate_only: bool = False


class ShareOffsetsTopic(_Body, frozen=True):
    topic_name: NAME
    partitions: Items[PARTITION] = []


class ShareOffsetsGroup(_Body, frozen=True):
    group_id: GROUP_ID
    topics: Items[ShareOffsetsTopic] | None = None


class ShareOffsetsDescribeRequest(_Body, frozen=True):
    """DescribeShareGroupOffsets (docs/AGENT_API.md `share/offsets/describe`)."""

    groups: Items[ShareOffsetsGroup]


class ShareOffsetsStart(_Body, frozen=True):
    partition_index: PARTITION
    start_offset: Annotated[int, Meta(ge=-(2**63), le=2**63 - 1)]  # negative: the store refuses


class ShareOffsetsAlterTopic(_Body, frozen=True):
    topic_name: NAME
    partitions: Items[ShareOffsetsStart] = []


class ShareOffsetsAlterRequest(_Body, frozen=True):
    group_id: GROUP_ID
    topics: Items[ShareOffsetsAlterTopic]


class ShareOffsetsDeleteRequest(_Body, frozen=True):
    group_id: GROUP_ID
    topics: Items[NAME]


class ShareFetchRequest(_Body, frozen=True):
    """Acknowledge, then acquire (docs/AGENT_API.md `share/fetch`)."""

    group_id: GROUP_ID
    member_id: SHORT
    partitions: Items[ShareFetchPartition]
    max_records: Annotated[int, Meta(ge=0, le=2**31 - 1)] = 500
    release: bool = False  # (older agents) what the member holds in every partition, released


# --- transactions (KIP-98) -------------------------------------------------------------

PRODUCER_ID = Annotated[int, Meta(ge=-1, le=2**63 - 1)]
PRODUCER_EPOCH = Annotated[int, Meta(ge=-1, le=2**15 - 1)]


class TxnBody(_Body, frozen=True):
    """What every transaction call names: the transaction and its producer."""

    transactional_id: Annotated[str, Meta(min_length=1, max_length=255)]
    producer_id: PRODUCER_ID
    producer_epoch: PRODUCER_EPOCH


class TxnPartition(_Body, frozen=True):
    topic: NAME
    partition: PARTITION


class TxnAddPartitionsRequest(TxnBody, frozen=True):
    partitions: Items[TxnPartition]
    verify_only: bool = False


class TxnAddOffsetsRequest(TxnBody, frozen=True):
    group_id: SHORT


class TxnOffsetCommitRequest(TxnBody, frozen=True):
    group_id: SHORT
    offsets: Items[OffsetCommit]


class TxnEndRequest(TxnBody, frozen=True):
    committed: bool


class TxnDescribeRequest(_Body, frozen=True):
    transactional_ids: Items[SHORT]


class TxnListRequest(_Body, frozen=True):
    pass


# --- SASL and ACLs ---------------------------------------------------------------------


class SaslCredentialRequest(_Body, frozen=True):
    username: SHORT


class ScramCredentialsDescribeRequest(_Body, frozen=True):
    users: Items[SHORT] | None = None  # None: every user


class ScramDeletion(_Body, frozen=True):
    name: SHORT
    mechanism: SHORT  # "SCRAM-SHA-256" | "SCRAM-SHA-512"; others are answered per user


class ScramUpsertion(_Body, frozen=True):
    name: SHORT
    mechanism: SHORT
    iterations: Annotated[int, Meta(ge=-(2**31), le=2**31 - 1)]
    salt: Annotated[bytes, Meta(max_length=1024)]  # base64 in JSON
    salted_password: Annotated[bytes, Meta(max_length=1024)]


class ScramCredentialsAlterRequest(_Body, frozen=True):
    deletions: Items[ScramDeletion] = []
    upsertions: Items[ScramUpsertion] = []


class AclsListRequest(_Body, frozen=True):
    version: Annotated[str, Meta(max_length=64)] | None = None


AclJson = dict[Annotated[str, Meta(max_length=64)], str | None]


class AclsCreateRequest(_Body, frozen=True):
    acls: Items[AclJson]  # each binding is checked by the ACL parser (INVALID_REQUEST)


class AclsDescribeRequest(_Body, frozen=True):
    filter: AclJson = {}


class AclsDeleteRequest(_Body, frozen=True):
    filters: Items[AclJson]


# --- the console's message browser (the browse channel) -----------------------------

BROWSE_ID = Annotated[str, Meta(min_length=1, max_length=64)]
# Record keys, values and header values travel in base64: nothing else is let through to
# the console, which decodes them.
B64 = Annotated[str, Meta(max_length=16 * 1024 * 1024, pattern=r"^[A-Za-z0-9+/]*={0,2}$")]
MAX_BROWSE_RECORDS = 500


class BrowsePollRequest(_Body, frozen=True):
    agent_id: AGENT_ID


class BrowsedRecord(_Body, frozen=True):
    offset: OFFSET
    timestamp: INT64
    key: B64 | None
    value: B64 | None
    headers: Annotated[
        list[tuple[Annotated[str, Meta(max_length=1_000)], B64 | None]], Meta(max_length=1_000)
    ] = []


class BrowsedPage(_Body, frozen=True):
    """What an agent read for a browse request (agents.record_browser.browse)."""

    topic: NAME
    partition: PARTITION
    log_start_offset: OFFSET
    high_watermark: OFFSET
    records: Annotated[list[BrowsedRecord], Meta(max_length=MAX_BROWSE_RECORDS)]
    from_offset: INT64 | None = None


class BrowseAnswerRequest(_Body, frozen=True):
    """An agent's answer to one browse request: the page it read (checked against
    `BrowsedPage` by the call itself, so that a page that does not fit still reaches the
    waiting console as a refused answer), or why it could not read one."""

    id: BROWSE_ID
    agent_id: AGENT_ID | None = None
    page: msgspec.Raw = msgspec.Raw(b"null")  # JSON: null when there is no page
    error: Annotated[str, Meta(max_length=1_000)] = ""
    not_found: bool = False


class BadBody(ValueError):
    """The body is not JSON or does not fit the endpoint's schema."""


# A NUL escaped in a JSON string (an even run of backslashes before it is escaped text):
# PostgreSQL's text cannot hold one, so no string of any call may carry it.
_NUL_ESCAPE = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")


_Decoded = TypeVar("_Decoded", bound=Struct)


def decode(body: bytes, schema: type[_Decoded]) -> _Decoded:
    """The request body as an instance of `schema`, or `BadBody` with a reason that names
    the offending field."""
    # The substring test first: the regex tries every position of a commit's 20 KB body.
    if b"\\u0000" in (body or b"") and _NUL_ESCAPE.search(body):
        raise BadBody("strings must not contain NUL (\\u0000)")
    try:
        return msgspec.json.decode(body or b"{}", type=schema)
    except msgspec.ValidationError as exc:
        raise BadBody(str(exc)) from None
    except msgspec.DecodeError as exc:
        raise BadBody(f"the body is not valid JSON: {exc}") from None
    except RecursionError:
        raise BadBody("the body is nested too deeply") from None


def as_dicts(items: Sequence[Struct]) -> list[dict[str, Any]]:
    """Plain dicts (uuids as strings) for the services that take the JSON shapes."""
    dicts: list[dict[str, Any]] = msgspec.to_builtins(items)
    return dicts


def as_dict(item: Struct) -> dict[str, Any]:
    """One body as a plain dict (uuids as strings)."""
    plain: dict[str, Any] = msgspec.to_builtins(item)
    return plain


def validate_commit(request: CommitRequest, *, cluster_prefix: str) -> None:
    """What the types cannot say about a commit: the file is the cluster's, every batch
    lies inside it and no two batches share a byte. (Producer fields are Kafka's to judge:
    the commit function answers KIP-98 errors per batch; clients such as aiokafka send a
    sequence without a producer id, which Kafka ignores.) `BadBody` names the problem."""
    if not request.file_key.startswith(cluster_prefix) or ".." in request.file_key:
        raise BadBody(f"file_key must be a path under '{cluster_prefix}'")
    batches = request.batches
    order: Sequence[int] = range(len(batches))
    if any(a.pos > b.pos for a, b in zip(batches, batches[1:])):  # agents send file order
        order = sorted(order, key=lambda i: batches[i].pos)
    size, end_of_previous, previous = request.size, 0, None
    for i in order:
        b = batches[i]
        end = b.pos + b.len
        if end > size:
            raise BadBody(
                f"$.batches[{i}]: bytes {b.pos}..{end} lie past the file's size {request.size}"
            )
        if b.pos < end_of_previous:
            raise BadBody(f"$.batches[{i}] overlaps $.batches[{previous}] in the file")
        if b.batch_count > 1 and (
            b.batch_count > b.records or b.producer_id != -1 or b.transactional
        ):
            raise BadBody(
                f"$.batches[{i}].batch_count: an entry of several batches has at least one"
                " record each and neither a producer id nor a transaction"
            )
        end_of_previous, previous = end, i


def validate_commit_files(request: CommitFilesRequest, *, cluster_prefix: str) -> None:
    """Each file as `validate_commit` checks one; their batches together within
    MAX_COMMIT_BATCHES; no file key twice."""
    total = 0
    keys: set[str] = set()
    for n, file in enumerate(request.files):
        try:
            validate_commit(file, cluster_prefix=cluster_prefix)
        except BadBody as exc:
            raise BadBody(f"$.files[{n}]: {exc}") from None
        if file.file_key in keys:
            raise BadBody(f"$.files[{n}].file_key: {file.file_key!r} is in the call twice")
        keys.add(file.file_key)
        total += len(file.batches)
    if total > MAX_COMMIT_BATCHES:
        raise BadBody(f"$.files: {total} batches in all, more than {MAX_COMMIT_BATCHES}")


def commit_batches(items: list[dict[str, Any]]) -> list[CommitBatch]:
    """Commit entries from their JSON shape, validated (for callers other than the API)."""
    try:
        return msgspec.convert(items, list[CommitBatch])
    except msgspec.ValidationError as exc:
        raise BadBody(str(exc)) from None
