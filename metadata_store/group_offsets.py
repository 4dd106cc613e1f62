"""Committed consumer-group offsets (OffsetCommit / OffsetFetch through the agent API).

They outlive every agent: a group's coordinator is whichever agent holds its lease
(`group_leases`), and a new coordinator reads them from here. A commit is checked against
the lease and the group's saved generation and members in the transaction that stores it.

A migration's copier stores the source's offsets (`group_offsets_mirror`) while the group
is not used in Floe: no member ever joined it here and every offset it has was the
copier's (`mirrored`). Reads — OffsetFetch, DescribeGroups, ListGroups, a lag monitor —
take the group's lease but use nothing, so they never stop the copy.
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from core.kafka.errors import ErrorCode
from core.offset_metadata import metadata_bytes, stored_fields
from metadata_store.clusters import VirtualCluster
from metadata_store.group_leases import group_commit_check, group_joined_at
from metadata_store.models import GroupOffset, Partition, TransactionOffset
from metadata_store.store import JSON


def _partition_map(
    cluster: VirtualCluster, pairs: set[tuple[str, int]]
) -> dict[tuple[str, int], int]:
    names = {p[0] for p in pairs}
    rows = Partition.objects.filter(topic__cluster=cluster, topic__name__in=names).values_list(
        "topic__name", "index", "id"
    )
    return {(name, index): pid for name, index, pid in rows if (name, index) in pairs}


@transaction.atomic
def group_offsets_commit(
    cluster: VirtualCluster,
    group_id: str,
    offsets: list[JSON],
    *,
    agent_id: str | None = None,
    epoch: int | None = None,
    generation: int = -1,
    member_id: str = "",
    group_instance_id: str | None = None,
    now: datetime | None = None,
) -> JSON:
    """Store a group's offsets if the committer may (`group_commit_check`: the lease's
    epoch, the group's generation and members); else every offset answers the error."""
    error = group_commit_check(
        cluster_id=cluster.pk,
        group_id=group_id,
        agent_id=agent_id,
        epoch=epoch,
        generation=generation,
        member_id=member_id,
        group_instance_id=group_instance_id,
        now=now,
    )
    if error:
        return {
            "offsets": [
                {"topic": o["topic"], "partition": o["partition"], "error_code": int(error)}
                for o in offsets
            ]
        }
    return _offsets_store(cluster, group_id, offsets, mirrored=False)


def _offsets_store(
    cluster: VirtualCluster, group_id: str, offsets: list[JSON], *, mirrored: bool
) -> JSON:
    pairs = {(str(o["topic"]), int(o["partition"])) for o in offsets}
    partitions = _partition_map(cluster, pairs)
    answers: list[JSON] = []
    rows: list[GroupOffset] = []
    for o in offsets:
        key = (str(o["topic"]), int(o["partition"]))
        pid = partitions.get(key)
        code = 0 if pid is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        answers.append({"topic": key[0], "partition": key[1], "error_code": int(code)})
        if pid is not None:
            rows.append(
                GroupOffset(
                    cluster=cluster,
                    group_id=group_id,
                    partition_id=pid,
                    committed_offset=int(o["offset"]),
                    leader_epoch=int(o.get("leader_epoch", -1)),
                    metadata=metadata_bytes(o),
                    mirrored=mirrored,
                )
            )
    if rows:
        GroupOffset.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["cluster", "group_id", "partition"],
            update_fields=[
                "committed_offset",
                "leader_epoch",
                "metadata",
                "committed_at",
                "mirrored",
            ],
        )
    return {"offsets": answers}


def group_floe_use(cluster: VirtualCluster, group_id: str) -> str:
    """Why the group is Floe's own, in words ("" while it is not): a member joined it
    here, or a client of Floe committed an offset (or holds some in an open
    transaction). Inside the caller's transaction, the group's lease row locked."""
    joined = group_joined_at(cluster_id=cluster.pk, group_id=group_id)
    if joined is not None:
        return f"active in Floe: a consumer joined at {joined:%Y-%m-%d %H:%M:%S} UTC"
    committed = (
        GroupOffset.objects.filter(cluster=cluster, group_id=group_id, mirrored=False)
        .order_by("committed_at")
        .values_list("committed_at", flat=True)
        .first()
    )
    if committed is not None:
        return f"committed in Floe at {committed:%Y-%m-%d %H:%M:%S} UTC"
    if TransactionOffset.objects.filter(producer__cluster=cluster, group_id=group_id).exists():
        return "committed in Floe: a transaction holds offsets of the group"
    return ""


@transaction.atomic
def group_offsets_mirror(cluster: VirtualCluster, group_id: str, offsets: list[JSON]) -> JSON:
    """A migration's copy of the source group's offsets (`mirrored`), stored only while
    the group is not used in Floe (`group_floe_use`, checked in this transaction: a join
    or a client's commit is either before it — nothing stored — or after it, and wins).
    Answers ``{"offsets": […], "used": why not stored ("": stored)}``."""
    used = group_floe_use(cluster, group_id)
    if used:
        refused = int(ErrorCode.NOT_COORDINATOR)
        return {
            "offsets": [
                {"topic": o["topic"], "partition": o["partition"], "error_code": refused}
                for o in offsets
            ],
            "used": used,
        }
    return {**_offsets_store(cluster, group_id, offsets, mirrored=True), "used": ""}


def group_offsets_fetch(
    cluster: VirtualCluster,
    group_id: str,
    partitions: list[JSON] | None,
    *,
    require_stable: bool = False,
) -> JSON:
    """The group's committed offsets. `require_stable` (KIP-447): partitions whose
    offsets an open transaction holds answer UNSTABLE_OFFSET_COMMIT (the consumer retries)."""
    unstable: set[tuple[str, int]] = set()
    if require_stable:
        unstable = set(
            TransactionOffset.objects.filter(
                producer__cluster=cluster, group_id=group_id
            ).values_list("partition__topic__name", "partition__index")
        )
    committed = {
        (o.partition.topic.name, o.partition.index): o
        for o in GroupOffset.objects.filter(cluster=cluster, group_id=group_id).select_related(
            "partition__topic"
        )
    }
    if partitions is None:
        keys = sorted(committed)
    else:
        keys = [(str(p["topic"]), int(p["partition"])) for p in partitions]
    answers = []
    for key in keys:
        o = committed.get(key)
        answers.append(
            {
                "topic": key[0],
                "partition": key[1],
                "offset": o.committed_offset if o else -1,
                "leader_epoch": o.leader_epoch if o else -1,
                **stored_fields(o.metadata if o else b""),
                "error_code": int(ErrorCode.UNSTABLE_OFFSET_COMMIT) if key in unstable else 0,
            }
        )
    return {"offsets": answers}
