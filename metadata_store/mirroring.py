"""Mirrored commits: a migration's copier commits another Kafka's batches at the source's
offsets (issue 30; docs/ARCHITECTURE.md "Migration").

This is a path of its own beside ``floe_commit_files``, which gives every batch the
partition's next offsets and keeps each partition's index dense. A mirrored commit
instead names each batch's offsets, and its checks are these:

- the commit's migration lease is live and its own (`metadata_store.leases`, checked and
  share-locked in the commit's transaction: a copier superseded or past its lease's
  expiry commits nothing — `LeaseLost`, the whole call refused);
- the partition is mirrored by that migration (``floe_partition.mirrored``, its topic's
  ``mirrored_by``) — otherwise POLICY_VIOLATION;
- each batch starts at or after the partition's high watermark (and after the file's
  earlier batches of that partition) — otherwise OFFSET_OUT_OF_RANGE; gaps are allowed
  (compacted-away offsets, deleted records stay gaps);
- the source's transaction markers come as markers, not batches, and are kept as
  ``floe_txn_marker`` rows, as Floe's own (the read path makes their control batches; an
  abort's first offset lists its transaction in read_committed fetches);
- a batch's offsets span at least its records (``last - base + 1 >= records``).

A batch's partition's high watermark becomes its last offset + 1. A log start offset
given for a partition (the source's) moves the partition's forward, never back, and the
high watermark with it when it passes it (a source whose records below were deleted).
Only mirrored partitions move, in one transaction that locks them in id order, as the
normal commit does. The runs written are announced on the tail feed exactly as the
normal commit's (migration 0014), so agents tailing a mirrored partition see its data;
a moved log start is announced as a changed partition. Committing the same file key
again answers what the first commit answered and changes nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import psycopg
from django.db import transaction

from core.kafka.errors import ErrorCode
from metadata_store import tail_feed
from metadata_store.leases import lease_check, migration_subject
from metadata_store.models import Partition, Topic
from metadata_store.store import JSON, Cursor, _cursor, _partition_id_map

# What migration 0016's trigger says when a normal commit meets a mirrored partition.
_TRIGGER_MESSAGE = "is mirrored by a migration"
_NOTE_BYTES = 7800  # a notification's runs, under PostgreSQL's 8000 bytes with its head


@dataclass(frozen=True, slots=True)
class MirroredBatch:
    """One source batch (or several side by side, contiguous in offsets) of a file."""

    topic_id: uuid.UUID
    partition: int
    base_offset: int
    last_offset: int
    records: int
    pos: int
    len: int
    max_ts: int = -1
    batch_count: int = 1


@dataclass(frozen=True, slots=True)
class MirroredMarker:
    """A source's transaction marker (a control batch), kept as Floe keeps its own: a
    ``floe_txn_marker`` row at its offset (the read path makes its control batch; an
    abort's `first_offset` puts the transaction in read_committed fetches' aborted
    transactions)."""

    topic_id: uuid.UUID
    partition: int
    offset: int
    producer_id: int
    producer_epoch: int
    committed: bool
    first_offset: int | None = None
    timestamp: int = -1


@dataclass(frozen=True, slots=True)
class LogStart:
    """The source partition's log start offset, for the mirror to follow."""

    topic_id: uuid.UUID
    partition: int
    offset: int


def topic_mirroring_set(*, topic: Topic, migration_id: str) -> None:
    """Mark `topic` mirrored by `migration_id` ("": no longer — a cutover), with its
    partitions, in the caller's transaction. After a cutover the normal commit path
    continues each partition from its high watermark."""
    Topic.objects.filter(pk=topic.pk).update(mirrored_by=migration_id)
    Partition.objects.filter(topic=topic).update(mirrored=bool(migration_id))
    topic.mirrored_by = migration_id


def refused_as_mirrored(exc: BaseException) -> bool:
    """Whether migration 0016's trigger refused a normal commit (an agent whose topic
    metadata did not yet say the topic is mirrored); its answer is `mirrored_refusal`."""
    return isinstance(exc, psycopg.errors.CheckViolation) and _TRIGGER_MESSAGE in (
        exc.diag.message_primary or ""
    )


def mirrored_refusal(batches: int) -> list[JSON]:
    """A refused normal commit's answer: every batch POLICY_VIOLATION, nothing kept."""
    refused = {"error_code": int(ErrorCode.POLICY_VIOLATION), "base_offset": -1}
    return [dict(refused, log_start_offset=-1) for _ in range(batches)]


def _stored_answer(cursor: Cursor, cluster_id: int, file_key: str) -> list[JSON] | None:
    cursor.execute(
        "SELECT commit_offsets, commit_errors FROM floe_file WHERE cluster_id = %s AND key = %s",
        [cluster_id, file_key],
    )
    row = cursor.fetchone()
    if row is None:
        return None
    offsets, errors = row[0] or [], row[1] or [0] * len(row[0] or [])
    return [{"error_code": e, "base_offset": o} for o, e in zip(offsets, errors)]


def _runs_note(cluster_id: int, file_key: str, lines: list[str]) -> list[str]:
    """The tail feed's notifications for one file's runs (the 0014 format), split where
    one would pass PostgreSQL's limit."""
    notes: list[str] = []
    head = f"r {cluster_id}\nf {file_key}"
    current: list[str] = []
    size = 0
    for line in lines:
        if current and size + len(line) + 1 + 2 * len(head) > _NOTE_BYTES:
            notes.append(head + "\n" + "\n".join(current))
            current, size = [], 0
        current.append(line)
        size += len(line) + 1
    if current:
        notes.append(head + "\n" + "\n".join(current))
    return notes


def mirrored_file_commit(
    *,
    cluster_id: int,
    migration_id: str,
    lease: str,
    file_key: str | None,
    size: int,
    batches: Sequence[MirroredBatch],
    log_starts: Sequence[LogStart] = (),
    markers: Sequence[MirroredMarker] = (),
) -> JSON:
    """Commit a mirrored segment file (`file_key` None: no file, only `log_starts` and
    `markers`) for the copier holding migration `migration_id`'s lease with token
    `lease` (else `LeaseLost`, nothing written). A marker is kept at its offset when that is at or after the partition's
    high watermark and no batch of this commit holds it (else OFFSET_OUT_OF_RANGE), in
    the same transaction as the file's runs.

    Returns ``{"batches": [{"error_code", "base_offset"}, …], "partitions":
    [{"topic_id", "partition", "high_watermark", "log_start_offset"}, …]}`` — the
    partitions the call named, as they are after it.
    """
    pairs = sorted(
        {(b.topic_id, b.partition) for b in batches}
        | {(s.topic_id, s.partition) for s in log_starts}
        | {(m.topic_id, m.partition) for m in markers}
    )
    with transaction.atomic(), _cursor() as cursor:
        lease_check(cluster_id=cluster_id, subject=migration_subject(migration_id), token=lease)
        answers = _stored_answer(cursor, cluster_id, file_key) if file_key else None
        ids = _partition_id_map(cursor, cluster_id, pairs)
        cursor.execute(
            "SELECT p.id, p.high_watermark, p.log_start_offset,"
            " p.mirrored AND t.mirrored_by = %s FROM floe_partition p"
            " JOIN floe_topic t ON t.id = p.topic_id"
            " WHERE p.id = ANY(%s) ORDER BY p.id FOR UPDATE OF p",
            [migration_id, sorted(ids.values())],
        )
        state = {row[0]: [row[1], row[2], row[3]] for row in cursor.fetchall()}
        before = {pid: tuple(values) for pid, values in state.items()}
        marker_answers: list[int] = []
        if answers is None:
            answers = []
            # (partition id, base, last, pos, len, records, batch count, max ts), by run
            runs: list[list[int]] = []
            last_run: dict[int, int] = {}
            for b in batches:
                pid = ids.get((b.topic_id, b.partition), -1)
                part = state.get(pid)
                if part is None:
                    answers.append(
                        {"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "base_offset": -1}
                    )
                    continue
                if not part[2]:
                    answers.append({"error_code": ErrorCode.POLICY_VIOLATION, "base_offset": -1})
                    continue
                if b.base_offset < part[0] or b.last_offset - b.base_offset + 1 < b.records:
                    answers.append({"error_code": ErrorCode.OFFSET_OUT_OF_RANGE, "base_offset": -1})
                    continue
                answers.append({"error_code": 0, "base_offset": b.base_offset})
                run = runs[last_run[pid]] if pid in last_run else None
                if (
                    run is not None
                    and run[2] + 1 == b.base_offset == part[0]
                    and run[3] + run[4] == b.pos
                ):
                    run[2] = b.last_offset
                    run[4] += b.len
                    run[5] += b.records
                    run[6] += b.batch_count
                    run[7] = max(run[7], b.max_ts)
                else:
                    last_run[pid] = len(runs)
                    runs.append(
                        [pid, b.base_offset, b.last_offset, b.pos, b.len, b.records]
                        + [b.batch_count, b.max_ts]
                    )
                part[0] = b.last_offset + 1
            marker_answers = _markers_check(markers, ids, state, before, batches, answers)
            for start in log_starts:
                part = state.get(ids.get((start.topic_id, start.partition), -1))
                if part is not None and part[2] and start.offset > part[1]:
                    part[1] = start.offset
                    part[0] = max(part[0], start.offset)
            if file_key:
                _file_insert(cursor, cluster_id, file_key, size, batches, answers, runs)
                _runs_announce(cursor, cluster_id, file_key, runs, state)
            _markers_insert(cursor, markers, marker_answers, ids)
        moved = [pid for pid, values in state.items() if tuple(values) != before[pid]]
        if moved:
            cursor.execute("SET LOCAL floe.mirror = 'on'")
            cursor.execute(
                "UPDATE floe_partition p SET high_watermark = u.hw, log_start_offset = u.ls"
                " FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[]) AS u(id, hw, ls)"
                " WHERE p.id = u.id",
                [moved, [state[p][0] for p in moved], [state[p][1] for p in moved]],
            )
            cursor.execute("SET LOCAL floe.mirror = 'off'")
        # A raised log start, or a marker (the tail index learns markers as Floe's own:
        # the partition changed, planned again from the store).
        marked = {ids[(m.topic_id, m.partition)] for m, c in zip(markers, marker_answers) if not c}
        raised = [pid for pid in moved if state[pid][1] != before[pid][1] or pid in marked]
        tail_feed.partitions_changed(cluster_id, raised)
    by_id = {pid: pair for pair, pid in ids.items()}
    return {
        "batches": answers,
        "markers": [{"error_code": code} for code in marker_answers],
        "partitions": [
            {
                "topic_id": str(by_id[pid][0]),
                "partition": by_id[pid][1],
                "high_watermark": values[0],
                "log_start_offset": values[1],
            }
            for pid, values in sorted(state.items())
        ],
    }


def _file_insert(
    cursor: Cursor,
    cluster_id: int,
    file_key: str,
    size: int,
    batches: Sequence[MirroredBatch],
    answers: list[JSON],
    runs: list[list[int]],
) -> None:
    """The file's row (with its answer, for a retry) and its index runs."""
    errors = [a["error_code"] for a in answers]
    cursor.execute(
        "INSERT INTO floe_file (cluster_id, key, size, level, state, batch_count, created_at,"
        " data_bytes, commit_offsets, commit_errors) VALUES (%s, %s, %s, 0, 'live', %s, now(),"
        " %s, %s, %s) RETURNING id",
        [
            cluster_id,
            file_key,
            size,
            sum(b.batch_count for b in batches),
            sum(r[4] for r in runs),
            [a["base_offset"] for a in answers],
            errors if any(errors) else None,
        ],
    )
    row = cursor.fetchone()
    assert row is not None
    if runs:
        cursor.execute(
            "INSERT INTO floe_batch (partition_id, base_offset, last_offset, position, length,"
            " record_count, batch_count, max_timestamp, file_id)"
            " SELECT u.p, u.b, u.l, u.pos, u.len, u.n, u.nb, u.ts, %s FROM unnest(%s::bigint[],"
            " %s::bigint[], %s::bigint[], %s::bigint[], %s::int[], %s::int[], %s::int[],"
            " %s::bigint[]) AS u(p, b, l, pos, len, n, nb, ts)",
            [row[0], *([r[i] for r in runs] for i in range(8))],
        )


def _runs_announce(
    cursor: Cursor,
    cluster_id: int,
    file_key: str,
    runs: list[list[int]],
    state: dict[int, list[int]],
) -> None:
    """The runs on the tail feed, as ``floe_commit_files`` announces its own (0014): a
    mirrored partition has no open transaction of Floe's (-1)."""
    lines = [
        f"{pid} {base} {last} {pos} {length} {nbatch} -1 {state[pid][1]}"
        for pid, base, last, pos, length, _, nbatch, _ in runs
    ]
    for note in _runs_note(cluster_id, file_key, lines):
        cursor.execute("SELECT pg_notify(%s, %s)", [tail_feed.CHANNEL, note])


def _markers_check(
    markers: Sequence[MirroredMarker],
    ids: dict[tuple[uuid.UUID, int], int],
    state: dict[int, list[int]],
    before: dict[int, tuple[int, int, bool]],
    batches: Sequence[MirroredBatch],
    answers: list[JSON],
) -> list[int]:
    """Each marker's error code; the high watermark moves past those kept."""
    held: dict[int, list[tuple[int, int]]] = {}
    for b, answer in zip(batches, answers):
        if not answer["error_code"]:
            held.setdefault(ids[(b.topic_id, b.partition)], []).append(
                (b.base_offset, b.last_offset)
            )
    codes: list[int] = []
    seen: set[tuple[int, int]] = set()
    for m in markers:
        pid = ids.get((m.topic_id, m.partition), -1)
        part = state.get(pid)
        if part is None:
            codes.append(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        elif not part[2]:
            codes.append(ErrorCode.POLICY_VIOLATION)
        elif (
            m.offset < before[pid][0]
            or (pid, m.offset) in seen
            or any(base <= m.offset <= last for base, last in held.get(pid, ()))
        ):
            codes.append(ErrorCode.OFFSET_OUT_OF_RANGE)
        else:
            codes.append(0)
            seen.add((pid, m.offset))
            part[0] = max(part[0], m.offset + 1)
    return codes


def _markers_insert(
    cursor: Cursor,
    markers: Sequence[MirroredMarker],
    codes: list[int],
    ids: dict[tuple[uuid.UUID, int], int],
) -> None:
    kept = [m for m, code in zip(markers, codes) if not code]
    if not kept:
        return
    cursor.execute(
        "INSERT INTO floe_txn_marker (partition_id, marker_offset, producer_id, producer_epoch,"
        " committed, first_offset, timestamp) SELECT * FROM unnest(%s::bigint[], %s::bigint[],"
        " %s::bigint[], %s::smallint[], %s::bool[], %s::bigint[], %s::bigint[])",
        [
            [ids[(m.topic_id, m.partition)] for m in kept],
            [m.offset for m in kept],
            [m.producer_id for m in kept],
            [m.producer_epoch for m in kept],
            [m.committed for m in kept],
            [None if m.committed else m.first_offset for m in kept],
            [m.timestamp for m in kept],
        ],
    )
