"""Consumer groups described whole, with their lag — for the REST API and the console.

Offset lag of a partition: high watermark − committed offset (never below 0).

Time lag: now − the max timestamp of the batch that holds the committed offset, i.e.
how long ago the next record the group will read was written; 0 when the group is
caught up. It is batch-precise: a batch's max timestamp is its newest record's, so for
a batch spanning several seconds the lag is understated by up to that span. Timestamps
are what the batch index holds (the producer's CreateTime, or LogAppendTime).

Partitions a live member is assigned but the group never committed show up with
`committed_offset` None and no lag (Kafka's tools print "-").
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from metadata_store.models import GroupOffset, Partition
from metadata_store.selectors import batch_max_timestamps
from virtualclusters.groups.models import GroupReport
from virtualclusters.groups.services import group_summaries, live_since
from virtualclusters.models import VirtualCluster


def _time_lag_s(lag: int | None, timestamp: int | None, now_ms: int) -> float | None:
    if lag is None:
        return None
    if lag == 0:
        return 0.0
    if timestamp is None or timestamp < 0:
        return None
    return round(max(now_ms - timestamp, 0) / 1000, 3)


def groups_describe(
    cluster: VirtualCluster, group_ids: Iterable[str] | None = None
) -> list[dict[str, Any]]:
    """Every group of the cluster (or those named): state, members, assignments, and per
    partition the committed offset, high watermark and lag. A handful of queries however
    many groups and partitions there are."""
    summaries = group_summaries(cluster, group_ids)
    if not summaries:
        return []
    reports = {
        r.group_id: r
        for r in GroupReport.objects.filter(
            cluster=cluster, group_id__in=list(summaries), reported_at__gte=live_since()
        )
    }
    committed: dict[str, dict[tuple[str, int], dict[str, Any]]] = {g: {} for g in summaries}
    for offset_row in GroupOffset.objects.filter(
        cluster=cluster, group_id__in=list(summaries)
    ).values(
        "group_id",
        "partition_id",
        "committed_offset",
        "committed_at",
        "partition__index",
        "partition__high_watermark",
        "partition__topic__name",
    ):
        topic_partition = (offset_row["partition__topic__name"], offset_row["partition__index"])
        committed[offset_row["group_id"]][topic_partition] = dict(offset_row)

    # Who holds which partition, and the partitions held but never committed.
    owners: dict[str, dict[tuple[str, int], dict[str, Any]]] = {g: {} for g in summaries}
    uncommitted: set[tuple[str, int]] = set()
    for group_id, report in reports.items():
        for member in report.members:
            for assigned in member.get("assignment") or ():
                for partition in assigned.get("partitions") or ():
                    key = (str(assigned["topic"]), int(partition))
                    owners[group_id][key] = member
                    if key not in committed[group_id]:
                        uncommitted.add(key)
    high_watermarks = {}
    if uncommitted:
        high_watermarks = {
            (name, index): hw
            for name, index, hw in Partition.objects.filter(
                topic__cluster=cluster, topic__name__in={t for t, _ in uncommitted}
            ).values_list("topic__name", "index", "high_watermark")
        }

    behind = [
        (row["partition_id"], row["committed_offset"])
        for rows in committed.values()
        for row in rows.values()
        if row["partition__high_watermark"] > row["committed_offset"]
    ]
    timestamps = batch_max_timestamps(behind)
    now_ms = int(time.time() * 1000)

    described = []
    for group_id in sorted(summaries):
        summary = summaries[group_id]
        group_report = reports.get(group_id)
        partitions: list[dict[str, Any]] = []
        keys = sorted(set(committed[group_id]) | set(owners[group_id]))
        for key in keys:
            row = committed[group_id].get(key)
            owner = owners[group_id].get(key)
            if row is not None:
                offset, hw = row["committed_offset"], row["partition__high_watermark"]
                lag: int | None = max(hw - offset, 0)
                ts = timestamps.get((row["partition_id"], offset))
            else:
                offset, hw, lag, ts = None, high_watermarks.get(key), None, None
            partitions.append(
                {
                    "topic": key[0],
                    "partition": key[1],
                    "committed_offset": offset,
                    "high_watermark": hw,
                    "lag": lag,
                    "lag_seconds": _time_lag_s(lag, ts, now_ms),
                    "committed_at": row["committed_at"] if row else None,
                    "member_id": owner["member_id"] if owner else None,
                    "client_id": owner.get("client_id") if owner else None,
                }
            )
        time_lags = [p["lag_seconds"] for p in partitions if p["lag_seconds"] is not None]
        described.append(
            {
                "group_id": group_id,
                "state": summary.state,
                "protocol_type": summary.protocol_type,
                "group_type": summary.group_type,
                "protocol": group_report.protocol if group_report else "",
                "generation": group_report.generation if group_report else None,
                "assignment_epoch": (
                    group_report.assignment_epoch
                    if group_report and group_report.group_type == "consumer"
                    else None
                ),
                "coordinator": summary.agent_id,
                "members": list(group_report.members) if group_report else [],
                "partitions": partitions,
                "total_lag": sum(p["lag"] or 0 for p in partitions),
                "max_lag_seconds": max(time_lags, default=0.0),
            }
        )
    return described
