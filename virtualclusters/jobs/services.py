"""A job run's lifecycle: dispatching runs, starting, advancing and finishing them,
expiring the lost ones, pruning history.

A run goes: a beat check finds work (`job_dispatch`, a queued `JobRun`) → a jobs-role
agent of the cluster leases it (`leases`) → `job_run_advance` plans its first step (a
Spark job of ``jobs/`` and its plan; kept on the run for the compare-and-swap) → the
agent runs it on its own bucket and reports → `job_run_advance` applies the result
(compaction: one compare-and-swap transaction) and answers the next step or none; the
outcome lands on the `JobRun`. What each kind plans and applies: ``compaction``
(compaction and key compaction), ``retention``, ``orphans``, and topic tables' appends
(``virtualclusters.tables.topic_tables``); what they share: ``steps``.
The control plane never runs a Spark job itself (tests and benchmarks drive the same
steps in their own process: ``tests/jobs/driver.py``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from metadata_store import leases
from metadata_store.models import SegmentFile
from virtualclusters.jobs import compaction, orphans, retention, selectors
from virtualclusters.jobs.models import JobRun
from virtualclusters.jobs.steps import Step, details_update, output_root, outputs_of
from virtualclusters.models import VirtualCluster
from virtualclusters.tables import topic_tables

log = logging.getLogger(__name__)

Kind, State = JobRun.Kind, JobRun.State
REWRITES = {Kind.COMPACTION, Kind.KEY_COMPACTION}  # one of these per cluster at a time


# --- runs ----------------------------------------------------------------------------


def job_runs_expire(*, cluster: VirtualCluster, now: datetime | None = None) -> int:
    """Fail runs that have waited or run too long (a lost message, a dead worker)."""
    now = now or timezone.now()
    queued_before = now - timedelta(seconds=settings.FLOE_JOB_QUEUED_TIMEOUT_S)
    running_before = now - timedelta(seconds=settings.FLOE_JOB_TIMEOUT_S)
    return (
        JobRun.objects.filter(cluster=cluster)
        .filter(
            Q(state=State.QUEUED, created_at__lt=queued_before)
            | Q(state=State.RUNNING, started_at__lt=running_before)
        )
        .update(
            state=State.FAILED,
            finished_at=now,
            error="abandoned: no jobs-role agent of the cluster leased it in time, or no "
            "result within the job timeout",
        )
    )


def job_leases_expire(*, cluster: VirtualCluster) -> int:
    """Running runs whose lease expired (on the database's clock) go back to queued
    (their agent died or lost the control plane); the next lease plans them afresh."""
    running = dict(
        JobRun.objects.filter(cluster=cluster, state=State.RUNNING)
        .exclude(lease_token="")
        .values_list("public_id", "lease_token")
    )
    if not running:
        return 0
    expired = leases.leases_expired(
        cluster_id=cluster.pk, subjects=[leases.job_subject(r) for r in running]
    )
    lost = [r for r in running if leases.job_subject(r) in expired]
    return (
        JobRun.objects.filter(cluster=cluster, state=State.RUNNING, public_id__in=lost)
        # (only the attempt whose lease expired, not one leased again meanwhile)
        .filter(lease_token__in=[running[r] for r in lost])
        .update(
            state=State.QUEUED,
            lease_agent="",
            lease_token="",
            started_at=None,
            progress={},
        )
    )


def job_dispatch(
    *, cluster: VirtualCluster, kind: str, now: datetime | None = None
) -> JobRun | None:
    """A queued run of `kind` if the cluster has work for one, none is under way, and
    the last one did not fail within the failure back-off (a broken bucket or a missing
    Java should not start a doomed run every 30 seconds)."""
    now = now or timezone.now()
    job_leases_expire(cluster=cluster)
    job_runs_expire(cluster=cluster, now=now)
    active = set(JobRun.objects.active().filter(cluster=cluster).values_list("kind", flat=True))
    if kind in active or (kind in REWRITES and active & REWRITES):
        return None
    last = JobRun.objects.filter(cluster=cluster, kind=kind).order_by("-id").first()
    backoff = timedelta(seconds=settings.FLOE_JOB_FAILURE_BACKOFF_S)
    failed_at = last.finished_at if last is not None and last.state == State.FAILED else None
    if failed_at is not None and failed_at > now - backoff:
        return None
    if not selectors.job_due(cluster, kind, now=now):
        return None
    try:
        with transaction.atomic():
            return JobRun.objects.create(cluster=cluster, kind=kind)
    except IntegrityError:  # job_run_one_active_per_kind: another check was first
        return None


def history_prune(*, now: datetime | None = None) -> tuple[int, int]:
    """Forget finished runs and deleted files older than FLOE_JOB_HISTORY_DAYS; keeps
    each cluster's latest successful key compaction (it records how far it got).
    Returns (runs, file rows) deleted."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.FLOE_JOB_HISTORY_DAYS)
    progress = (
        JobRun.objects.filter(kind=Kind.KEY_COMPACTION, state=State.SUCCEEDED)
        .order_by("cluster_id", "-id")
        .distinct("cluster_id")
        .values_list("id", flat=True)
    )
    runs, _ = JobRun.objects.filter(finished_at__lt=cutoff).exclude(id__in=list(progress)).delete()
    files, _ = SegmentFile.objects.filter(
        state=SegmentFile.State.DELETED, unreferenced_at__lt=cutoff
    ).delete()
    return runs, files


def job_run_start(*, run_id: int) -> JobRun | None:
    """queued → running; None if the run is not queued (finished, taken or expired)."""
    taken = JobRun.objects.filter(pk=run_id, state=State.QUEUED).update(
        state=State.RUNNING, started_at=timezone.now()
    )
    return JobRun.objects.select_related("cluster").get(pk=run_id) if taken else None


def job_run_finish(
    *,
    run: JobRun,
    state: str,
    error: str = "",
    details: dict[str, Any] | None = None,
    **counts: int,
) -> None:
    """running → succeeded/failed with what the run read and wrote (a no-op if expired)."""
    run.details = {**run.details, **(details or {})}
    run.details.pop("_plan", None)
    JobRun.objects.filter(pk=run.pk, state=State.RUNNING, lease_token=run.lease_token).update(
        state=state,
        finished_at=timezone.now(),
        error=error,
        details=run.details,
        **counts,
    )
    if run.lease_token:  # the lease ends with the run (free, its epoch kept)
        leases.lease_end(
            cluster_id=run.cluster_id,
            subject=leases.job_subject(run.public_id),
            token=run.lease_token,
        )
    run.refresh_from_db()


@dataclass(frozen=True)
class Advance:
    """The outcome of feeding a run one result: the next step (None: the run finished,
    its outcome recorded) and the objects the executor must delete (outputs a conflict
    left unreferenced: only the data plane can touch the bucket)."""

    step: Step | None
    discard: list[str] = field(default_factory=list)


def job_run_advance(
    *, run: JobRun, result: dict[str, Any] | None = None, error: str = ""
) -> Advance:
    """Begin a started run (`result` None) or feed it the result of its current step.
    The plans, checks and compare-and-swap rules are here, whoever ran the Spark job."""
    if error:
        job_run_finish(run=run, state=State.FAILED, error=error[:10_000])
        return Advance(None)
    try:
        if result is None:
            outcome = _BEGIN[JobRun.Kind(run.kind)](run)
        else:
            outcome = _CONTINUE[JobRun.Kind(run.kind)](run, result)
    except Exception as exc:
        log.exception("job run %s (%s) failed", run.public_id, run.kind)
        job_run_finish(run=run, state=State.FAILED, error=f"{type(exc).__name__}: {exc}"[:10_000])
        return Advance(None, discard=outputs_of(result, under=output_root(run)))
    if isinstance(outcome, Step):
        details_update(run, step=outcome.stage or outcome.job)
        return Advance(outcome)
    discard = outcome.pop("discard", [])
    job_run_finish(run=run, state=State.SUCCEEDED, **outcome)
    return Advance(None, discard=discard)


_BEGIN = {
    Kind.COMPACTION: compaction.compaction_begin,
    Kind.KEY_COMPACTION: compaction.key_compaction_begin,
    Kind.RETENTION: retention.retention_begin,
    Kind.ORPHAN_CLEANUP: orphans.orphan_cleanup_begin,
    Kind.TABLE_APPEND: topic_tables.table_append_begin,
}
_CONTINUE = {
    Kind.COMPACTION: compaction.compaction_continue,
    Kind.KEY_COMPACTION: compaction.key_compaction_continue,
    Kind.RETENTION: retention.retention_continue,
    Kind.ORPHAN_CLEANUP: orphans.orphan_cleanup_continue,
    Kind.TABLE_APPEND: topic_tables.table_append_continue,
}
