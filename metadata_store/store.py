"""The metadata store's hot paths: commit, fetch plan, offsets, producer ids.

These run on every produce and fetch of every agent, so each is a handful of set-based
SQL statements (``unnest`` arrays in, rows out) inside one short transaction, with
partition rows locked in id order so concurrent commits never deadlock. Only sizes,
counts, timestamps, offsets and producer ids pass through here — never record data.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

import psycopg
from django.db import connection, transaction
from psycopg.rows import TupleRow

from core.kafka.errors import ErrorCode
from metadata_store import tail_feed

FETCH_PLAN_MAX_RUNS = 128  # per partition and call; the client simply fetches again
MARKER_BYTES = 78  # a commit or abort marker's control batch, for the byte budgets

Cursor = psycopg.Cursor[TupleRow]  # a raw cursor on Django's connection (`_cursor`)
Row = tuple[Any, ...]
JSON = dict[str, Any]  # a JSON object as the agent API takes and gives it


class CommitBatch(Protocol):
    """What a commit needs of each batch, whatever carried it here: the store does not
    know its wire format (the agent API's ``schemas.CommitBatch`` is one such batch,
    validated there). One record batch of a segment file, or several side by side of
    one partition with no producer id (`batch_count`: `records`, `len` and `max_ts`
    are then their totals and maximum)."""

    @property
    def topic_id(self) -> uuid.UUID: ...
    @property
    def partition(self) -> int: ...
    @property
    def pos(self) -> int: ...
    @property
    def len(self) -> int: ...
    @property
    def records(self) -> int: ...
    @property
    def base_ts(self) -> int: ...
    @property
    def max_ts(self) -> int: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def transactional(self) -> bool: ...
    @property
    def batch_count(self) -> int: ...


@dataclass(slots=True)
class _PartitionRow:
    id: int
    high_watermark: int
    log_start_offset: int


def _as_uuid(value: object) -> uuid.UUID | None:
    try:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    except (TypeError, ValueError):
        return None


# (cluster id, topic id as an int, partition index) -> partition row id. Immutable for
# the life of a topic (a re-created topic has a new id), so agents' hot calls skip the
# lookup. Keyed by the UUID's int: a uuid.UUID hashes and compares in Python code, and a
# commit looks up every one of its batches.
_partition_ids: dict[tuple[int, int, int], int] = {}


def _partition_row_ids(cursor: Cursor, cluster_id: int, keys: list[tuple[int, int]]) -> list[int]:
    """Row ids of the cluster's partitions named by (topic id's int, index), in order; -1
    for those that do not exist."""
    cache = _partition_ids
    ids = [cache.get((cluster_id, topic, index), -1) for topic, index in keys]
    missing = {key for key, pid in zip(keys, ids) if pid < 0}
    if not missing:
        return ids
    cursor.execute(
        "SELECT p.id, p.topic_id, p.index FROM unnest(%s::uuid[], %s::int[]) AS r(t, i)"
        " JOIN floe_partition p ON p.topic_id = r.t AND p.index = r.i"
        " JOIN floe_topic t ON t.id = p.topic_id WHERE t.cluster_id = %s",
        [[uuid.UUID(int=k[0]) for k in missing], [k[1] for k in missing], cluster_id],
    )
    if len(cache) > 1_000_000:
        cache.clear()
    for pid, topic_id, index in cursor.fetchall():
        cache[(cluster_id, topic_id.int, index)] = pid
    return [cache.get((cluster_id, topic, index), -1) for topic, index in keys]


def _partition_id_map(
    cursor: Cursor, cluster_id: int, pairs: list[tuple[uuid.UUID, int]]
) -> dict[tuple[uuid.UUID, int], int]:
    """(topic id, index) -> partition row id, for the pairs that exist in the cluster."""
    ids = _partition_row_ids(cursor, cluster_id, [(t.int, i) for t, i in pairs])
    return {pair: pid for pair, pid in zip(pairs, ids) if pid >= 0}


def _partitions_for(
    cursor: Cursor, cluster_id: int, pairs: list[tuple[uuid.UUID, int]], *, lock: bool
) -> dict[tuple[uuid.UUID | None, int], _PartitionRow]:
    """Rows of the cluster's partitions named by (topic id, index), locked in id order.

    Locking in id order is what keeps concurrent commits over overlapping partitions
    free of deadlocks.
    """
    ids = _partition_id_map(cursor, cluster_id, pairs)
    if not ids:
        return {}
    cursor.execute(
        "SELECT id, high_watermark, log_start_offset FROM floe_partition WHERE id = ANY(%s)"
        + (" ORDER BY id FOR UPDATE" if lock else ""),
        [sorted(ids.values())],
    )
    rows = {row[0]: _PartitionRow(*row) for row in cursor.fetchall()}  # a deleted topic's are gone
    return {pair: rows[pid] for pair, pid in ids.items() if pid in rows}


def _partitions_requested(
    cursor: Cursor, cluster_id: int, partitions: list[JSON], *, lock: bool
) -> tuple[list[tuple[uuid.UUID | None, int]], dict[tuple[uuid.UUID | None, int], _PartitionRow]]:
    """Each requested partition's key (topic id — None when it is no UUID —, index), in the
    request's order, and the rows of those the cluster has (`_partitions_for`)."""
    wanted = [(_as_uuid(p.get("topic_id")), p.get("partition", -1)) for p in partitions]
    pairs = sorted({(t, i) for t, i in wanted if t is not None})
    return wanted, _partitions_for(cursor, cluster_id, pairs, lock=lock)


def _array(values: Iterable[int]) -> str:
    """An integer array as a PostgreSQL literal: far cheaper than adapting each element."""
    return "{" + ",".join(map(str, values)) + "}"


def _cursor() -> Cursor:
    """A plain psycopg cursor on Django's connection (and its transaction).

    Server-side parameter binding with automatic prepared statements: Django's default
    client-side binding spends milliseconds quoting the arrays these statements carry.
    """
    connection.ensure_connection()
    return psycopg.Cursor(connection.connection)


def one_row(cursor: Cursor) -> Row:
    """The row a statement that always gives one gave (INSERT … RETURNING, an aggregate)."""
    row = cursor.fetchone()
    if row is None:
        raise RuntimeError("the statement gave no row")
    return row


@dataclass(frozen=True, slots=True)
class FileCommit:
    """A file's commit, its columns already written as array elements ("1,2,3"): a group
    of commits is then one statement whose arguments are these strings joined."""

    file_key: str
    size: int
    entries: int
    columns: tuple[str, ...]  # floe_commit_files' per-entry arguments, in order


# floe_commit_files' per-entry arguments, in order: partition row id, records, batches,
# position, length, max timestamp, producer id, epoch, base sequence, transactional.
_COMMIT_COLUMNS = (
    "bigint",
    "int",
    "int",
    "bigint",
    "int",
    "bigint",
    "bigint",
    "int",
    "int",
    "bool",
)
COMMIT_SQL = (
    "SELECT * FROM floe_commit_files(%s, %s::text[], %s::bigint[], %s::int[], "
    + ", ".join(f"%s::{kind}[]" for kind in _COMMIT_COLUMNS)
    + ")"
)


def cached_partition_ids(cluster_id: int, batches: Sequence[CommitBatch]) -> list[int] | None:
    """The batches' partition row ids from this process's cache, or None if one is not
    in it (``partition_ids`` asks the database)."""
    cache = _partition_ids
    ids = [cache.get((cluster_id, b.topic_id.int, b.partition), -1) for b in batches]
    return None if -1 in ids else ids


def partition_ids(cluster_id: int, batches: Sequence[CommitBatch]) -> list[int]:
    """The batches' partition row ids, -1 for a partition the cluster does not have."""
    ids = cached_partition_ids(cluster_id, batches)
    if ids is None:
        with _cursor() as cursor:
            ids = _partition_row_ids(
                cursor, cluster_id, [(b.topic_id.int, b.partition) for b in batches]
            )
    return ids


def file_commit_prepare(
    *, file_key: str, size: int, batches: Sequence[CommitBatch], ids: list[int]
) -> FileCommit:
    """A validated commit (``agent_api.schemas``) with its partitions' row ids, ready to
    join a group."""
    return FileCommit(
        file_key,
        size,
        len(batches),
        (
            ",".join(map(str, ids)),
            ",".join([str(b.records) for b in batches]),
            ",".join([str(b.batch_count) for b in batches]),
            ",".join([str(b.pos) for b in batches]),
            ",".join([str(b.len) for b in batches]),
            ",".join([str(b.max_ts) for b in batches]),
            ",".join([str(b.producer_id) for b in batches]),
            ",".join([str(b.producer_epoch) for b in batches]),
            ",".join([str(b.base_sequence) for b in batches]),
            ",".join(["t" if b.transactional else "f" for b in batches]),
        ),
    )


def commit_params(cluster_id: int, commits: list[FileCommit]) -> list[object]:
    """``COMMIT_SQL``'s arguments for one statement committing all of `commits`."""
    return [
        cluster_id,
        [c.file_key for c in commits],
        _array(c.size for c in commits),
        _array(c.entries for c in commits),
        *(
            "{" + ",".join([c.columns[i] for c in commits if c.entries]) + "}"
            for i in range(len(_COMMIT_COLUMNS))
        ),
    ]


def commit_rows(commits: list[FileCommit], rows: list[Row]) -> list[Row]:
    """The statement's rows, one per commit of `commits` in order (keyed by file key)."""
    by_key = {row[0]: row[1:] for row in rows}
    return [by_key[c.file_key] for c in commits]


def file_commit(
    *, cluster_id: int, file_key: str, size: int, batches: Sequence[CommitBatch]
) -> list[JSON]:
    """Record a flushed segment file and give each of its batches its offsets.

    `batches` are validated (``agent_api.schemas.CommitRequest`` and ``validate_commit``).
    The ``floe_commit_files`` database function (migration 0008) does the rest:
    transactional batches their transaction does not allow are refused, idempotent
    duplicates get their original offset and are not stored again, every other batch gets
    the partition's next offsets, each partition run of the file becomes one index row,
    high watermarks move. Committing the same ``file_key`` again returns the first answer
    and changes nothing. This is one statement on Django's connection; the web server
    commits agents' files in groups (``agent_api.asgi`` and ``commit_pipeline``).
    """
    commit = file_commit_prepare(
        file_key=file_key, size=size, batches=batches, ids=partition_ids(cluster_id, batches)
    )
    # Inside a caller's transaction, a savepoint: a failure leaves that transaction usable.
    with transaction.atomic() if connection.in_atomic_block else nullcontext():
        with _cursor() as cursor:
            cursor.execute(COMMIT_SQL, commit_params(cluster_id, [commit]))
            (row,) = commit_rows([commit], cursor.fetchall())
    return batch_answers(*row)


def files_commit(*, cluster_id: int, files: Sequence[Any]) -> list[list[JSON]]:
    """Several files (``agent_api.schemas.CommitRequest``s, validated) committed in one
    statement, in their order, as ``file_commit`` commits one: an agent's journal entries
    sequenced together (docs/AGENT_API.md "commit-files"). Raises as the statement does;
    the caller then commits each alone (``agent_api.views.commit_files``)."""
    commits = [
        file_commit_prepare(
            file_key=f.file_key,
            size=f.size,
            batches=f.batches,
            ids=partition_ids(cluster_id, f.batches),
        )
        for f in files
    ]
    with transaction.atomic() if connection.in_atomic_block else nullcontext():
        with _cursor() as cursor:
            cursor.execute(COMMIT_SQL, commit_params(cluster_id, commits))
            rows = commit_rows(commits, cursor.fetchall())
    return [batch_answers(*row) for row in rows]


def batch_answers(
    errors: list[int] | None,
    offsets: list[int] | None,
    log_starts: list[int] | None,
    duplicates: list[int] | None,
    old_answer: str | list[JSON] | None,
) -> list[JSON]:
    """A file's answer per batch from ``floe_commit_files``' row: error codes (None: all
    0), base offsets, log start offsets, the 1-based positions of duplicates (None: none);
    or, for a file committed before 0008 and committed again, the jsonb list it stored."""
    if offsets is None:
        # Django registers a jsonb loader that leaves decoding to the caller.
        stored: list[JSON] = (
            json.loads(old_answer) if isinstance(old_answer, str) else old_answer or []
        )
        return stored
    n = len(offsets)
    errors = errors or [0] * n
    if not log_starts or len(log_starts) != n:  # a retry with another body: not ours to say
        log_starts = [-1] * n
    answers = [
        {"error_code": code, "base_offset": base, "log_start_offset": start}
        for code, base, start in zip(errors, offsets, log_starts, strict=True)
    ]
    for position in duplicates or ():
        answers[position - 1]["duplicate"] = True
    return answers


def _stable_offsets(cursor: Cursor, partition_ids: list[int]) -> dict[int, int]:
    """Partition id -> its last stable offset where an open transaction holds it back
    (KIP-98: the first offset of the oldest open transaction; elsewhere the LSO is the
    high watermark)."""
    if not partition_ids:
        return {}
    cursor.execute(
        "SELECT partition_id, min(first_offset) FROM floe_txn_partition"
        " WHERE partition_id = ANY(%s) AND first_offset IS NOT NULL GROUP BY partition_id",
        [partition_ids],
    )
    return dict(cursor.fetchall())


def fetch_plan(
    *, cluster_id: int, partitions: list[JSON], max_bytes: int, isolation_level: int = 0
) -> list[JSON]:
    """Run pointers from each requested offset on, within the byte budgets, with the
    transaction markers among them. READ_COMMITTED (`isolation_level` 1, KIP-98) stops at
    the last stable offset and lists the aborted transactions in the range."""
    read_committed = isolation_level == 1
    with _cursor() as cursor:
        wanted, rows = _partitions_requested(cursor, cluster_id, partitions, lock=False)
        stable = _stable_offsets(cursor, sorted({r.id for r in rows.values()}))
        answers: list[JSON] = []
        # (answer index, partition id, offset, end: the LSO or the high watermark)
        to_read: list[tuple[int, int, int, int]] = []
        for request, key in zip(partitions, wanted):
            answer: JSON = {
                "topic_id": request.get("topic_id"),
                "partition": key[1],
                "error_code": 0,
                "high_watermark": -1,
                "last_stable_offset": -1,
                "log_start_offset": -1,
                "batches": [],
            }
            answers.append(answer)
            part = rows.get(key)
            if part is None:
                answer["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            answer["high_watermark"] = part.high_watermark
            answer["log_start_offset"] = part.log_start_offset
            lso = stable.get(part.id, part.high_watermark)
            answer["last_stable_offset"] = lso
            end = lso if read_committed else part.high_watermark
            offset = request.get("offset", 0)
            if offset < part.log_start_offset or offset > part.high_watermark:
                answer["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
            elif offset < end:
                to_read.append((len(answers) - 1, part.id, offset, end))
        if not to_read:
            return answers
        # Per partition: runs and markers from the offset on (below the end) while the
        # bytes before each stay under the partition's budget, so the one that crosses it
        # comes too (the agent trims runs to the budgets batch by batch, KIP-74); read in
        # index order, no further than that (``floe_plan_runs``, migration 0009).
        cursor.execute(
            "SELECT b.i, b.base_offset, b.last_offset, b.position, b.length, b.batch_count,"
            " f.key, f.level, b.m_pid, b.m_epoch, b.m_commit, b.m_ts"
            " FROM floe_plan_runs(%s::int[], %s::bigint[], %s::bigint[], %s::bigint[],"
            "   %s::bigint[], %s, %s) b"
            " LEFT JOIN floe_file f ON f.id = b.file_id"
            " ORDER BY b.i, b.last_offset",
            [
                [t[0] for t in to_read],
                [t[1] for t in to_read],
                [t[2] for t in to_read],
                [max(1, partitions[t[0]].get("max_bytes", max_bytes)) for t in to_read],
                [t[3] for t in to_read],
                FETCH_PLAN_MAX_RUNS,
                MARKER_BYTES,
            ],
        )
        budget = max_bytes
        part_budget = {t[0]: partitions[t[0]].get("max_bytes", max_bytes) for t in to_read}
        first = True
        for row in cursor.fetchall():
            index, base, last, position, length, batches, key, level = row[:8]
            # KIP-74: the first run of the response is returned whatever the limits, so a
            # consumer always makes progress; a later one only while budget is left.
            if not first and (part_budget[index] <= 0 or budget <= 0):
                continue
            first = False
            if key is None:  # a transaction marker: the agent writes its control batch
                pid, epoch, committed, ts = row[8:]
                answers[index]["batches"].append(
                    {
                        "base_offset": base,
                        "last_offset": last,
                        "marker": {
                            "producer_id": pid,
                            "producer_epoch": epoch,
                            "committed": committed,
                            "timestamp": ts,
                        },
                    }
                )
            else:
                answers[index]["batches"].append(
                    {
                        "file_key": key,
                        "pos": position,
                        "len": length,
                        "base_offset": base,
                        "last_offset": last,
                        "batch_count": batches,
                        # Level-0 files hold producers' batches as sent: the reader sets
                        # each batch's baseOffset from the run's. Compacted files carry them.
                        "rewrite": level == 0,
                    }
                )
            part_budget[index] -= length
            budget -= length
        if read_committed:
            # KIP-98: the aborted transactions whose records the consumer may meet from
            # its offset on; it drops their records up to each abort marker.
            cursor.execute(
                "SELECT r.i, m.producer_id, m.first_offset FROM unnest(%s::int[], %s::bigint[],"
                " %s::bigint[], %s::bigint[]) AS r(i, pid, off, upto)"
                " JOIN floe_txn_marker m ON m.partition_id = r.pid AND m.marker_offset >= r.off"
                " AND NOT m.committed AND m.first_offset < r.upto ORDER BY r.i, m.first_offset",
                [
                    [t[0] for t in to_read],
                    [t[1] for t in to_read],
                    [t[2] for t in to_read],
                    [t[3] for t in to_read],
                ],
            )
            for index, producer_id, first_offset in cursor.fetchall():
                answers[index].setdefault("aborted_transactions", []).append(
                    {"producer_id": producer_id, "first_offset": first_offset}
                )
    return answers


def list_offsets(*, cluster_id: int, partitions: list[JSON]) -> list[JSON]:
    """Earliest (-2), latest (-1), max-timestamp (-3) or first offset at a timestamp.
    READ_COMMITTED's latest (a partition's `isolation_level` 1) is the last stable offset
    (KIP-98)."""
    with _cursor() as cursor:
        wanted, rows = _partitions_requested(cursor, cluster_id, partitions, lock=False)
        stable = _stable_offsets(cursor, sorted({r.id for r in rows.values()}))
        answers: list[JSON] = []
        for request, key in zip(partitions, wanted):
            answer: JSON = {
                "topic_id": request.get("topic_id"),
                "partition": key[1],
                "error_code": 0,
                "offset": -1,
                "timestamp": -1,
            }
            answers.append(answer)
            part = rows.get(key)
            if part is None:
                answer["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            answer["high_watermark"] = part.high_watermark
            answer["log_start_offset"] = part.log_start_offset
            answer["last_stable_offset"] = stable.get(part.id, part.high_watermark)
            timestamp = request.get("timestamp", -1)
            if timestamp == -1:
                answer["offset"] = (
                    answer["last_stable_offset"]
                    if request.get("isolation_level", 0) == 1
                    else part.high_watermark
                )
            elif timestamp == -2:
                answer["offset"] = part.log_start_offset
            else:
                # -3: the run holding the largest timestamp; else the first run holding a
                # record at or after the timestamp. The agent reads the run and narrows the
                # answer to the exact record (the control plane never sees records).
                order = (
                    "b.max_timestamp DESC, b.last_offset" if timestamp == -3 else "b.last_offset"
                )
                since = "" if timestamp == -3 else " AND b.max_timestamp >= %s"
                cursor.execute(
                    "SELECT b.base_offset, b.last_offset, b.max_timestamp, b.position, b.length,"
                    " b.batch_count, f.key, f.level FROM floe_batch b"
                    " JOIN floe_file f ON f.id = b.file_id"
                    f" WHERE b.partition_id = %s AND b.last_offset >= %s{since}"
                    f" ORDER BY {order} LIMIT 1",
                    [part.id, part.log_start_offset] + ([] if timestamp == -3 else [timestamp]),
                )
                found = cursor.fetchone()
                if found:
                    base, last, max_ts, position, length, batches, key, level = found
                    answer["offset"] = max(base, part.log_start_offset)
                    answer["timestamp"] = max_ts
                    answer["batch"] = {
                        "file_key": key,
                        "pos": position,
                        "len": length,
                        "base_offset": base,
                        "last_offset": last,
                        "batch_count": batches,
                        "rewrite": level == 0,
                    }
    return answers


@transaction.atomic
def records_delete(*, cluster_id: int, partitions: list[JSON]) -> list[JSON]:
    """Move log start offsets forward (DeleteRecords); -1 means the high watermark. A
    mirrored partition's log start follows its source's only (POLICY_VIOLATION)."""
    with _cursor() as cursor:
        wanted, rows = _partitions_requested(cursor, cluster_id, partitions, lock=True)
        cursor.execute(
            "SELECT id FROM floe_partition WHERE id = ANY(%s) AND mirrored",
            [[r.id for r in rows.values()]],
        )
        mirrored = {row[0] for row in cursor.fetchall()}
        answers: list[JSON] = []
        for request, key in zip(partitions, wanted):
            answer: JSON = {
                "topic_id": request.get("topic_id"),
                "partition": key[1],
                "error_code": 0,
                "low_watermark": -1,
            }
            answers.append(answer)
            part = rows.get(key)
            if part is None:
                answer["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if part.id in mirrored:
                answer["error_code"] = ErrorCode.POLICY_VIOLATION
                continue
            offset = request.get("offset", -1)
            offset = part.high_watermark if offset == -1 else offset
            if offset < 0 or offset > part.high_watermark:
                answer["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
                continue
            part.log_start_offset = max(part.log_start_offset, offset)
            cursor.execute(
                "UPDATE floe_partition SET log_start_offset = %s WHERE id = %s",
                [part.log_start_offset, part.id],
            )
            answer["low_watermark"] = part.log_start_offset
    tail_feed.partitions_changed(cluster_id, [r.id for r in rows.values()])
    return answers


def producer_id_init(*, cluster_id: int) -> tuple[int, int]:
    """A new producer id (epoch 0) for an idempotent producer. Transactional ids keep
    theirs and bump its epoch (``transactions.txn_init``)."""
    with _cursor() as cursor:
        cursor.execute(
            "INSERT INTO floe_producer_id (cluster_id, transactional_id, epoch, created_at)"
            " VALUES (%s, NULL, 0, now()) RETURNING id",
            [cluster_id],
        )
        return one_row(cursor)[0], 0
