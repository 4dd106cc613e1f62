"""Usage read from the metadata store for the billing meters: what was written, what is
stored, which agents were alive and what their counters say. Reads only; the meters
(``billing/meters.py``) turn them into usage rows in the same transaction.

Each row names its cluster as (organization id, cluster id, public id) — the join to the
clusters table the meters group by."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connection

from core.segment import ENTRY_SIZE, TRAILER_SIZE


def _rows(sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows: list[tuple[Any, ...]] = cursor.fetchall()
        return rows


def files_written_bound(*, after_id: int, settled: datetime) -> int:
    """The id of the first file after `after_id` too young to count (created at or after
    `settled`), or one past the newest file: ids are handed out in order, but a younger
    transaction may commit before an older one."""
    ((bound,),) = _rows(
        "SELECT coalesce(min(id), (SELECT coalesce(max(id), 0) + 1 FROM floe_file))"
        " FROM floe_file WHERE id > %s AND created_at >= %s",
        [after_id, settled],
    )
    return int(bound)


def files_written_by_hour(*, after_id: int, before_id: int) -> list[tuple[Any, ...]]:
    """Level-0 files with ids in (after_id, before_id), per cluster and UTC hour:
    (org id, cluster id, public id, hour (naive UTC), record bytes, files, max file id).
    Record bytes: ``data_bytes``, or for files older than that column the size less the
    index footer."""
    return _rows(
        "SELECT c.organization_id, c.id, c.public_id,"
        "       date_trunc('hour', f.created_at AT TIME ZONE 'UTC'),"
        "       sum(coalesce(f.data_bytes, f.size - %s * f.batch_count - %s)), count(*),"
        "       max(f.id)"
        " FROM floe_file f JOIN virtualclusters_virtualcluster c ON c.id = f.cluster_id"
        " WHERE f.id > %s AND f.id < %s AND f.level = 0"
        " GROUP BY 1, 2, 3, 4",
        [ENTRY_SIZE, TRAILER_SIZE, after_id, before_id],
    )


def topic_bytes_written_by_hour(*, after_id: int, before_id: int) -> list[tuple[Any, ...]]:
    """The topics' shares of the same files, from their partition runs: (org id, public
    id, topic, hour (naive UTC), bytes)."""
    return _rows(
        "SELECT c.organization_id, c.public_id, t.name,"
        "       date_trunc('hour', f.created_at AT TIME ZONE 'UTC'), sum(b.length)"
        " FROM floe_file f JOIN virtualclusters_virtualcluster c ON c.id = f.cluster_id"
        " JOIN floe_batch b ON b.file_id = f.id"
        " JOIN floe_partition p ON p.id = b.partition_id"
        " JOIN floe_topic t ON t.id = p.topic_id"
        " WHERE f.id > %s AND f.id < %s AND f.level = 0"
        " GROUP BY 1, 2, 3, 4",
        [after_id, before_id],
    )


def stored_by_cluster() -> list[tuple[Any, ...]]:
    """Every cluster's live file bytes and partitions: (org id, cluster id, public id,
    bytes, partitions)."""
    return _rows(
        "SELECT c.organization_id, c.id, c.public_id,"
        "  (SELECT coalesce(sum(size), 0) FROM floe_file f"
        "    WHERE f.cluster_id = c.id AND f.state = 'live'),"
        "  (SELECT count(*) FROM floe_partition p JOIN floe_topic t ON t.id = p.topic_id"
        "    WHERE t.cluster_id = c.id)"
        " FROM virtualclusters_virtualcluster c"
    )


def stored_by_topic() -> list[tuple[Any, ...]]:
    """Every topic's live bytes, from the index: (org id, public id, topic, bytes)."""
    return _rows(
        "SELECT c.organization_id, c.public_id, t.name, sum(b.length)"
        " FROM floe_batch b JOIN floe_file f ON f.id = b.file_id AND f.state = 'live'"
        " JOIN floe_partition p ON p.id = b.partition_id"
        " JOIN floe_topic t ON t.id = p.topic_id"
        " JOIN virtualclusters_virtualcluster c ON c.id = t.cluster_id"
        " GROUP BY 1, 2, 3"
    )


def agents_alive_since(since: datetime) -> list[tuple[Any, ...]]:
    """Agents that heartbeated at or after `since`: (org id, public id, started at, last
    heartbeat)."""
    return _rows(
        "SELECT c.organization_id, c.public_id, a.started_at, a.last_heartbeat"
        " FROM floe_agent a JOIN virtualclusters_virtualcluster c ON c.id = a.cluster_id"
        " WHERE a.last_heartbeat >= %s",
        [since],
    )


def agent_counters() -> list[tuple[Any, ...]]:
    """Agents that reported counters: (org id, cluster id, public id, agent id, stats)."""
    return _rows(
        "SELECT c.organization_id, c.id, c.public_id, a.agent_id, a.stats"
        " FROM floe_agent a JOIN virtualclusters_virtualcluster c ON c.id = a.cluster_id"
        " WHERE a.stats <> '{}'::jsonb"
    )
