"""Compaction and key compaction over the index: the plans' reads and the
compare-and-swap that points index rows at a job's outputs (the caller, the jobs app,
holds the run's lock in the same transaction).

Locks are always taken partitions → files (id order) → batch rows. Commits
(``floe_commit``) lock only partitions and insert new rows, so produce never waits on a
swap and concurrent commits cannot be lost by one: a swap touches only the rows it
planned, and only if they are exactly as planned.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.db.backends.utils import CursorWrapper

from metadata_store import tail_feed
from metadata_store.models import SegmentFile
from metadata_store.store import JSON, Row

COMPACTED_LEVEL = 1


class SwapConflict(Exception):
    """The job's inputs changed while it ran: nothing was swapped."""


@dataclass
class KeyCompactionPlan:
    """The index rows a key compaction covers, and what its swap checks."""

    rows: list[Row]  # key_compaction's BATCH_COLUMNS
    file_ids: dict[tuple[int, int], int]  # (partition id, last offset) → file id
    record_counts: dict[tuple[int, int], int]
    covered: dict[int, int]  # partition id → last offset covered
    # [partition_id, producer_id, first_offset, marker_offset] of aborted transactions
    # in the covered partitions: their records are dropped, never allowed to win as a
    # key's latest value.
    aborted: list[list[int]] = field(default_factory=list)


def batch_pointers(file_ids: list[int]) -> list[Row]:
    """Index rows (partition runs) of the files: (partition_id, topic_id, partition,
    base_offset, last_offset, file_key, position, length, file_id, rewrite) — `rewrite`:
    the file is level 0, its batches carry the producers' baseOffsets."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT b.partition_id, p.topic_id::text, p.index, b.base_offset, b.last_offset,"
            " f.key, b.position, b.length, b.file_id, f.level = 0"
            " FROM floe_batch b JOIN floe_file f ON f.id = b.file_id"
            " JOIN floe_partition p ON p.id = b.partition_id"
            " WHERE b.file_id = ANY(%s)",
            [file_ids],
        )
        rows: list[Row] = cursor.fetchall()
        return rows


def partition_offsets(topic_ids: list[str]) -> list[tuple[int, str, int, int]]:
    """The partitions of these topics: (partition id, topic id, log start offset, high
    watermark)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT p.id, p.topic_id::text, p.log_start_offset, p.high_watermark"
            " FROM floe_partition p WHERE p.topic_id = ANY(%s::uuid[])",
            [topic_ids],
        )
        offsets: list[tuple[int, str, int, int]] = cursor.fetchall()
        return offsets


def key_compaction_rows(partition_ids: list[int]) -> list[tuple[Any, ...]]:
    """The index rows of these partitions from their log start, in offset order:
    (partition id, topic id, partition, base offset, last offset, file key, position,
    length, record count, max timestamp, file id, rewrite, first offset of the oldest
    open transaction in the partition or None)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT b.partition_id, p.topic_id::text, p.index, b.base_offset, b.last_offset,"
            " f.key, b.position, b.length, b.record_count, b.max_timestamp, b.file_id,"
            " f.level = 0, (SELECT min(tp.first_offset) FROM floe_txn_partition tp"
            "  WHERE tp.partition_id = p.id)"
            " FROM floe_batch b JOIN floe_file f ON f.id = b.file_id"
            " JOIN floe_partition p ON p.id = b.partition_id"
            " WHERE b.partition_id = ANY(%s) AND b.last_offset >= p.log_start_offset"
            " ORDER BY b.partition_id, b.last_offset",
            [partition_ids],
        )
        rows: list[Row] = cursor.fetchall()
        return rows


def aborted_transactions(partition_ids: list[int]) -> list[list[int]]:
    """[partition_id, producer_id, first_offset, marker_offset] of the aborted
    transactions in these partitions."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT partition_id, producer_id, first_offset, marker_offset"
            " FROM floe_txn_marker WHERE partition_id = ANY(%s) AND NOT committed"
            " ORDER BY partition_id, marker_offset",
            [partition_ids],
        )
        return [list(row) for row in cursor.fetchall()]


def files_release(file_ids: list[int]) -> int:
    """Live files among these that no index row references become replaced, now."""
    with connection.cursor() as cursor:
        return _files_release(cursor, file_ids)


def compaction_swap(
    *,
    cluster_id: int,
    input_file_ids: list[int],
    planned: list[Row],
    files: list[JSON],
    placements: list[list[Any]],
) -> None:
    """Within the caller's transaction (which holds the run's lock): point the inputs' index rows at the compacted files, or raise SwapConflict.

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
        _lock_files(cursor, cluster_id, input_file_ids)
        cursor.execute(
            "SELECT partition_id, last_offset, base_offset, file_id, position, length"
            " FROM floe_batch WHERE file_id = ANY(%s) FOR UPDATE",
            [input_file_ids],
        )
        current = {(r[0], r[1]): r[2:] for r in cursor.fetchall()}
        _check_unchanged(cursor, expected, current)
        file_ids = _files_insert(cursor, cluster_id, files)
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
        tail_feed.partitions_changed(cluster_id, {k[0] for k in current})
        _files_release(cursor, [*input_file_ids, *file_ids.values()])


def key_compaction_swap(
    *, cluster_id: int, plan: KeyCompactionPlan, files: list[JSON], placements: list[list[Any]]
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
        _lock_files(cursor, cluster_id, sources)
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
        file_ids = _files_insert(cursor, cluster_id, files)
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
        tail_feed.partitions_changed(cluster_id, {k[0] for k in current})
        _files_release(cursor, [*sources, *file_ids.values()])


def _lock_files(cursor: CursorWrapper, cluster_id: int, file_ids: list[int]) -> None:
    cursor.execute(
        "SELECT id, state FROM floe_file WHERE cluster_id = %s AND id = ANY(%s)"
        " ORDER BY id FOR UPDATE",
        [cluster_id, sorted(file_ids)],
    )
    states = dict(cursor.fetchall())
    gone = [i for i in file_ids if states.get(i) in (None, SegmentFile.State.DELETED)]
    if gone:
        raise SwapConflict(f"{len(gone)} input files are gone")


def _check_unchanged(
    cursor: CursorWrapper, expected: dict[tuple[int, int], Row], current: dict[tuple[int, int], Row]
) -> None:
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


def _files_insert(cursor: CursorWrapper, cluster_id: int, files: list[JSON]) -> dict[str, int]:
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


def _files_release(cursor: CursorWrapper, file_ids: list[int]) -> int:
    """Live files among these that no index row references become replaced, now."""
    cursor.execute(
        "UPDATE floe_file f SET state = 'replaced', unreferenced_at = now()"
        " WHERE f.id = ANY(%s) AND f.state = 'live'"
        " AND NOT EXISTS (SELECT 1 FROM floe_batch b WHERE b.file_id = f.id)",
        [sorted(set(file_ids))],
    )
    return int(cursor.rowcount)


def runs_after(topic_id: str, starts: dict[int, int], *, max_bytes: int) -> list[Row]:
    """The index rows (partition runs) of a topic that hold offsets at or past each
    partition's start (`starts`: partition index → first offset wanted; a partition not
    named starts at its log start), in offset order per partition, cut after
    `max_bytes` in all: (partition, base_offset, last_offset, file_key, position,
    length, rewrite). A topic table's append reads them (``jobs/table_append.py``)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT p.index, b.base_offset, b.last_offset, f.key, b.position, b.length,"
            " f.level = 0,"
            " sum(b.length) OVER (ORDER BY p.index, b.last_offset) - b.length"
            " FROM floe_batch b JOIN floe_file f ON f.id = b.file_id"
            " JOIN floe_partition p ON p.id = b.partition_id"
            " LEFT JOIN unnest(%s::int[], %s::bigint[]) AS s(idx, start) ON s.idx = p.index"
            " WHERE p.topic_id = %s::uuid"
            " AND b.last_offset >= greatest(coalesce(s.start, 0), p.log_start_offset)"
            " ORDER BY p.index, b.last_offset",
            [list(starts), list(starts.values()), topic_id],
        )
        rows = cursor.fetchall()
    # Always at least one run: a run larger than max_bytes still makes progress.
    return [tuple(row[:7]) for row in rows if row[7] < max_bytes or row is rows[0]]


def stable_bounds(
    topic_id: str, starts: dict[int, int]
) -> tuple[dict[int, int], list[list[int]], dict[int, list[int]]]:
    """What a table append may take of a topic, as a read_committed consumer would:
    per partition index its last stable offset (the first offset of its oldest open
    transaction, else its high watermark: offsets below it are decided); the aborted
    transactions [partition index, producer id, first offset, marker offset] whose
    records are skipped; and per partition the offsets of transaction markers at or past
    its start (`starts`): rows, not file bytes, so no run holds them."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT p.index, coalesce((SELECT min(tp.first_offset) FROM floe_txn_partition tp"
            "  WHERE tp.partition_id = p.id), p.high_watermark)"
            " FROM floe_partition p WHERE p.topic_id = %s::uuid",
            [topic_id],
        )
        stable = {int(index): int(offset) for index, offset in cursor.fetchall()}
        cursor.execute(
            "SELECT p.index, m.producer_id, coalesce(m.first_offset, 0), m.marker_offset,"
            " m.committed"
            " FROM floe_txn_marker m JOIN floe_partition p ON p.id = m.partition_id"
            " LEFT JOIN unnest(%s::int[], %s::bigint[]) AS s(idx, start) ON s.idx = p.index"
            " WHERE p.topic_id = %s::uuid AND m.marker_offset >= coalesce(s.start, 0)"
            " ORDER BY p.index, m.marker_offset",
            [list(starts), list(starts.values()), topic_id],
        )
        aborted: list[list[int]] = []
        markers: dict[int, list[int]] = {}
        for index, producer_id, first, marker, committed in cursor.fetchall():
            markers.setdefault(index, []).append(marker)
            if not committed:
                aborted.append([index, producer_id, first, marker])
        return stable, aborted, markers
