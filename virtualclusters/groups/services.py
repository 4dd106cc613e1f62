"""Consumer groups in the metadata store: what agents report, listing, deletion.

A group lives in two places. Its committed offsets are `GroupOffset` rows, written by
the coordinator agent on every OffsetCommit; they outlive any agent. Its membership
(state, members, assignments) lives in the coordinator agent's memory and reaches us as
`GroupReport` rows every few seconds (agent API `groups/report`); a report older than
the agent liveness window describes a group whose coordinator is gone, so it counts as
Empty. A group exists while it has offsets or a live report — as on Kafka, where an
Empty group without offsets is forgotten.

Lag (offsets and seconds) is computed in `lag.py`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.kafka.errors import ErrorCode
from metadata_store.models import GroupLease, GroupOffset, Partition
from virtualclusters.groups.models import GroupReport
from virtualclusters.models import VirtualCluster

EMPTY = "Empty"


class GroupNotEmpty(Exception):
    """The group has live members; they must leave before it can be deleted."""


def live_since() -> datetime:
    """Reports at or after this moment are live."""
    return timezone.now() - timedelta(seconds=settings.FLOE_AGENT_LIVENESS_S)


def groups_with_offsets(
    cluster: VirtualCluster, group_ids: Iterable[str] | None = None
) -> set[str]:
    rows = GroupOffset.objects.filter(cluster=cluster)
    if group_ids is not None:
        rows = rows.filter(group_id__in=list(group_ids))
    return set(rows.values_list("group_id", flat=True).distinct())


# --- services (writes) ---------------------------------------------------------------


@transaction.atomic
def group_report_apply(
    *, cluster: VirtualCluster, agent_id: str, groups: list[dict[str, Any]]
) -> list[str]:
    """Record what one agent coordinates. Returns the ids of reported groups the store
    has no reason to keep (Empty, no members, no offsets): the agent forgets them."""
    now = timezone.now()
    reported = {str(g["group_id"]): g for g in groups}
    with_offsets = groups_with_offsets(cluster, reported)
    forget, rows = [], []
    for group_id, g in reported.items():
        members = list(g.get("members") or [])
        if g.get("state") == EMPTY and not members and group_id not in with_offsets:
            forget.append(group_id)
            continue
        rows.append(
            GroupReport(
                cluster=cluster,
                group_id=group_id,
                agent_id=agent_id,
                state=str(g.get("state") or EMPTY),
                protocol_type=str(g.get("protocol_type") or ""),
                group_type=str(g.get("group_type") or "classic"),
                assignment_epoch=int(g.get("assignment_epoch") or 0),
                protocol=str(g.get("protocol") or ""),
                generation=int(g.get("generation") or 0),
                leader=str(g.get("leader") or ""),
                members=members,
                reported_at=now,
            )
        )
    if forget:
        GroupReport.objects.filter(cluster=cluster, group_id__in=forget).delete()
    if rows:
        GroupReport.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["cluster", "group_id"],
            update_fields=[
                "agent_id",
                "state",
                "protocol_type",
                "group_type",
                "assignment_epoch",
                "protocol",
                "generation",
                "leader",
                "members",
                "reported_at",
            ],
        )
    # Groups this agent reported before and no longer holds (moved, emptied, deleted).
    gone = GroupReport.objects.filter(cluster=cluster, agent_id=agent_id).exclude(
        group_id__in=list(reported)
    )
    kept = groups_with_offsets(cluster, gone.values_list("group_id", flat=True))
    gone.filter(group_id__in=kept).update(state=EMPTY, members=[])
    gone.exclude(group_id__in=kept).delete()
    return forget


@transaction.atomic
def groups_delete(*, cluster: VirtualCluster, group_ids: list[str]) -> dict[str, int]:
    """Delete groups' offsets and reports, and forget their saved state (the lease rows
    stay: their epochs must never repeat). Group id → error code (GROUP_ID_NOT_FOUND
    when the store knew nothing of it). Callers check for members first."""
    results = {}
    for group_id in group_ids:
        offsets, _ = GroupOffset.objects.filter(cluster=cluster, group_id=group_id).delete()
        reports, _ = GroupReport.objects.filter(cluster=cluster, group_id=group_id).delete()
        GroupLease.objects.filter(cluster=cluster, group_id=group_id, members=[]).update(
            generation=0,
            protocol_type="",
            protocol_name="",
            leader="",
            group_type="classic",
            extra={},
        )
        results[group_id] = 0 if offsets or reports else int(ErrorCode.GROUP_ID_NOT_FOUND)
    return results


def group_delete(*, cluster: VirtualCluster, group_id: str) -> bool:
    """Delete a group from the REST API or console: refused while the last live report
    shows members. False when there was no such group."""
    live = GroupReport.objects.filter(
        cluster=cluster, group_id=group_id, reported_at__gte=live_since()
    ).first()
    if live is not None and live.members:
        raise GroupNotEmpty(
            f"Group {group_id!r} has {len(live.members)} active members; stop them first."
        )
    return groups_delete(cluster=cluster, group_ids=[group_id])[group_id] == 0


@transaction.atomic
def group_offsets_delete(
    *, cluster: VirtualCluster, group_id: str, partitions: list[dict[str, Any]]
) -> tuple[bool, list[dict[str, Any]]]:
    """KIP-496 OffsetDelete in the store: (whether the group had offsets, per-partition
    results). Subscribed topics are refused by the coordinator before this."""
    existed = GroupOffset.objects.filter(cluster=cluster, group_id=group_id).exists()
    pairs = {(str(p["topic"]), int(p["partition"])) for p in partitions}
    known = {
        (name, index): pid
        for name, index, pid in Partition.objects.filter(
            topic__cluster=cluster, topic__name__in={t for t, _ in pairs}
        ).values_list("topic__name", "index", "id")
    }
    found = [known[pair] for pair in pairs if pair in known]
    if found:
        GroupOffset.objects.filter(
            cluster=cluster, group_id=group_id, partition_id__in=found
        ).delete()
    results = [
        {
            "topic": str(p["topic"]),
            "partition": int(p["partition"]),
            "error_code": 0
            if (str(p["topic"]), int(p["partition"])) in known
            else int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        }
        for p in partitions
    ]
    return existed, results


# --- selectors (reads) ---------------------------------------------------------------


@dataclass
class GroupSummary:
    group_id: str
    has_offsets: bool
    protocol_type: str
    state: str  # from a live report, else Empty
    agent_id: str | None  # the reporting coordinator, when live
    group_type: str = "classic"  # or "consumer" (KIP-848), as last reported


def group_summaries(
    cluster: VirtualCluster, group_ids: Iterable[str] | None = None
) -> dict[str, GroupSummary]:
    """Every group of the cluster (or those named) the store knows: committed offsets or
    a live report."""
    with_offsets = groups_with_offsets(cluster, group_ids)
    reports = GroupReport.objects.filter(cluster=cluster)
    if group_ids is not None:
        reports = reports.filter(group_id__in=list(group_ids))
    since = live_since()
    summaries = {
        group_id: GroupSummary(group_id, True, "", EMPTY, None) for group_id in with_offsets
    }
    for report in reports:
        live = report.reported_at >= since
        if not live and report.group_id not in with_offsets:
            continue
        summaries[report.group_id] = GroupSummary(
            group_id=report.group_id,
            has_offsets=report.group_id in with_offsets,
            protocol_type=report.protocol_type,
            state=report.state if live else EMPTY,
            group_type=report.group_type,
            agent_id=report.agent_id if live else None,
        )
    return summaries
