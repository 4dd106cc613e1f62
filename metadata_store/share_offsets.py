"""A share group's start offsets, for admin clients (KIP-932's DescribeShareGroupOffsets,
AlterShareGroupOffsets, DeleteShareGroupOffsets; kafka-share-groups.sh).

A share-partition's start offset is where its records in flight begin (`SharePartition`,
`share_groups`): describing answers it with the lag (KIP-1226); altering starts the
partition over at the given offset with nothing in flight; deleting forgets the
group's state of a topic, so its next fetch starts where `share.auto.offset.reset`
says. Changes need an empty group (no member whose session lasts): NON_EMPTY_GROUP.
Answers use Kafka's field names, topic ids as strings.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from core.kafka.errors import ErrorCode
from metadata_store.clusters import VirtualCluster
from metadata_store.models import (
    GroupLease,
    GroupOffset,
    Partition,
    ShareGroup,
    SharePartition,
    Topic,
)
from metadata_store.share_groups import live_members, share_lag
from metadata_store.store import JSON

ZERO_ID = "00000000-0000-0000-0000-000000000000"
_UNKNOWN = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


def _error(code: ErrorCode, message: str) -> JSON:
    return {"error_code": int(code), "error_message": message}


def _topics(cluster: VirtualCluster, names: list[str]) -> dict[str, Topic]:
    return {t.name: t for t in Topic.objects.filter(cluster=cluster, name__in=names)}


def share_offsets_describe(cluster: VirtualCluster, groups: list[JSON]) -> JSON:
    """Each group's partitions: `topics` null for every partition the group has state
    for, else the named ones (a partition never read: start offset and lag -1)."""
    ids = [str(g["group_id"]) for g in groups]
    known = set(
        ShareGroup.objects.filter(cluster=cluster, group_id__in=ids).values_list(
            "group_id", flat=True
        )
    )
    out = []
    for asked in groups:
        group_id = str(asked["group_id"])
        if group_id not in known:
            out.append({"group_id": group_id, "topics": [],
                        **_error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")})  # fmt: skip
            continue
        rows = {
            row.partition_id: row
            for row in SharePartition.objects.filter(cluster=cluster, group_id=group_id)
        }
        topics = asked.get("topics")
        if topics is None:
            described = _described_all(rows)
        else:
            described = _described(cluster, rows, topics)
        out.append({"group_id": group_id, "topics": described, "error_code": 0,
                    "error_message": None})  # fmt: skip
    return {"groups": out}


def _partition_answer(part: Partition, row: SharePartition | None) -> JSON:
    return {
        "partition_index": part.index,
        "start_offset": row.start_offset if row else -1,
        "lag": share_lag(row, part.high_watermark) if row else -1,
        "error_code": 0,
        "error_message": None,
    }


def _described_all(rows: dict[int, SharePartition]) -> list[JSON]:
    parts = Partition.objects.filter(id__in=rows).select_related("topic")
    by_topic: dict[str, JSON] = {}
    for part in sorted(parts, key=lambda p: (p.topic.name, p.index)):
        topic = by_topic.setdefault(
            part.topic.name,
            {"topic_name": part.topic.name, "topic_id": str(part.topic_id), "partitions": []},
        )
        topic["partitions"].append(_partition_answer(part, rows[part.id]))
    return list(by_topic.values())


def _described(
    cluster: VirtualCluster, rows: dict[int, SharePartition], topics: list[JSON]
) -> list[JSON]:
    found = _topics(cluster, [str(t["topic_name"]) for t in topics])
    parts = {
        (p.topic_id, p.index): p for p in Partition.objects.filter(topic__in=list(found.values()))
    }
    out = []
    for asked in topics:
        topic = found.get(str(asked["topic_name"]))
        answers = []
        for index in asked.get("partitions") or ():
            part = parts.get((topic.id, int(index))) if topic else None
            if part is None:
                answers.append({"partition_index": int(index), "start_offset": -1, "lag": -1,
                                "error_code": _UNKNOWN,
                                "error_message": "This server does not host this topic-partition."})  # fmt: skip
            else:
                answers.append(_partition_answer(part, rows.get(part.id)))
        out.append({"topic_name": asked["topic_name"],
                    "topic_id": str(topic.id) if topic else ZERO_ID, "partitions": answers})  # fmt: skip
    return out


def _group_for_change(cluster: VirtualCluster, group_id: str, *, create: bool) -> Any:
    """The group row, locked — or the top-level error: no such share group (the id of
    a consumer group is none), or a member's session lasts."""
    group = (
        ShareGroup.objects.select_for_update().filter(cluster=cluster, group_id=group_id).first()
    )
    if group is None:
        consumer = (
            GroupLease.objects.filter(cluster=cluster, group_id=group_id).exists()
            or GroupOffset.objects.filter(cluster=cluster, group_id=group_id).exists()
        )
        if not create or consumer or not group_id:
            return _error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        ShareGroup.objects.bulk_create(
            [ShareGroup(cluster=cluster, group_id=group_id)], ignore_conflicts=True
        )
        group = ShareGroup.objects.select_for_update().get(cluster=cluster, group_id=group_id)
    if live_members(group):
        return _error(ErrorCode.NON_EMPTY_GROUP, f"Share group {group_id} is not empty.")
    return group


@transaction.atomic
def share_offsets_alter(cluster: VirtualCluster, *, group_id: str, topics: list[JSON]) -> JSON:
    """Start each named partition over at its offset (nothing in flight). A group not
    seen yet is created with these offsets, as Kafka does."""
    group = _group_for_change(cluster, group_id, create=True)
    if isinstance(group, dict):
        return {**group, "responses": []}
    found = _topics(cluster, [str(t["topic_name"]) for t in topics])
    parts = {
        (p.topic_id, p.index): p for p in Partition.objects.filter(topic__in=list(found.values()))
    }
    wanted: dict[int, int] = {}
    responses = []
    for asked in topics:
        topic = found.get(str(asked["topic_name"]))
        answers = []
        for p in asked.get("partitions") or ():
            index, offset = int(p["partition_index"]), int(p["start_offset"])
            part = parts.get((topic.id, index)) if topic else None
            if part is None:
                answer = _error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                "This server does not host this topic-partition.")  # fmt: skip
            elif offset < 0:
                answer = _error(ErrorCode.INVALID_REQUEST, f"start offset {offset} is negative")
            else:
                wanted[part.id] = offset
                answer = {"error_code": 0, "error_message": None}
            answers.append({"partition_index": index, **answer})
        responses.append({"topic_name": asked["topic_name"],
                          "topic_id": str(topic.id) if topic else ZERO_ID,
                          "partitions": answers})  # fmt: skip
    if wanted:
        SharePartition.objects.filter(
            cluster=cluster, group_id=group_id, partition_id__in=wanted
        ).delete()
        SharePartition.objects.bulk_create(
            [
                SharePartition(cluster=cluster, group_id=group_id, partition_id=pid,
                               start_offset=offset, end_offset=offset, in_flight=[])
                for pid, offset in sorted(wanted.items())
            ]
        )  # fmt: skip
    return {"error_code": 0, "error_message": None, "responses": responses}


@transaction.atomic
def share_offsets_delete(cluster: VirtualCluster, *, group_id: str, topics: list[str]) -> JSON:
    """Forget the group's state of each named topic: its next fetch starts where
    `share.auto.offset.reset` says."""
    group = _group_for_change(cluster, group_id, create=False)
    if isinstance(group, dict):
        return {**group, "responses": []}
    found = _topics(cluster, topics)
    responses = []
    for name in topics:
        topic = found.get(name)
        if topic is None:
            answer = _error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            "This server does not host this topic-partition.")  # fmt: skip
        else:
            deleted, _ = SharePartition.objects.filter(
                cluster=cluster, group_id=group_id, partition__topic=topic
            ).delete()
            answer = (
                {"error_code": 0, "error_message": None}
                if deleted
                else _error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            "There is no offset information to delete.")
            )  # fmt: skip
        responses.append({"topic_name": name, "topic_id": str(topic.id) if topic else ZERO_ID,
                          **answer})  # fmt: skip
    return {"error_code": 0, "error_message": None, "responses": responses}
