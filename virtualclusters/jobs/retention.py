"""Retention: move log start offsets as the topics' retention asks, drop the index rows
below them, mark the files nothing references, and delete those past their grace
period (the retention job, in the data plane)."""

from __future__ import annotations

from datetime import datetime

from django.db import connection, transaction
from django.utils import timezone

from metadata_store.models import SegmentFile
from virtualclusters.jobs import selectors
from virtualclusters.jobs.compaction import files_release
from virtualclusters.jobs.models import JobRun
from virtualclusters.jobs.steps import Step, deletion, grace, plan_keep
from virtualclusters.models import VirtualCluster

MAX_DELETES_PER_RUN = 100_000


def retention_apply(*, cluster: VirtualCluster, now: datetime | None = None) -> dict:
    """The metadata half of retention: move log start offsets as retention.ms and
    retention.bytes call for, drop the index rows below them, and mark the files that
    no row references any more as replaced (their grace period starts now)."""
    moves = selectors.retention_offsets(cluster, now=now or timezone.now())
    if moves:
        log_start_offsets_advance(moves=moves)
    deleted, released = batches_below_log_start_delete(cluster=cluster)
    released += files_unreferenced_mark(cluster=cluster)
    return {
        "partitions_advanced": len(moves),
        "batches_deleted": deleted,
        "files_released": released,
    }


@transaction.atomic
def log_start_offsets_advance(*, moves: dict[int, int]) -> None:
    """Raise log start offsets (never lower them, never past the high watermark)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id FROM floe_partition WHERE id = ANY(%s) ORDER BY id FOR UPDATE",
            [sorted(moves)],
        )
        cursor.execute(
            "UPDATE floe_partition p"
            " SET log_start_offset = greatest(p.log_start_offset, least(u.start, p.high_watermark))"
            " FROM unnest(%s::bigint[], %s::bigint[]) AS u(id, start) WHERE p.id = u.id",
            [list(moves), list(moves.values())],
        )


@transaction.atomic
def batches_below_log_start_delete(*, cluster: VirtualCluster) -> tuple[int, int]:
    """Drop index rows wholly below their partition's log start offset (retention,
    DeleteRecords); (rows deleted, files released)."""
    below = (
        " FROM floe_partition p JOIN floe_topic t ON t.id = p.topic_id"
        " CROSS JOIN LATERAL (SELECT file_id FROM floe_batch"
        "  WHERE partition_id = p.id AND last_offset < p.log_start_offset) b"
        " WHERE t.cluster_id = %s"
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT b.file_id" + below, [cluster.id])
        file_ids = [row[0] for row in cursor.fetchall()]
        if not file_ids:
            return 0, 0
        cursor.execute(
            "SELECT id FROM floe_file WHERE id = ANY(%s) ORDER BY id FOR UPDATE", [file_ids]
        )
        cursor.execute(
            "DELETE FROM floe_batch x USING floe_partition p, floe_topic t"
            " WHERE t.cluster_id = %s AND p.topic_id = t.id AND x.partition_id = p.id"
            " AND x.last_offset < p.log_start_offset",
            [cluster.id],
        )
        deleted = cursor.rowcount
        return deleted, files_release(cursor, file_ids)


@transaction.atomic
def files_unreferenced_mark(*, cluster: VirtualCluster) -> int:
    """Live files no index row points at (their topic was deleted, every batch was a
    duplicate…) become replaced. Safe against commits and swaps: both add a file and
    its rows in one transaction."""
    ids = list(selectors.unreferenced_live_files(cluster).values_list("id", flat=True))
    if not ids:
        return 0
    with connection.cursor() as cursor:
        return files_release(cursor, ids)


def files_mark_deleted(*, cluster: VirtualCluster, file_ids: list[int]) -> int:
    """Files whose objects are gone become deleted."""
    return SegmentFile.objects.filter(
        cluster=cluster, id__in=file_ids, state=SegmentFile.State.REPLACED
    ).update(state=SegmentFile.State.DELETED)


def retention_begin(run: JobRun) -> Step | dict:
    now = timezone.now()
    applied = retention_apply(cluster=run.cluster, now=now)
    due = list(
        selectors.files_past_grace(run.cluster, unreferenced_before=now - grace()).values_list(
            "id", "key", "size", "unreferenced_at"
        )[:MAX_DELETES_PER_RUN]
    )
    if not due:
        return {"details": {**applied, "files_deleted": 0}}
    plan_keep(run, {"applied": applied, "sizes": [[i, size] for i, _, size, _ in due]})
    return deletion([(i, key, since) for i, key, _, since in due], now=now, stage="deleting")


def retention_continue(run: JobRun, result: dict) -> dict:
    kept = run.details["_plan"]
    sizes = {i: size for i, size in kept["sizes"]}
    deleted_ids = {row[0] for row in result["deleted"] if row[0] in sizes}
    files_mark_deleted(cluster=run.cluster, file_ids=list(deleted_ids))
    return {
        "input_files": len(deleted_ids),
        "input_bytes": sum(sizes[i] for i in deleted_ids),
        "details": {**kept["applied"], "files_deleted": len(deleted_ids)},
    }
