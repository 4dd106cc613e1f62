"""Reads for topic tables: how far each table got (its current snapshot's summary in
the catalog's metadata document), its lag behind its topic, and which are due."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from metadata_store.models import Batch, Partition
from virtualclusters.models import VirtualCluster
from virtualclusters.tables.models import IcebergTable, TopicTable

LAST_OFFSETS = "floe.last-offsets"  # jobs/table_append.py writes it in each snapshot


def table_last_offsets(table: IcebergTable) -> dict[int, int]:
    """Partition → last offset in the table, from its current snapshot's summary."""
    metadata = table.metadata
    current = metadata.get("current-snapshot-id")
    for snapshot in metadata.get("snapshots") or []:
        if snapshot.get("snapshot-id") == current:
            text = (snapshot.get("summary") or {}).get(LAST_OFFSETS)
            return {int(p): int(o) for p, o in json.loads(text).items()} if text else {}
    return {}


def table_rows(table: IcebergTable) -> int:
    metadata = table.metadata
    current = metadata.get("current-snapshot-id")
    for snapshot in metadata.get("snapshots") or []:
        if snapshot.get("snapshot-id") == current:
            return int((snapshot.get("summary") or {}).get("total-records") or 0)
    return 0


def lag_records(topic_table: TopicTable, offsets: dict[int, int]) -> int:
    """Records in the topic not yet in the table (from each partition's log start)."""
    lag = 0
    for index, start, end in Partition.objects.filter(topic_id=topic_table.topic_id).values_list(
        "index", "log_start_offset", "high_watermark"
    ):
        lag += max(0, end - max(start, offsets.get(index, -1) + 1))
    return lag


def table_snapshot(table: IcebergTable) -> dict[str, Any] | None:
    """The current snapshot: its id, when it was committed, and the table's data files
    and their bytes (from its summary)."""
    metadata = table.metadata
    current = metadata.get("current-snapshot-id")
    for snapshot in metadata.get("snapshots") or []:
        if snapshot.get("snapshot-id") == current:
            summary = snapshot.get("summary") or {}
            return {
                "id": current,
                "committed_at": datetime.fromtimestamp(snapshot["timestamp-ms"] / 1000, tz=UTC),
                "operation": summary.get("operation"),
                "files": int(summary.get("total-data-files") or 0),
                "bytes": int(summary.get("total-files-size") or 0),
            }
    return None


def table_behind(
    topic_table: TopicTable, offsets: dict[int, int], *, now: datetime
) -> dict[str, Any]:
    """How far the table is behind its topic: ``lag_seconds`` (since the oldest record
    not in the table was committed to the topic; 0 when none is missing) and, while
    records the topic held before the table was switched on are still missing (its
    first backfill), ``backfill``: {``done``, ``total``} records."""
    oldest: datetime | None = None
    done = missing = 0
    backfilling = False
    for partition_id, index, start, end in Partition.objects.filter(
        topic_id=topic_table.topic_id
    ).values_list("id", "index", "log_start_offset", "high_watermark"):
        first = max(start, offsets.get(index, -1) + 1)
        done += max(0, min(first, end) - start)
        if first >= end:
            continue
        missing += end - first
        run = (
            Batch.objects.filter(partition_id=partition_id, last_offset__gte=first)
            .order_by("last_offset")
            .values_list("file__created_at", flat=True)
            .first()
        )
        if run is not None:
            oldest = run if oldest is None else min(oldest, run)
            backfilling = backfilling or run < topic_table.created_at
    return {
        "lag_seconds": 0 if oldest is None else max(0, int((now - oldest).total_seconds())),
        "backfill": {"done": done, "total": done + missing} if backfilling else None,
    }


def due_tables(cluster: VirtualCluster, *, now: datetime) -> list[TopicTable]:
    due = []
    candidates = TopicTable.objects.filter(
        topic__cluster=cluster, state=TopicTable.State.ACTIVE
    ).select_related("table", "topic__cluster", "dead_letters")
    for topic_table in candidates:
        last = topic_table.last_appended_at
        if last is not None and last > now - timedelta(seconds=topic_table.freshness_seconds):
            continue
        if lag_records(topic_table, table_last_offsets(topic_table.table)) > 0:
            due.append(topic_table)
    return due


def table_append_due(cluster: VirtualCluster, *, now: datetime) -> bool:
    return bool(due_tables(cluster, now=now))
