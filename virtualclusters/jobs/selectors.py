"""Reads for the background jobs: is there work, and the plans the Spark jobs are given.

Plans carry only metadata — object keys, byte ranges, offsets, sizes, timestamps — in
the row layouts the jobs expect (``jobs/compaction.py``'s ``BATCH_COLUMNS``, …).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, Exists, OuterRef, QuerySet, Sum

from core.journal_keys import JOURNAL_FOLDER
from metadata_store import retention as index_retention
from metadata_store import rewrites
from metadata_store.models import Agent, Batch, SegmentFile, Topic
from metadata_store.rewrites import KeyCompactionPlan
from metadata_store.topic_configs import TOPIC_CONFIGS
from virtualclusters.jobs.models import JobRun
from virtualclusters.models import VirtualCluster
from virtualclusters.tables.selectors import table_append_due

Kind = JobRun.Kind


def epoch_ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


# --- topic policies ------------------------------------------------------------------


@dataclass(frozen=True)
class TopicPolicy:
    """The topic configs the jobs act on, overrides applied over the defaults."""

    topic_id: str
    delete: bool  # cleanup.policy has "delete": retention applies
    compact: bool  # cleanup.policy has "compact": key compaction applies
    retention_ms: int  # -1: forever
    retention_bytes: int  # -1: no limit
    delete_retention_ms: int
    min_compaction_lag_ms: int
    min_cleanable_dirty_ratio: float
    # Under a migration (`Topic.mirrored_by`): its partitions hold what the source's
    # hold, so no job of Floe's moves their log start or drops their records until the
    # cutover (docs/ARCHITECTURE.md "Migration").
    mirrored: bool = False


def topic_policies(cluster: VirtualCluster) -> list[TopicPolicy]:
    policies = []
    for topic in Topic.objects.filter(cluster=cluster).only("id", "configs", "mirrored_by"):

        def config(name: str, topic: Topic = topic) -> str:
            if name in topic.configs:
                return str(topic.configs[name])
            if name == "retention.ms":
                return str(cluster.default_retention_ms)
            return TOPIC_CONFIGS[name].default

        cleanup = {p.strip() for p in config("cleanup.policy").split(",")}
        policies.append(
            TopicPolicy(
                topic_id=str(topic.id),
                delete="delete" in cleanup,
                compact="compact" in cleanup,
                retention_ms=int(config("retention.ms")),
                retention_bytes=int(config("retention.bytes")),
                delete_retention_ms=int(config("delete.retention.ms")),
                min_compaction_lag_ms=int(config("min.compaction.lag.ms")),
                min_cleanable_dirty_ratio=float(config("min.cleanable.dirty.ratio")),
                mirrored=bool(topic.mirrored_by),
            )
        )
    return policies


# --- compaction ----------------------------------------------------------------------


def compaction_candidates(cluster: VirtualCluster) -> QuerySet[SegmentFile]:
    """Live ingestion (level-0) files, oldest first."""
    return SegmentFile.objects.filter(
        cluster=cluster, state=SegmentFile.State.LIVE, level=0
    ).order_by("id")


def compaction_inputs(
    cluster: VirtualCluster, *, max_files: int, max_bytes: int
) -> list[SegmentFile]:
    """The oldest level-0 files, up to `max_files` and about `max_bytes` (at least two)."""
    chosen: list[SegmentFile] = []
    total = 0
    for file in compaction_candidates(cluster).only("id", "key", "size")[:max_files]:
        if len(chosen) >= 2 and total + file.size > max_bytes:
            break
        chosen.append(file)
        total += file.size
    return chosen


# --- retention ----------------------------------------------------------------------


def retention_offsets(cluster: VirtualCluster, *, now: datetime) -> dict[int, int]:
    """partition id → the log start offset retention.ms / retention.bytes call for,
    for the partitions where it is ahead of the current one.

    Time: the first batch (from the log start) whose max timestamp is within
    retention.ms starts the log; none → the log is empty (high watermark). Size: the
    newest batches whose lengths add up to at most retention.bytes stay, and always the
    newest one. Mirrored topics are left out: their log start follows the source's.
    """
    now_ms = epoch_ms(now)
    limits = {
        p.topic_id: (
            now_ms - p.retention_ms if p.retention_ms >= 0 else None,
            p.retention_bytes if p.retention_bytes >= 0 else None,
        )
        for p in topic_policies(cluster)
        if p.delete and not p.mirrored and (p.retention_ms >= 0 or p.retention_bytes >= 0)
    }
    if not limits:
        return {}
    moves = {}
    for pid, start, high_watermark, by_time, by_size in index_retention.retention_starts(limits):
        wanted = min(high_watermark, max(start, by_time or 0, by_size or 0))
        if wanted > start:
            moves[pid] = wanted
    return moves


def has_batches_below_log_start(cluster: VirtualCluster) -> bool:
    """Whether some index rows lie wholly below their partition's log start offset."""
    return index_retention.has_batches_below_log_start(cluster_id=cluster.id)


def _referenced() -> Exists:
    return Exists(Batch.objects.filter(file_id=OuterRef("id")))


def unreferenced_live_files(cluster: VirtualCluster) -> QuerySet[SegmentFile]:
    """Live files no index row points at (expired, topic deleted, all duplicates)."""
    return SegmentFile.objects.filter(cluster=cluster, state=SegmentFile.State.LIVE).exclude(
        _referenced()
    )


def files_past_grace(
    cluster: VirtualCluster, *, unreferenced_before: datetime
) -> QuerySet[SegmentFile]:
    """Replaced files unreferenced since before the given moment: ready to delete."""
    return (
        SegmentFile.objects.filter(
            cluster=cluster,
            state=SegmentFile.State.REPLACED,
            unreferenced_at__lte=unreferenced_before,
        )
        .exclude(_referenced())
        .order_by("id")
    )


def retention_due(cluster: VirtualCluster, *, now: datetime, unreferenced_before: datetime) -> bool:
    return (
        files_past_grace(cluster, unreferenced_before=unreferenced_before).exists()
        or unreferenced_live_files(cluster).exists()
        or has_batches_below_log_start(cluster)
        or bool(retention_offsets(cluster, now=now))
    )


# --- orphan cleanup ------------------------------------------------------------------


def known_file_keys(cluster: VirtualCluster, keys: list[str] | None = None) -> set[str]:
    """Keys of the cluster's files that are live or awaiting deletion."""
    rows = SegmentFile.objects.filter(cluster=cluster).exclude(state=SegmentFile.State.DELETED)
    if keys is not None:
        rows = rows.filter(key__in=keys)
    return set(rows.values_list("key", flat=True))


def protected_output_roots(
    cluster: VirtualCluster, *, exclude_run: JobRun | None = None
) -> list[str]:
    """Object prefixes that hold no orphans: outputs of jobs that are queued or running,
    and the agents' journals (a lightning file is in the bucket, acknowledged, before it
    is committed — possibly long after, by another agent: docs/ARCHITECTURE.md
    "Lightning topics")."""
    runs = JobRun.objects.active().filter(cluster=cluster)
    if exclude_run is not None:
        runs = runs.exclude(pk=exclude_run.pk)
    roots = [root for root in runs.values_list("details__output_root", flat=True) if root]
    return [f"{cluster.public_id}/{JOURNAL_FOLDER}/", *roots]


def orphan_cleanup_due(cluster: VirtualCluster) -> bool:
    """Anything ever written for the cluster: its files, or agents that may have PUT."""
    return (
        SegmentFile.objects.filter(cluster=cluster).exists()
        or Agent.objects.filter(cluster=cluster).exists()
    )


# --- key compaction ------------------------------------------------------------------


def cleaned_offsets(cluster: VirtualCluster) -> dict[int, int]:
    """partition id → last offset the latest key compaction covered."""
    last = (
        JobRun.objects.filter(
            cluster=cluster, kind=Kind.KEY_COMPACTION, state=JobRun.State.SUCCEEDED
        )
        .order_by("-id")
        .values_list("details__cleaned", flat=True)
        .first()
    )
    return {int(pid): int(offset) for pid, offset in (last or {}).items()}


def key_compaction_dirty(cluster: VirtualCluster) -> dict[int, TopicPolicy]:
    """Partitions of compacted topics with enough records written since the last key
    compaction covered them (min.cleanable.dirty.ratio), with their topic's policy.
    Mirrored topics are left out: the source compacts them (its gaps are copied)."""
    policies = {p.topic_id: p for p in topic_policies(cluster) if p.compact and not p.mirrored}
    if not policies:
        return {}
    cleaned = cleaned_offsets(cluster)
    dirty = {}
    for pid, topic_id, start, high_watermark in rewrites.partition_offsets(list(policies)):
        total = high_watermark - start
        new = high_watermark - max(start, cleaned.get(pid, -1) + 1)
        policy = policies[topic_id]
        if total > 0 and new > 0 and new / total >= policy.min_cleanable_dirty_ratio:
            dirty[pid] = policy
    return dirty


def key_compaction_plan(cluster: VirtualCluster, *, now: datetime) -> KeyCompactionPlan:
    """The index rows (partition runs) of every dirty compacted partition, from its log
    start up to the first run younger than min.compaction.lag.ms or reaching the last
    stable offset (an open transaction's records may still commit or abort)."""
    now_ms = epoch_ms(now)
    plan = KeyCompactionPlan([], {}, {}, {})
    dirty = key_compaction_dirty(cluster)
    if not dirty:
        return plan
    stopped: set[int] = set()
    for (
        pid,
        topic_id,
        index,
        base,
        last,
        key,
        pos,
        length,
        count,
        max_ts,
        file_id,
        rewrite,
        stable,
    ) in rewrites.key_compaction_rows(list(dirty)):
        policy = dirty[pid]
        unstable = stable is not None and last >= stable
        if pid in stopped or unstable or max_ts > now_ms - policy.min_compaction_lag_ms:
            stopped.add(pid)  # the uncleanable tail starts here
            continue
        cutoff = now_ms - policy.delete_retention_ms
        plan.rows.append(
            (pid, topic_id, index, base, last, key, pos, length, rewrite, count, cutoff)
        )
        plan.file_ids[(pid, last)] = file_id
        plan.record_counts[(pid, last)] = count
        plan.covered[pid] = last
    if plan.covered:
        plan.aborted = rewrites.aborted_transactions(list(plan.covered))
    return plan


# --- what is due, and the console ---------------------------------------------------


def job_due(cluster: VirtualCluster, kind: str, *, now: datetime) -> bool:
    """Whether a job of `kind` has work to do for the cluster (thresholds: FLOE_* settings)."""
    if kind == Kind.COMPACTION:
        return compaction_candidates(cluster).count() >= int(settings.FLOE_COMPACTION_MIN_FILES)
    if kind == Kind.RETENTION:
        grace = timedelta(seconds=settings.FLOE_FILE_DELETE_GRACE_S)
        return retention_due(cluster, now=now, unreferenced_before=now - grace)
    if kind == Kind.ORPHAN_CLEANUP:
        return orphan_cleanup_due(cluster)
    if kind == Kind.KEY_COMPACTION:
        return bool(key_compaction_dirty(cluster))
    if kind == Kind.TABLE_APPEND:
        return table_append_due(cluster, now=now)
    raise ValueError(f"unknown job kind {kind!r}")


def job_runs(cluster: VirtualCluster) -> QuerySet[JobRun]:
    """The cluster's job runs, newest first."""
    return JobRun.objects.filter(cluster=cluster).order_by("-created_at", "-id")


def storage_summary(cluster: VirtualCluster) -> dict[str, Any]:
    """Live files and bytes per level, and what awaits deletion."""
    files = SegmentFile.objects.filter(cluster=cluster)
    levels = list(
        files.filter(state=SegmentFile.State.LIVE)
        .values("level")
        .annotate(files=Count("id"), bytes=Sum("size"))
        .order_by("level")
    )
    pending = files.filter(state=SegmentFile.State.REPLACED).aggregate(
        files=Count("id"), bytes=Sum("size")
    )
    return {
        "levels": levels,
        "live_files": sum(level["files"] for level in levels),
        "live_bytes": sum(level["bytes"] or 0 for level in levels),
        "awaiting_deletion_files": pending["files"],
        "awaiting_deletion_bytes": pending["bytes"] or 0,
        "deleted_files": files.filter(state=SegmentFile.State.DELETED).count(),
    }
