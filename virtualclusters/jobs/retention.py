"""Retention: move log start offsets as the topics' retention asks, drop the index rows
below them, mark the files nothing references, and delete those past their grace
period (the retention job, in the data plane). The index's side of it:
``metadata_store.retention``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from metadata_store import retention as index_retention
from metadata_store.models import SegmentFile
from metadata_store.rewrites import files_release
from virtualclusters.jobs import selectors
from virtualclusters.jobs.models import JobRun
from virtualclusters.jobs.steps import Step, deletion, grace, plan_keep
from virtualclusters.models import VirtualCluster

MAX_DELETES_PER_RUN = 100_000


def retention_apply(*, cluster: VirtualCluster, now: datetime | None = None) -> dict[str, Any]:
    """The metadata half of retention: move log start offsets as retention.ms and
    retention.bytes call for, drop the index rows below them, and mark the files that
    no row references any more as replaced (their grace period starts now)."""
    moves = selectors.retention_offsets(cluster, now=now or timezone.now())
    if moves:
        index_retention.log_start_offsets_advance(moves=moves)
    deleted, released = index_retention.batches_below_log_start_delete(cluster_id=cluster.id)
    released += files_unreferenced_mark(cluster=cluster)
    return {
        "partitions_advanced": len(moves),
        "batches_deleted": deleted,
        "files_released": released,
    }


@transaction.atomic
def files_unreferenced_mark(*, cluster: VirtualCluster) -> int:
    """Live files no index row points at (their topic was deleted, every batch was a
    duplicate…) become replaced. Safe against commits and swaps: both add a file and
    its rows in one transaction."""
    ids = list(selectors.unreferenced_live_files(cluster).values_list("id", flat=True))
    if not ids:
        return 0
    return files_release(ids)


def files_mark_deleted(*, cluster: VirtualCluster, file_ids: list[int]) -> int:
    """Files whose objects are gone become deleted."""
    return SegmentFile.objects.filter(
        cluster=cluster, id__in=file_ids, state=SegmentFile.State.REPLACED
    ).update(state=SegmentFile.State.DELETED)


def retention_begin(run: JobRun) -> Step | dict[str, Any]:
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
    # `unreferenced_at` is set on every row here (the filter compares it), never None.
    entries = [(i, key, since) for i, key, _, since in due if since is not None]
    return deletion(entries, now=now, stage="deleting")


def retention_continue(run: JobRun, result: dict[str, Any]) -> dict[str, Any]:
    kept = run.details["_plan"]
    sizes = {i: size for i, size in kept["sizes"]}
    deleted_ids = {row[0] for row in result["deleted"] if row[0] in sizes}
    files_mark_deleted(cluster=run.cluster, file_ids=list(deleted_ids))
    return {
        "input_files": len(deleted_ids),
        "input_bytes": sum(sizes[i] for i in deleted_ids),
        "details": {**kept["applied"], "files_deleted": len(deleted_ids)},
    }
