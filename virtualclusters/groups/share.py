"""Share groups (KIP-932) for the REST API and the console: each group's live members
(the agent serving each, the partitions it reads), each partition's start offset, its
records in flight (locked to a member, or available again) and its lag; resetting a
topic's start offsets (to the earliest, the latest or a given offset) and forgetting
them, in an empty group only (the store's rules, `metadata_store.share_offsets`).

A share group's state is the metadata store's alone (no agent reports it): what is read
here is what the next ShareFetch meets.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from core.kafka.errors import ErrorCode
from metadata_store.models import Partition, ShareGroup, SharePartition, Topic
from metadata_store.share_groups import share_groups_delete, share_lag
from metadata_store.share_offsets import share_offsets_alter, share_offsets_delete
from metadata_store.share_state import ACQUIRED, AVAILABLE
from virtualclusters.models import VirtualCluster

RESET_TO = ("earliest", "latest", "offset")


class ShareGroupNotEmpty(Exception):
    """A member's session lasts: its offsets (or the group) cannot change now."""


class ShareGroupMissing(Exception):
    """No such share group (or it has no state for the topic)."""


def _in_flight(ranges: list[list[Any]], state: int) -> int:
    return sum(int(r[1]) - int(r[0]) + 1 for r in ranges if r[2] == state)


def share_groups_describe(
    cluster: VirtualCluster, group_ids: list[str] | None = None
) -> list[dict[str, Any]]:
    """Every share group of the cluster (or those named), in three queries however many
    groups and partitions there are."""
    groups = ShareGroup.objects.filter(cluster=cluster).order_by("group_id")
    if group_ids is not None:
        groups = groups.filter(group_id__in=group_ids)
    groups_list = list(groups)
    if not groups_list:
        return []
    rows: dict[str, list[SharePartition]] = {g.group_id: [] for g in groups_list}
    for row in (
        SharePartition.objects.filter(cluster=cluster, group_id__in=list(rows))
        .select_related("partition__topic")
        .order_by("partition__topic__name", "partition__index")
    ):
        rows[row.group_id].append(row)
    names = dict(Topic.objects.filter(cluster=cluster).values_list("id", "name"))
    now_ms = int(time.time() * 1000)
    described = []
    for group in groups_list:
        members = []
        for member_id, info in sorted(group.members.items()):
            if info.get("expires_ms", 0) <= now_ms:
                continue  # its session ended: gone at the group's next heartbeat
            assignment = [
                {"topic": names.get(uuid.UUID(t["topic_id"]), ""), "partitions": t["partitions"]}
                for t in info.get("assigned") or ()
            ]
            members.append(
                {
                    "member_id": member_id,
                    "client_id": info.get("client_id", ""),
                    "client_host": info.get("client_host", ""),
                    "agent_id": info.get("agent_id", ""),
                    "member_epoch": int(info.get("member_epoch", 0)),
                    "subscribed_topics": list(info.get("topics") or ()),
                    "assignment": assignment,
                }
            )
        partitions: list[dict[str, Any]] = []
        for row in rows[group.group_id]:
            part = row.partition
            partitions.append(
                {
                    "topic": part.topic.name,
                    "partition": part.index,
                    "start_offset": row.start_offset,
                    "high_watermark": part.high_watermark,
                    "locked": _in_flight(row.in_flight, ACQUIRED),
                    "available": _in_flight(row.in_flight, AVAILABLE),
                    "lag": share_lag(row, part.high_watermark),
                }
            )
        for p in partitions:
            p["in_flight"] = p["locked"] + p["available"]
        described.append(
            {
                "group_id": group.group_id,
                "state": "Stable" if members else "Empty",
                "group_epoch": group.group_epoch,
                "members": members,
                "partitions": partitions,
                "total_lag": sum(p["lag"] for p in partitions),
                "locked": sum(p["locked"] for p in partitions),
            }
        )
    return described


def _group_or_missing(cluster: VirtualCluster, group_id: str) -> None:
    if not ShareGroup.objects.filter(cluster=cluster, group_id=group_id).exists():
        raise ShareGroupMissing(f"There is no share group {group_id}.")


def share_offsets_reset(
    *,
    cluster: VirtualCluster,
    group_id: str,
    topic: str,
    to: str,
    offset: int | None = None,
    partitions: list[int] | None = None,
) -> None:
    """Start the group's partitions of `topic` (all, or those named) over at the
    earliest offset, the latest, or `offset` (kept within the partition's records, as
    kafka-consumer-groups.sh does), with nothing in flight. ValueError: a bad request."""
    _group_or_missing(cluster, group_id)
    if to not in RESET_TO or (to == "offset") != (offset is not None):
        raise ValueError("Give to=earliest, to=latest, or to=offset with an offset.")
    found = {
        p.index: p for p in Partition.objects.filter(topic__cluster=cluster, topic__name=topic)
    }
    if not found:
        raise ValueError(f"There is no topic {topic}.")
    wanted = sorted(found) if partitions is None else sorted(set(partitions))
    if unknown := [i for i in wanted if i not in found]:
        raise ValueError(f"Topic {topic} has no partition {unknown[0]}.")
    starts = []
    for index in wanted:
        part = found[index]
        if to == "earliest":
            start = part.log_start_offset
        elif to == "latest":
            start = part.high_watermark
        else:
            start = min(max(int(offset or 0), part.log_start_offset), part.high_watermark)
        starts.append({"partition_index": index, "start_offset": start})
    answer = share_offsets_alter(
        cluster, group_id=group_id, topics=[{"topic_name": topic, "partitions": starts}]
    )
    if answer["error_code"] == ErrorCode.NON_EMPTY_GROUP:
        raise ShareGroupNotEmpty(f"Share group {group_id} has active members.")


def share_offsets_forget(*, cluster: VirtualCluster, group_id: str, topic: str) -> None:
    """Forget the group's state of `topic`: its next fetch starts where
    `share.auto.offset.reset` says."""
    _group_or_missing(cluster, group_id)
    answer = share_offsets_delete(cluster, group_id=group_id, topics=[topic])
    if answer["error_code"] == ErrorCode.NON_EMPTY_GROUP:
        raise ShareGroupNotEmpty(f"Share group {group_id} has active members.")
    if answer["error_code"] or answer["responses"][0]["error_code"]:
        raise ShareGroupMissing(f"Share group {group_id} has no offsets of topic {topic}.")


def share_group_delete(*, cluster: VirtualCluster, group_id: str) -> None:
    """The group, its configs and its partitions' state (no live member)."""
    (answer,) = share_groups_delete(cluster, [group_id])["groups"]
    if answer["error_code"] == ErrorCode.NON_EMPTY_GROUP:
        raise ShareGroupNotEmpty(f"Share group {group_id} has active members.")
    if answer["error_code"]:
        raise ShareGroupMissing(f"There is no share group {group_id}.")
