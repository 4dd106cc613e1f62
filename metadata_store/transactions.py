"""Transactions (KIP-98): the coordinator's state, kept in the metadata store.

Any agent can coordinate any transaction: the state lives here, so a coordinator's death
loses nothing. A transactional id's row in ``floe_producer_id`` is its transaction (state,
timeout, start) and every call locks it; ``floe_txn_partition`` holds the partitions of
the open transaction and the offset of its first batch in each (the LSO), and
``floe_txn_offset`` the group offsets sent to it. Ending a transaction is one database
transaction: a marker per written partition (``floe_txn_marker``, one offset each),
the pending group offsets committed or dropped, the state moved on.

Locks: ending a transaction takes its partitions (in id order) before the producer row,
the same order as a commit of transactional batches (``floe_commit_files``), so the two
never deadlock; the other calls lock only the producer row.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from core.kafka.errors import ErrorCode
from core.offset_metadata import metadata_bytes
from metadata_store import tail_feed
from metadata_store.store import JSON, Cursor, _cursor, one_row

MAX_TIMEOUT_MS = 15 * 60 * 1000  # Kafka's transaction.max.timeout.ms default


@dataclass(slots=True)
class _Txn:
    id: int
    epoch: int
    state: str


def _row(cursor: Cursor, cluster_id: int, transactional_id: str, *, lock: str = "") -> _Txn | None:
    cursor.execute(
        "SELECT id, epoch, txn_state FROM floe_producer_id"
        " WHERE cluster_id = %s AND transactional_id = %s" + (f" FOR {lock}" if lock else ""),
        [cluster_id, transactional_id],
    )
    found = cursor.fetchone()
    return _Txn(*found) if found else None


def _check(txn: _Txn | None, producer_id: int, producer_epoch: int) -> int:
    """0, or why a call with this producer id and epoch is refused."""
    if txn is None or txn.id != producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if producer_epoch != txn.epoch:
        return ErrorCode.PRODUCER_FENCED  # a zombie: a newer instance bumped the epoch
    return 0


def txn_init(
    *,
    cluster_id: int,
    transactional_id: str,
    timeout_ms: int,
    producer_id: int = -1,
    producer_epoch: int = -1,
) -> JSON:
    """InitProducerId with a transactional id: abort what the previous instance left
    open, bump the epoch (fencing that instance) and return the id and new epoch."""
    if not 0 < timeout_ms <= MAX_TIMEOUT_MS:
        return {"error_code": ErrorCode.INVALID_TRANSACTION_TIMEOUT}
    for _ in range(3):
        with _cursor() as cursor:
            txn = _row(cursor, cluster_id, transactional_id)
        latest = txn is None or (txn.id, txn.epoch) == (producer_id, producer_epoch)
        if producer_id >= 0 and not latest:
            return {"error_code": ErrorCode.PRODUCER_FENCED}  # KIP-360: not the latest
        if txn is not None and txn.state == "ongoing":
            _end(cluster_id, txn.id, None, committed=False)
        with transaction.atomic(), _cursor() as cursor:
            # Epochs are int16: an exhausted producer id is retired and the transactional
            # id gets a new one at epoch 0, as in Kafka (its old epochs stay fenced).
            cursor.execute(
                "UPDATE floe_producer_id SET transactional_id = NULL WHERE cluster_id = %s"
                " AND transactional_id = %s AND epoch >= 32766 AND txn_state <> 'ongoing'",
                [cluster_id, transactional_id],
            )
            cursor.execute(
                "INSERT INTO floe_producer_id (cluster_id, transactional_id, epoch, created_at,"
                " txn_state, txn_timeout_ms) VALUES (%s, %s, 0, now(), 'empty', %s)"
                " ON CONFLICT (cluster_id, transactional_id) DO UPDATE SET"
                " epoch = floe_producer_id.epoch + 1, txn_timeout_ms = EXCLUDED.txn_timeout_ms,"
                " txn_state = CASE WHEN floe_producer_id.txn_state = 'ongoing' THEN 'ongoing'"
                " ELSE 'empty' END"
                " RETURNING id, epoch, txn_state",
                [cluster_id, transactional_id, timeout_ms],
            )
            new_id, epoch, state = one_row(cursor)
            if state != "ongoing":
                return {"error_code": 0, "producer_id": new_id, "producer_epoch": epoch}
            transaction.set_rollback(True)  # opened again meanwhile: abort it first
    return {"error_code": ErrorCode.CONCURRENT_TRANSACTIONS}


def _partition_ids(
    cursor: Cursor, cluster_id: int, pairs: list[tuple[str, int]]
) -> dict[tuple[str, int], int]:
    """(topic name, index) -> partition row id, for the pairs that exist."""
    if not pairs:
        return {}
    cursor.execute(
        "SELECT t.name, p.index, p.id FROM unnest(%s::text[], %s::int[]) AS r(n, i)"
        " JOIN floe_topic t ON t.cluster_id = %s AND t.name = r.n"
        " JOIN floe_partition p ON p.topic_id = t.id AND p.index = r.i",
        [[p[0] for p in pairs], [p[1] for p in pairs], cluster_id],
    )
    return {(name, index): pid for name, index, pid in cursor.fetchall()}


def _begin(cursor: Cursor, txn: _Txn) -> None:
    if txn.state != "ongoing":
        cursor.execute(
            "UPDATE floe_producer_id SET txn_state = 'ongoing', txn_started_at = now()"
            " WHERE id = %s",
            [txn.id],
        )


@transaction.atomic
def txn_add_partitions(
    *,
    cluster_id: int,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    partitions: list[tuple[str, int]],
    verify_only: bool = False,
) -> dict[tuple[str, int], int]:
    """AddPartitionsToTxn: (topic, partition) -> error code. All or nothing, as in Kafka:
    when one partition fails the others answer OPERATION_NOT_ATTEMPTED."""
    with _cursor() as cursor:
        txn = _row(cursor, cluster_id, transactional_id, lock="UPDATE")
        error = _check(txn, producer_id, producer_epoch)
        if error or txn is None:  # (_check refuses a missing transaction)
            return dict.fromkeys(partitions, error)
        ids = _partition_ids(cursor, cluster_id, partitions)
        if verify_only:  # KIP-890: is each partition in the open transaction?
            cursor.execute(
                "SELECT partition_id FROM floe_txn_partition WHERE producer_id = %s", [txn.id]
            )
            inside = {row[0] for row in cursor.fetchall()}
            return {
                p: 0 if ids.get(p) in inside else ErrorCode.INVALID_TXN_STATE for p in partitions
            }
        if len(ids) < len(set(partitions)):
            return {
                p: ErrorCode.OPERATION_NOT_ATTEMPTED
                if p in ids
                else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                for p in partitions
            }
        _begin(cursor, txn)
        cursor.execute(
            "INSERT INTO floe_txn_partition (producer_id, partition_id)"
            " SELECT %s, unnest(%s::bigint[]) ON CONFLICT DO NOTHING",
            [txn.id, sorted(set(ids.values()))],
        )
    return dict.fromkeys(partitions, 0)


@transaction.atomic
def txn_add_offsets(
    *, cluster_id: int, transactional_id: str, producer_id: int, producer_epoch: int
) -> int:
    """AddOffsetsToTxn: the transaction will carry group offsets (TxnOffsetCommit)."""
    with _cursor() as cursor:
        txn = _row(cursor, cluster_id, transactional_id, lock="UPDATE")
        error = _check(txn, producer_id, producer_epoch)
        if error or txn is None:
            return error
        _begin(cursor, txn)
        return 0


@transaction.atomic
def txn_offset_commit(
    *,
    cluster_id: int,
    transactional_id: str,
    group_id: str,
    producer_id: int,
    producer_epoch: int,
    offsets: list[JSON],
) -> list[int]:
    """TxnOffsetCommit: group offsets held by the open transaction; an error per offset."""
    with _cursor() as cursor:
        txn = _row(cursor, cluster_id, transactional_id, lock="SHARE")
        error = _check(txn, producer_id, producer_epoch)
        if error or txn is None:
            return [error] * len(offsets)
        if txn.state != "ongoing":
            return [ErrorCode.INVALID_TXN_STATE] * len(offsets)
        pairs = [(o["topic"], o["partition"]) for o in offsets]
        ids = _partition_ids(cursor, cluster_id, pairs)
        known = [o for o, p in zip(offsets, pairs, strict=True) if p in ids]
        if known:
            cursor.execute(
                "INSERT INTO floe_txn_offset AS o (producer_id, group_id, partition_id,"
                " committed_offset, leader_epoch, metadata)"
                " SELECT %s, %s, * FROM unnest(%s::bigint[], %s::bigint[], %s::int[], %s::bytea[])"
                " ON CONFLICT (producer_id, group_id, partition_id) DO UPDATE SET"
                " committed_offset = EXCLUDED.committed_offset,"
                " leader_epoch = EXCLUDED.leader_epoch, metadata = EXCLUDED.metadata",
                [
                    txn.id,
                    group_id,
                    [ids[(o["topic"], o["partition"])] for o in known],
                    [o["offset"] for o in known],
                    [o.get("leader_epoch", -1) for o in known],
                    [metadata_bytes(o) for o in known],
                ],
            )
        return [0 if p in ids else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for p in pairs]


def txn_end(
    *,
    cluster_id: int,
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    committed: bool,
) -> tuple[int, list[JSON]]:
    """EndTxn: commit or abort the open transaction. The error code (0 when done) and the
    partitions whose high watermark and last stable offset it moved ({"topic_id",
    "partition"}: an agent's cache of their offsets is stale from now on)."""
    with _cursor() as cursor:
        txn = _row(cursor, cluster_id, transactional_id)
    error = _check(txn, producer_id, producer_epoch)
    if error or txn is None:
        return error, []
    return _end(cluster_id, txn.id, producer_epoch, committed=committed)


@transaction.atomic
def _end(
    cluster_id: int, txn_id: int, epoch: int | None, *, committed: bool
) -> tuple[int, list[JSON]]:
    """Write the markers, settle the group offsets, close the transaction — one database
    transaction. `epoch` None: the control plane aborts (timeout, or a new instance's
    InitProducerId), which also bumps the epoch and so fences the old producer."""
    with _cursor() as cursor:
        cursor.execute(
            "SELECT partition_id FROM floe_txn_partition WHERE producer_id = %s", [txn_id]
        )
        parts = sorted(row[0] for row in cursor.fetchall())
        cursor.execute(
            "SELECT id, topic_id::text, index FROM floe_partition WHERE id = ANY(%s)"
            " ORDER BY id FOR UPDATE",
            [parts],
        )
        moved = [{"topic_id": row[1], "partition": row[2]} for row in cursor.fetchall()]
        cursor.execute(
            "SELECT epoch, txn_state FROM floe_producer_id WHERE id = %s FOR UPDATE", [txn_id]
        )
        current_epoch, state = one_row(cursor)
        if epoch is not None and epoch != current_epoch:
            return ErrorCode.PRODUCER_FENCED, []
        if state != "ongoing":
            done = "complete_commit" if committed else "complete_abort"
            if state == done or (state == "empty" and not committed):
                return 0, []  # a retry of this EndTxn, or nothing to abort
            return ErrorCode.INVALID_TXN_STATE, []
        # KIP-98 markers: one offset each in every partition the transaction wrote to. An
        # abort marker keeps the transaction's first offset (the aborted-transactions list).
        cursor.execute(
            "WITH written AS (SELECT tp.partition_id, tp.first_offset FROM floe_txn_partition tp"
            "   WHERE tp.producer_id = %s AND tp.first_offset IS NOT NULL),"
            " moved AS (UPDATE floe_partition p SET high_watermark = p.high_watermark + 1"
            "   FROM written w WHERE p.id = w.partition_id"
            "   RETURNING p.id, p.high_watermark - 1 AS marker_offset)"
            " INSERT INTO floe_txn_marker (partition_id, marker_offset, producer_id,"
            " producer_epoch, committed, first_offset, timestamp)"
            " SELECT m.id, m.marker_offset, %s, %s, %s, CASE WHEN %s THEN NULL ELSE w.first_offset"
            " END, %s FROM moved m JOIN written w ON w.partition_id = m.id",
            [txn_id, txn_id, current_epoch, committed, committed, int(time.time() * 1000)],
        )
        if committed:
            cursor.execute(
                "INSERT INTO floe_group_offset (cluster_id, group_id, partition_id,"
                " committed_offset, leader_epoch, metadata, committed_at)"
                " SELECT %s, group_id, partition_id, committed_offset, leader_epoch, metadata,"
                " now() FROM floe_txn_offset WHERE producer_id = %s"
                " ON CONFLICT (cluster_id, group_id, partition_id) DO UPDATE SET"
                " committed_offset = EXCLUDED.committed_offset,"
                " leader_epoch = EXCLUDED.leader_epoch, metadata = EXCLUDED.metadata,"
                " committed_at = EXCLUDED.committed_at, mirrored = false",
                [cluster_id, txn_id],
            )
        cursor.execute("DELETE FROM floe_txn_offset WHERE producer_id = %s", [txn_id])
        cursor.execute("DELETE FROM floe_txn_partition WHERE producer_id = %s", [txn_id])
        tail_feed.partitions_changed(cluster_id, parts)  # the markers, the LSO moving
        cursor.execute(
            "UPDATE floe_producer_id SET txn_state = %s, txn_started_at = NULL,"
            " epoch = CASE WHEN %s THEN epoch ELSE epoch + 1 END WHERE id = %s",
            [
                "complete_commit" if committed else "complete_abort",
                epoch is not None or current_epoch >= 32766,
                txn_id,
            ],
        )
    return 0, moved


def txn_abort_expired(*, cluster_id: int | None = None) -> int:
    """Abort every transaction open longer than its timeout (the producer is fenced);
    returns how many. Run by Celery beat (``virtualclusters.jobs.tasks``)."""
    with _cursor() as cursor:
        cursor.execute(
            "SELECT cluster_id, id FROM floe_producer_id WHERE txn_state = 'ongoing'"
            " AND txn_started_at + txn_timeout_ms * interval '1 millisecond' < now()"
            + (" AND cluster_id = %s" if cluster_id is not None else ""),
            [] if cluster_id is None else [cluster_id],
        )
        expired = cursor.fetchall()
    for cluster, txn_id in expired:
        _end(cluster, txn_id, None, committed=False)
    return len(expired)


def txn_markers_prune() -> int:
    """Delete markers below their partition's log start offset (retention or
    DeleteRecords moved past them: no fetch can reach them); returns how many."""
    with _cursor() as cursor:
        cursor.execute(
            "DELETE FROM floe_txn_marker m USING floe_partition p"
            " WHERE p.id = m.partition_id AND m.marker_offset < p.log_start_offset"
        )
        return cursor.rowcount


def _states(cursor: Cursor, cluster_id: int, where: str, params: list[Any]) -> list[JSON]:
    cursor.execute(
        "SELECT p.transactional_id, p.id, p.epoch, p.txn_state, p.txn_timeout_ms,"
        " coalesce((extract(epoch FROM p.txn_started_at) * 1000)::bigint, -1),"
        " coalesce(json_agg(json_build_array(t.name, x.index)) FILTER (WHERE x.index IS NOT NULL),"
        " '[]')"
        " FROM floe_producer_id p"
        " LEFT JOIN floe_txn_partition tp ON tp.producer_id = p.id"
        " LEFT JOIN floe_partition x ON x.id = tp.partition_id"
        " LEFT JOIN floe_topic t ON t.id = x.topic_id"
        " WHERE p.cluster_id = %s AND p.transactional_id IS NOT NULL" + where + " GROUP BY p.id",
        [cluster_id, *params],
    )
    return [
        {
            "transactional_id": tid,
            "producer_id": pid,
            "producer_epoch": epoch,
            "state": state,
            "timeout_ms": timeout,
            "start_time_ms": started,
            "partitions": parts if isinstance(parts, list) else json.loads(parts),
        }
        for tid, pid, epoch, state, timeout, started, parts in cursor.fetchall()
    ]


def txn_describe(*, cluster_id: int, transactional_ids: list[str]) -> list[JSON]:
    """DescribeTransactions: the state of each named transactional id that exists."""
    with _cursor() as cursor:
        return _states(cursor, cluster_id, " AND p.transactional_id = ANY(%s)", [transactional_ids])


def txn_list(*, cluster_id: int) -> list[JSON]:
    """ListTransactions: every transactional id of the cluster and its state."""
    with _cursor() as cursor:
        return _states(cursor, cluster_id, "", [])
