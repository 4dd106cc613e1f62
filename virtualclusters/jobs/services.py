"""Writes for the background jobs: dispatching runs, running them, swapping the metadata.

A run goes: a beat check finds work (`job_dispatch`, a queued `JobRun`) → a jobs-role
agent of the cluster leases it (`leases`) → `job_run_advance` plans its first step (a
Spark job of ``jobs/`` and its plan, from ``jobs_selectors``; kept on the run for the
compare-and-swap) → the agent runs it on its own bucket and reports → `job_run_advance`
applies the result here (compaction: one compare-and-swap transaction) and answers the
next step or none; the outcome lands on the `JobRun`. `job_run_execute` drives the same
steps in this process (tests, benchmarks).

Locks are always taken partitions → files (id order) → batch rows. Commits
(``floe_commit``) lock only partitions and insert new rows, so produce never waits on a
swap and concurrent commits cannot be lost by one: a swap touches only the rows it
planned, and only if they are exactly as planned.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from jobs.runner import run_job
from jobs.segment_io import store_for
from metadata_store.models import SegmentFile
from virtualclusters.jobs import selectors
from virtualclusters.jobs.models import JobRun
from virtualclusters.jobs.selectors import epoch_ms
from virtualclusters.models import VirtualCluster

log = logging.getLogger(__name__)

Kind, State = JobRun.Kind, JobRun.State
REWRITES = {Kind.COMPACTION, Kind.KEY_COMPACTION}  # one of these per cluster at a time
COMPACTED_LEVEL = 1
MAX_DELETES_PER_RUN = 100_000


class SwapConflict(Exception):
    """The job's inputs changed while it ran: nothing was swapped."""


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


def job_leases_expire(*, cluster: VirtualCluster, now: datetime | None = None) -> int:
    """Running runs whose lease deadline passed go back to queued (their agent died or
    lost the control plane); the next lease plans them afresh."""
    return (
        JobRun.objects.filter(
            cluster=cluster, state=State.RUNNING, lease_expires_at__lt=now or timezone.now()
        )
        .exclude(lease_token="")
        .update(
            state=State.QUEUED,
            lease_agent="",
            lease_token="",
            lease_expires_at=None,
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
    job_leases_expire(cluster=cluster, now=now)
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


def _details_update(run: JobRun, **details) -> None:
    run.details = {**run.details, **details}
    JobRun.objects.filter(pk=run.pk).update(details=run.details)


def job_run_finish(*, run: JobRun, state: str, error: str = "", details=None, **counts) -> None:
    """running → succeeded/failed with what the run read and wrote (a no-op if expired)."""
    run.details = {**run.details, **(details or {})}
    run.details.pop("_plan", None)
    JobRun.objects.filter(pk=run.pk, state=State.RUNNING, lease_token=run.lease_token).update(
        state=state,
        finished_at=timezone.now(),
        error=error,
        details=run.details,
        lease_expires_at=None,
        **counts,
    )
    run.refresh_from_db()


@dataclass(frozen=True)
class Step:
    """What a run needs done in the data plane next: Spark job `job` on `plan` (the
    executor adds its own ``bucket_url``); `stage` names it for the progress shown."""

    job: str
    plan: dict
    stage: str = ""

    def as_dict(self) -> dict:
        return {"job": self.job, "plan": self.plan, "stage": self.stage or self.job}


@dataclass(frozen=True)
class Advance:
    """The outcome of feeding a run one result: the next step (None: the run finished,
    its outcome recorded) and the objects the executor must delete (outputs a conflict
    left unreferenced: only the data plane can touch the bucket)."""

    step: Step | None
    discard: list[str] = field(default_factory=list)


def job_run_advance(*, run: JobRun, result: dict | None = None, error: str = "") -> Advance:
    """Begin a started run (`result` None) or feed it the result of its current step.
    The plans, checks and compare-and-swap rules are here, whoever ran the Spark job."""
    if error:
        job_run_finish(run=run, state=State.FAILED, error=error[:10_000])
        return Advance(None)
    try:
        if result is None:
            outcome = _BEGIN[run.kind](run)
        else:
            outcome = _CONTINUE[run.kind](run, result)
    except Exception as exc:
        log.exception("job run %s (%s) failed", run.public_id, run.kind)
        job_run_finish(run=run, state=State.FAILED, error=f"{type(exc).__name__}: {exc}"[:10_000])
        return Advance(None, discard=_outputs_of(result, under=_output_root(run)))
    if isinstance(outcome, Step):
        _details_update(run, step=outcome.stage or outcome.job)
        return Advance(outcome)
    discard = outcome.pop("discard", [])
    job_run_finish(run=run, state=State.SUCCEEDED, **outcome)
    return Advance(None, discard=discard)


def _outputs_of(result: dict | None, *, under: str | None = None) -> list[str]:
    """Objects a job's result says it wrote (deleted when nothing will reference them);
    with `under`, only those below that prefix (never a file some index row names)."""
    files = (result or {}).get("files") or []
    keys = [f["key"] for f in files if isinstance(f, dict) and isinstance(f.get("key"), str)]
    if under is not None:
        keys = [k for k in keys if k.startswith(under) and ".." not in k]
    return keys


def _output_root(run: JobRun) -> str:
    """The folder of a run's outputs (each attempt writes in a subfolder of its own)."""
    return f"{run.cluster.public_id}/compacted/{run.public_id}/"


def job_run_execute(*, run_id: int, bucket_url: str | None = None) -> JobRun | None:
    """Run a queued job to its end in this process, on a bucket this process can open
    (tests, benchmarks); jobs-role agents do the same through the agent API
    (`virtualclusters.jobs.leases`). Safe to call again."""
    run = job_run_start(run_id=run_id)
    if run is None:
        return None
    bucket = bucket_url or run.cluster.bucket_url or settings.FLOE_BUCKET_URL
    advance = job_run_advance(run=run)
    while advance.step is not None:
        try:
            result = _spark(advance.step.job, {**advance.step.plan, "bucket_url": bucket})
        except Exception as exc:
            log.exception("job run %s (%s) failed", run.public_id, run.kind)
            advance = job_run_advance(run=run, error=f"{type(exc).__name__}: {exc}")
        else:
            advance = job_run_advance(run=run, result=result)
    _outputs_discard(bucket, advance.discard)
    run.refresh_from_db()
    return run


def _spark(name: str, plan: dict) -> dict:
    return run_job(
        name,
        plan,
        mode=settings.FLOE_SPARK_MODE,
        master=settings.FLOE_SPARK_MASTER,
        timeout_s=settings.FLOE_JOB_TIMEOUT_S,
    )


def _output_prefix(run: JobRun) -> str:
    """Where this attempt writes: under the run's root (protected from the orphan
    cleaner while the run is active), in a folder of its own."""
    root = _output_root(run)
    _details_update(run, output_root=root)
    return f"{root}{secrets.token_hex(4)}/"


def _outputs_discard(bucket_url: str, keys: list[str]) -> None:
    """Delete outputs a conflict left unreferenced (the orphan cleaner is the backstop)."""
    if not keys:
        return
    try:
        store_for(bucket_url).delete_many(keys)
    except Exception:
        log.exception("could not delete %d unswapped outputs", len(keys))


# --- compaction ----------------------------------------------------------------------


def _plan_keep(run: JobRun, plan: dict) -> None:
    """What the continuation of a step needs (the inputs as planned, for the
    compare-and-swap), kept on the run until it finishes."""
    _details_update(run, _plan=plan)


def _begin_compaction(run: JobRun) -> Step | dict:
    inputs = selectors.compaction_inputs(
        run.cluster,
        max_files=settings.FLOE_COMPACTION_MAX_INPUT_FILES,
        max_bytes=settings.FLOE_COMPACTION_MAX_INPUT_BYTES,
    )
    if len(inputs) < 2:
        return {"details": {"skipped": "fewer than two level-0 files"}}
    pointers = selectors.batch_pointers([f.id for f in inputs])
    _plan_keep(
        run,
        {
            "input_file_ids": [f.id for f in inputs],
            "input_bytes": sum(f.size for f in inputs),
            "pointers": [list(p) for p in pointers],
        },
    )
    return Step(
        "compaction",
        {
            "output_prefix": _output_prefix(run),
            "target_bytes": settings.FLOE_COMPACTION_TARGET_BYTES,
            "batches": [[*p[:8], p[9]] for p in pointers],
        },
        stage="compacting",
    )


def _outputs_check(run: JobRun, result: dict) -> None:
    """A job's outputs lie under this run's output root (the agent that ran it is the
    cluster's, but its answer is still input)."""
    root = _output_root(run)
    keys = _outputs_of(result)
    if len(keys) != len(result["files"]) or any(not k.startswith(root) or ".." in k for k in keys):
        raise ValueError(f"the job's output files must lie under {root}")


def _continue_compaction(run: JobRun, result: dict) -> dict:
    _outputs_check(run, result)
    plan = run.details["_plan"]
    pointers = [tuple(p) for p in plan["pointers"]]
    counts = {"input_files": len(plan["input_file_ids"]), "input_bytes": plan["input_bytes"]}
    try:
        compaction_swap(
            run=run,
            input_file_ids=plan["input_file_ids"],
            planned=pointers,
            files=result["files"],
            placements=result["batches"],
        )
    except SwapConflict as conflict:
        return {
            **counts,
            "details": {"swapped": False, "conflict": str(conflict)},
            "discard": _outputs_of(result, under=_output_root(run)),
        }
    return {
        **counts,
        "output_files": len(result["files"]),
        "output_bytes": sum(f["size"] for f in result["files"]),
        "details": {"swapped": True, "batches": len(pointers)},
    }


@transaction.atomic
def compaction_swap(
    *,
    run: JobRun,
    input_file_ids: list[int],
    planned: list[tuple],
    files: list[dict],
    placements: list[list],
) -> None:
    """Point the inputs' index rows at the compacted files, or raise SwapConflict.

    `planned`: the `batch_pointers` rows the job was given; `placements`: [partition_id,
    last_offset, file key, position, length] of each in the outputs. Offsets never
    change. The inputs become replaced (unreferenced now); rows retention deleted
    meanwhile are simply not repointed; any other change to the inputs is a conflict.
    """
    expected = {(p[0], p[4]): (p[3], p[8], p[6], p[7]) for p in planned}
    placed = {(pid, last): (key, pos, length) for pid, last, key, pos, length in placements}
    if placed.keys() != expected.keys() or any(placed[k][2] != expected[k][3] for k in expected):
        raise RuntimeError("the compaction job did not place every planned batch whole")
    with connection.cursor() as cursor:
        _lock_run(cursor, run)
        _lock_files(cursor, run.cluster_id, input_file_ids)
        cursor.execute(
            "SELECT partition_id, last_offset, base_offset, file_id, position, length"
            " FROM floe_batch WHERE file_id = ANY(%s) FOR UPDATE",
            [input_file_ids],
        )
        current = {(r[0], r[1]): r[2:] for r in cursor.fetchall()}
        _check_unchanged(cursor, expected, current)
        file_ids = _files_insert(cursor, run.cluster_id, files)
        moves = [(*k, file_ids[placed[k][0]], placed[k][1]) for k in current]
        cursor.execute(
            "UPDATE floe_batch b SET file_id = u.file_id, position = u.position"
            " FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[])"
            "  AS u(partition_id, last_offset, file_id, position)"
            " WHERE b.partition_id = u.partition_id AND b.last_offset = u.last_offset",
            [[m[i] for m in moves] for i in range(4)],
        )
        if cursor.rowcount != len(moves):
            raise RuntimeError(f"repointed {cursor.rowcount} of {len(moves)} locked batches")
        _files_release(cursor, [*input_file_ids, *file_ids.values()])


def _lock_run(cursor, run: JobRun) -> None:
    """The run must still be running: an expired run's outputs are no longer protected."""
    cursor.execute("SELECT state, lease_token FROM floe_job_run WHERE id = %s FOR UPDATE", [run.pk])
    row = cursor.fetchone()
    if row is None or row[0] != State.RUNNING:
        raise SwapConflict(f"run {run.public_id} is no longer running")
    if row[1] != run.lease_token:
        raise SwapConflict(f"run {run.public_id} was leased again: this result came too late")


def _lock_files(cursor, cluster_id: int, file_ids: list[int]) -> None:
    cursor.execute(
        "SELECT id, state FROM floe_file WHERE cluster_id = %s AND id = ANY(%s)"
        " ORDER BY id FOR UPDATE",
        [cluster_id, sorted(file_ids)],
    )
    states = dict(cursor.fetchall())
    gone = [i for i in file_ids if states.get(i) in (None, SegmentFile.State.DELETED)]
    if gone:
        raise SwapConflict(f"{len(gone)} input files are gone")


def _check_unchanged(cursor, expected: dict, current: dict) -> None:
    """Conflict unless every locked row is as planned and every missing one fell below
    its partition's log start offset (retention), or its partition is gone."""
    changed = [k for k, row in current.items() if expected.get(k) != tuple(row)]
    if changed:
        raise SwapConflict(f"{len(changed)} batches changed since the plan")
    missing = [k for k in expected if k not in current]
    if not missing:
        return
    cursor.execute(
        "SELECT id, log_start_offset FROM floe_partition WHERE id = ANY(%s)",
        [sorted({pid for pid, _ in missing})],
    )
    starts = dict(cursor.fetchall())
    moved = [(pid, last) for pid, last in missing if pid in starts and last >= starts[pid]]
    if moved:
        raise SwapConflict(f"{len(moved)} batches left the index since the plan")


def _files_insert(cursor, cluster_id: int, files: list[dict]) -> dict[str, int]:
    """Rows for the job's output files; file key → id."""
    if not files:
        return {}
    cursor.execute(
        "INSERT INTO floe_file (cluster_id, key, size, level, state, batch_count, created_at)"
        " SELECT %s, u.key, u.size, %s, 'live', u.batch_count, now()"
        " FROM unnest(%s::text[], %s::bigint[], %s::int[]) AS u(key, size, batch_count)"
        " RETURNING key, id",
        [
            cluster_id,
            COMPACTED_LEVEL,
            [f["key"] for f in files],
            [f["size"] for f in files],
            [f["batch_count"] for f in files],
        ],
    )
    return dict(cursor.fetchall())


def _files_release(cursor, file_ids: list[int]) -> int:
    """Live files among these that no index row references become replaced, now."""
    cursor.execute(
        "UPDATE floe_file f SET state = 'replaced', unreferenced_at = now()"
        " WHERE f.id = ANY(%s) AND f.state = 'live'"
        " AND NOT EXISTS (SELECT 1 FROM floe_batch b WHERE b.file_id = f.id)",
        [sorted(set(file_ids))],
    )
    return cursor.rowcount


# --- key compaction ------------------------------------------------------------------


def _begin_key_compaction(run: JobRun) -> Step | dict:
    cleaned = selectors.cleaned_offsets(run.cluster)
    plan = selectors.key_compaction_plan(run.cluster, now=timezone.now())
    keep_cleaned = {"cleaned": {str(k): v for k, v in cleaned.items()}}
    if not plan.rows:
        return {"details": {"skipped": "no partition is dirty enough", **keep_cleaned}}
    _plan_keep(
        run,
        {
            "cleaned": [[k, v] for k, v in cleaned.items()],
            "rows": [list(row) for row in plan.rows],
            "file_ids": [[*k, v] for k, v in plan.file_ids.items()],
            "record_counts": [[*k, v] for k, v in plan.record_counts.items()],
            "covered": [[k, v] for k, v in plan.covered.items()],
        },
    )
    return Step(
        "key_compaction",
        {
            "output_prefix": _output_prefix(run),
            "target_bytes": settings.FLOE_COMPACTION_TARGET_BYTES,
            "batches": [list(row) for row in plan.rows],
            "aborted": plan.aborted,
        },
        stage="compacting keys",
    )


def _continue_key_compaction(run: JobRun, result: dict) -> dict:
    _outputs_check(run, result)
    kept = run.details["_plan"]
    cleaned = {k: v for k, v in kept["cleaned"]}
    plan = selectors.KeyCompactionPlan(
        rows=[tuple(row) for row in kept["rows"]],
        file_ids={(pid, last): fid for pid, last, fid in kept["file_ids"]},
        record_counts={(pid, last): n for pid, last, n in kept["record_counts"]},
        covered={k: v for k, v in kept["covered"]},
    )
    keep_cleaned = {"cleaned": {str(k): v for k, v in cleaned.items()}}
    counts = {
        "input_files": len(set(plan.file_ids.values())),
        "input_bytes": sum(row[7] for row in plan.rows),
    }
    try:
        key_compaction_swap(run=run, plan=plan, files=result["files"], placements=result["batches"])
    except SwapConflict as conflict:
        return {
            **counts,
            "details": {"swapped": False, "conflict": str(conflict), **keep_cleaned},
            "discard": _outputs_of(result, under=_output_root(run)),
        }
    records_in = sum(plan.record_counts.values())
    dropped = sum(plan.record_counts[(p[0], p[1])] - p[5] for p in result["batches"])
    return {
        **counts,
        "output_files": len(result["files"]),
        "output_bytes": sum(f["size"] for f in result["files"]),
        "details": {
            "swapped": True,
            "partitions": len(plan.covered),
            "records_in": records_in,
            "records_kept": records_in - dropped,
            "batches_rewritten": sum(1 for p in result["batches"] if p[2] is not None),
            "batches_dropped": sum(1 for p in result["batches"] if p[2] is None),
            "cleaned": {str(k): v for k, v in {**cleaned, **plan.covered}.items()},
        },
    }


@transaction.atomic
def key_compaction_swap(
    *, run: JobRun, plan: selectors.KeyCompactionPlan, files: list[dict], placements: list[list]
) -> None:
    """Point rewritten batches at their new bytes and drop emptied ones, or raise
    SwapConflict.

    `placements`: [partition_id, last_offset, file key or None (dropped), position,
    length, record_count, max_timestamp, batch_count]. A rewritten run keeps its offsets
    (its index row keeps its key); only where it lives, its size, counts and max
    timestamp change.
    """
    keys = [(p[0], p[1]) for p in placements]
    rows = {(r[0], r[4]): r for r in plan.rows}
    expected = {
        k: (rows[k][3], plan.file_ids[k], rows[k][6], rows[k][7], plan.record_counts[k])
        for k in keys
    }
    sources = sorted({plan.file_ids[k] for k in keys})
    with connection.cursor() as cursor:
        _lock_run(cursor, run)
        _lock_files(cursor, run.cluster_id, sources)
        cursor.execute(
            "SELECT b.partition_id, b.last_offset, b.base_offset, b.file_id, b.position,"
            " b.length, b.record_count FROM floe_batch b"
            " JOIN unnest(%s::bigint[], %s::bigint[]) AS u(partition_id, last_offset)"
            "  ON b.partition_id = u.partition_id AND b.last_offset = u.last_offset"
            " FOR UPDATE OF b",
            [[k[0] for k in keys], [k[1] for k in keys]],
        )
        current = {(r[0], r[1]): r[2:] for r in cursor.fetchall()}
        _check_unchanged(cursor, expected, current)
        file_ids = _files_insert(cursor, run.cluster_id, files)
        kept = [p for p in placements if p[2] is not None and (p[0], p[1]) in current]
        dropped = [p for p in placements if p[2] is None and (p[0], p[1]) in current]
        cursor.execute(
            "UPDATE floe_batch b SET file_id = u.file_id, position = u.position,"
            " length = u.length, record_count = u.record_count, max_timestamp = u.max_ts,"
            " batch_count = u.batch_count"
            " FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[], %s::int[],"
            "  %s::int[], %s::bigint[], %s::int[]) AS u(partition_id, last_offset, file_id,"
            "  position, length, record_count, max_ts, batch_count)"
            " WHERE b.partition_id = u.partition_id AND b.last_offset = u.last_offset",
            [
                [p[0] for p in kept],
                [p[1] for p in kept],
                [file_ids[p[2]] for p in kept],
                [p[3] for p in kept],
                [p[4] for p in kept],
                [p[5] for p in kept],
                [p[6] for p in kept],
                [p[7] for p in kept],
            ],
        )
        updated = cursor.rowcount
        cursor.execute(
            "DELETE FROM floe_batch b USING unnest(%s::bigint[], %s::bigint[])"
            "  AS u(partition_id, last_offset)"
            " WHERE b.partition_id = u.partition_id AND b.last_offset = u.last_offset",
            [[p[0] for p in dropped], [p[1] for p in dropped]],
        )
        if (updated, cursor.rowcount) != (len(kept), len(dropped)):
            raise RuntimeError(
                f"changed {updated}+{cursor.rowcount} of {len(placements)} locked batches"
            )
        _files_release(cursor, [*sources, *file_ids.values()])


# --- retention -----------------------------------------------------------------------


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
        return deleted, _files_release(cursor, file_ids)


@transaction.atomic
def files_unreferenced_mark(*, cluster: VirtualCluster) -> int:
    """Live files no index row points at (their topic was deleted, every batch was a
    duplicate…) become replaced. Safe against commits and swaps: both add a file and
    its rows in one transaction."""
    ids = list(selectors.unreferenced_live_files(cluster).values_list("id", flat=True))
    if not ids:
        return 0
    with connection.cursor() as cursor:
        return _files_release(cursor, ids)


def files_mark_deleted(*, cluster: VirtualCluster, file_ids: list[int]) -> int:
    """Files whose objects are gone become deleted."""
    return SegmentFile.objects.filter(
        cluster=cluster, id__in=file_ids, state=SegmentFile.State.REPLACED
    ).update(state=SegmentFile.State.DELETED)


def _grace() -> timedelta:
    return timedelta(seconds=settings.FLOE_FILE_DELETE_GRACE_S)


def _deletion(entries: list[tuple[int | None, str, datetime]], *, now: datetime, stage: str):
    """The retention job's step that deletes these (file id or None, key, unreferenced
    since) once their grace period has passed."""
    return Step(
        "retention",
        {
            "now_ms": epoch_ms(now),
            "grace_ms": settings.FLOE_FILE_DELETE_GRACE_S * 1000,
            "files": [[file_id, key, epoch_ms(since)] for file_id, key, since in entries],
        },
        stage=stage,
    )


def _begin_retention(run: JobRun) -> Step | dict:
    now = timezone.now()
    applied = retention_apply(cluster=run.cluster, now=now)
    due = list(
        selectors.files_past_grace(run.cluster, unreferenced_before=now - _grace()).values_list(
            "id", "key", "size", "unreferenced_at"
        )[:MAX_DELETES_PER_RUN]
    )
    if not due:
        return {"details": {**applied, "files_deleted": 0}}
    _plan_keep(run, {"applied": applied, "sizes": [[i, size] for i, _, size, _ in due]})
    return _deletion([(i, key, since) for i, key, _, since in due], now=now, stage="deleting")


def _continue_retention(run: JobRun, result: dict) -> dict:
    kept = run.details["_plan"]
    sizes = {i: size for i, size in kept["sizes"]}
    deleted_ids = {row[0] for row in result["deleted"] if row[0] in sizes}
    files_mark_deleted(cluster=run.cluster, file_ids=list(deleted_ids))
    return {
        "input_files": len(deleted_ids),
        "input_bytes": sum(sizes[i] for i in deleted_ids),
        "details": {**kept["applied"], "files_deleted": len(deleted_ids)},
    }


# --- orphan cleanup ------------------------------------------------------------------


def _begin_orphan_cleanup(run: JobRun) -> Step:
    cluster, now = run.cluster, timezone.now()
    known = selectors.known_file_keys(cluster)  # read before the listing: see below
    _plan_keep(run, {"phase": "list", "now_ms": epoch_ms(now)})
    return Step(
        "orphan_cleanup",
        {
            "prefix": f"{cluster.public_id}/",
            "cutoff_ms": epoch_ms(now - _grace()),
            "known_keys": sorted(known),
            "protected_prefixes": selectors.protected_output_roots(cluster, exclude_run=run),
        },
        stage="listing",
    )


def _continue_orphan_cleanup(run: JobRun, result: dict) -> Step | dict:
    kept = run.details["_plan"]
    if kept["phase"] == "delete":
        sizes = kept["sizes"]
        deleted_keys = [key for _, key in result["deleted"] if key in sizes]
        return {
            "input_files": kept["listed"],
            "input_bytes": kept["listed_bytes"],
            "details": {
                "orphans_deleted": len(deleted_keys),
                "orphan_bytes_deleted": sum(sizes[key] for key in deleted_keys),
                "orphans_sample": sorted(deleted_keys)[:20],
            },
        }
    cluster = run.cluster
    now = datetime.fromtimestamp(kept["now_ms"] / 1000, tz=timezone.get_current_timezone())
    # A file committed after `known` was read is in the listing but not in `known`:
    # look the candidates up again now, and spare outputs of jobs started meanwhile.
    candidates = {key: (size, modified) for key, size, modified in result["orphans"]}
    known_now = selectors.known_file_keys(cluster, keys=list(candidates))
    protected = tuple(selectors.protected_output_roots(cluster, exclude_run=run))
    candidates = {
        key: found
        for key, found in candidates.items()
        if key not in known_now and not key.startswith(protected)
    }
    listed = {"listed": result["listed"], "listed_bytes": result["listed_bytes"]}
    if not candidates:
        return {
            "input_files": listed["listed"],
            "input_bytes": listed["listed_bytes"],
            "details": {"orphans_deleted": 0, "orphan_bytes_deleted": 0, "orphans_sample": []},
        }
    _plan_keep(
        run,
        {"phase": "delete", **listed, "sizes": {k: size for k, (size, _) in candidates.items()}},
    )
    return _deletion(
        [
            (None, key, datetime.fromtimestamp(modified / 1000, tz=now.tzinfo))
            for key, (_, modified) in candidates.items()
        ],
        now=now,
        stage="deleting orphans",
    )


_BEGIN = {
    Kind.COMPACTION: _begin_compaction,
    Kind.KEY_COMPACTION: _begin_key_compaction,
    Kind.RETENTION: _begin_retention,
    Kind.ORPHAN_CLEANUP: _begin_orphan_cleanup,
}
_CONTINUE = {
    Kind.COMPACTION: _continue_compaction,
    Kind.KEY_COMPACTION: _continue_key_compaction,
    Kind.RETENTION: _continue_retention,
    Kind.ORPHAN_CLEANUP: _continue_orphan_cleanup,
}
