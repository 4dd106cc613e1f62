"""Compaction and key compaction: their plans, and the compare-and-swap that points the
index at a job's outputs (the index's side of it: ``metadata_store.rewrites``).

Locks are always taken partitions → files (id order) → batch rows. Commits
(``floe_commit``) lock only partitions and insert new rows, so produce never waits on a
swap and concurrent commits cannot be lost by one: a swap touches only the rows it
planned, and only if they are exactly as planned.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from metadata_store import leases, rewrites
from metadata_store.rewrites import KeyCompactionPlan
from metadata_store.store import Row
from virtualclusters.jobs import selectors
from virtualclusters.jobs.models import JobRun
from virtualclusters.jobs.steps import (
    Step,
    SwapConflict,
    output_prefix,
    output_root,
    outputs_check,
    outputs_of,
    plan_keep,
)

State = JobRun.State


def compaction_begin(run: JobRun) -> Step | dict[str, Any]:
    inputs = selectors.compaction_inputs(
        run.cluster,
        max_files=settings.FLOE_COMPACTION_MAX_INPUT_FILES,
        max_bytes=settings.FLOE_COMPACTION_MAX_INPUT_BYTES,
    )
    if len(inputs) < 2:
        return {"details": {"skipped": "fewer than two level-0 files"}}
    pointers = rewrites.batch_pointers([f.id for f in inputs])
    plan_keep(
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
            "output_prefix": output_prefix(run),
            "target_bytes": settings.FLOE_COMPACTION_TARGET_BYTES,
            "batches": [[*p[:8], p[9]] for p in pointers],
        },
        stage="compacting",
    )


def compaction_continue(run: JobRun, result: dict[str, Any]) -> dict[str, Any]:
    outputs_check(run, result)
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
            "discard": outputs_of(result, under=output_root(run)),
        }
    return {
        **counts,
        "output_files": len(result["files"]),
        "output_bytes": sum(f["size"] for f in result["files"]),
        "details": {"swapped": True, "batches": len(pointers)},
    }


def key_compaction_begin(run: JobRun) -> Step | dict[str, Any]:
    cleaned = selectors.cleaned_offsets(run.cluster)
    plan = selectors.key_compaction_plan(run.cluster, now=timezone.now())
    keep_cleaned = {"cleaned": {str(k): v for k, v in cleaned.items()}}
    if not plan.rows:
        return {"details": {"skipped": "no partition is dirty enough", **keep_cleaned}}
    plan_keep(
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
            "output_prefix": output_prefix(run),
            "target_bytes": settings.FLOE_COMPACTION_TARGET_BYTES,
            "batches": [list(row) for row in plan.rows],
            "aborted": plan.aborted,
        },
        stage="compacting keys",
    )


def key_compaction_continue(run: JobRun, result: dict[str, Any]) -> dict[str, Any]:
    outputs_check(run, result)
    kept = run.details["_plan"]
    cleaned = {k: v for k, v in kept["cleaned"]}
    plan = KeyCompactionPlan(
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
            "discard": outputs_of(result, under=output_root(run)),
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
def compaction_swap(
    *,
    run: JobRun,
    input_file_ids: list[int],
    planned: list[Row],
    files: list[dict[str, Any]],
    placements: list[list[Any]],
) -> None:
    """Point the inputs' index rows at the compacted files if the run still holds its
    lease (`rewrites.compaction_swap`), or raise SwapConflict."""
    _lock_run(run)
    rewrites.compaction_swap(
        cluster_id=run.cluster_id,
        input_file_ids=input_file_ids,
        planned=planned,
        files=files,
        placements=placements,
    )


@transaction.atomic
def key_compaction_swap(
    *,
    run: JobRun,
    plan: KeyCompactionPlan,
    files: list[dict[str, Any]],
    placements: list[list[Any]],
) -> None:
    """Rewrite and drop the planned index rows if the run still holds its lease
    (`rewrites.key_compaction_swap`), or raise SwapConflict."""
    _lock_run(run)
    rewrites.key_compaction_swap(
        cluster_id=run.cluster_id, plan=plan, files=files, placements=placements
    )


def _lock_run(run: JobRun) -> None:
    """The run must still be running: an expired run's outputs are no longer protected."""
    row = (
        JobRun.objects.select_for_update()
        .filter(pk=run.pk)
        .values_list("state", "lease_token")
        .first()
    )
    if row is None or row[0] != State.RUNNING:
        raise SwapConflict(f"run {run.public_id} is no longer running")
    if row[1] != run.lease_token:
        raise SwapConflict(f"run {run.public_id} was leased again: this result came too late")
    if run.lease_token:  # leased (not driven in-process): still live, share-locked till the swap
        try:
            leases.lease_check(
                cluster_id=run.cluster_id,
                subject=leases.job_subject(run.public_id),
                token=run.lease_token,
            )
        except leases.LeaseLost as exc:
            raise SwapConflict(f"run {run.public_id}: {exc}") from None
