"""Compaction and key compaction: their plans, and the compare-and-swap that points the
index at a job's outputs.

Locks are always taken partitions → files (id order) → batch rows. Commits
(``floe_commit``) lock only partitions and insert new rows, so produce never waits on a
swap and concurrent commits cannot be lost by one: a swap touches only the rows it
planned, and only if they are exactly as planned.
"""

from __future__ import annotations

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from metadata_store.models import SegmentFile
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
COMPACTED_LEVEL = 1


def compaction_begin(run: JobRun) -> Step | dict:
    inputs = selectors.compaction_inputs(
        run.cluster,
        max_files=settings.FLOE_COMPACTION_MAX_INPUT_FILES,
        max_bytes=settings.FLOE_COMPACTION_MAX_INPUT_BYTES,
    )
    if len(inputs) < 2:
        return {"details": {"skipped": "fewer than two level-0 files"}}
    pointers = selectors.batch_pointers([f.id for f in inputs])
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


def compaction_continue(run: JobRun, result: dict) -> dict:
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
        files_release(cursor, [*input_file_ids, *file_ids.values()])


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


def files_release(cursor, file_ids: list[int]) -> int:
    """Live files among these that no index row references become replaced, now."""
    cursor.execute(
        "UPDATE floe_file f SET state = 'replaced', unreferenced_at = now()"
        " WHERE f.id = ANY(%s) AND f.state = 'live'"
        " AND NOT EXISTS (SELECT 1 FROM floe_batch b WHERE b.file_id = f.id)",
        [sorted(set(file_ids))],
    )
    return cursor.rowcount


def key_compaction_begin(run: JobRun) -> Step | dict:
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


def key_compaction_continue(run: JobRun, result: dict) -> dict:
    outputs_check(run, result)
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
        files_release(cursor, [*sources, *file_ids.values()])
