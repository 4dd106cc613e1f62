"""Retention over the index: where the topics' retention starts each log, moving log
start offsets, and dropping the index rows below them (the jobs app decides when; the
retention job deletes the objects)."""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction

from metadata_store import tail_feed
from metadata_store.rewrites import files_release


def retention_starts(
    limits: dict[str, tuple[int | None, int | None]],
) -> list[tuple[Any, ...]]:
    """For every partition of the topics in `limits` ({topic id: (cutoff timestamp or
    None, max bytes or None)}): (partition id, log start offset, high watermark, start by
    time or None, start by size or None).

    Time: the first batch (from the log start) whose max timestamp is at or after the
    cutoff; none → the high watermark. Size: the newest batches whose lengths add up to
    at most max bytes stay, and always the newest one.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT p.id, p.log_start_offset, p.high_watermark,"
            " CASE WHEN u.cutoff IS NULL THEN NULL ELSE coalesce("
            "  (SELECT b.base_offset FROM floe_batch b WHERE b.partition_id = p.id"
            "    AND b.last_offset >= p.log_start_offset AND b.max_timestamp >= u.cutoff"
            "    ORDER BY b.last_offset LIMIT 1), p.high_watermark) END,"
            " CASE WHEN u.max_bytes IS NULL THEN NULL ELSE coalesce("
            "  (SELECT min(x.base_offset) FROM (SELECT b.base_offset,"
            "     sum(b.length) OVER (ORDER BY b.last_offset DESC) AS suffix"
            "     FROM floe_batch b WHERE b.partition_id = p.id"
            "     AND b.last_offset >= p.log_start_offset) x WHERE x.suffix <= u.max_bytes),"
            "  (SELECT b.base_offset FROM floe_batch b WHERE b.partition_id = p.id"
            "    ORDER BY b.last_offset DESC LIMIT 1)) END"
            " FROM unnest(%s::uuid[], %s::bigint[], %s::bigint[]) AS u(topic_id, cutoff, max_bytes)"
            " JOIN floe_partition p ON p.topic_id = u.topic_id",
            [
                list(limits),
                [cutoff for cutoff, _ in limits.values()],
                [max_bytes for _, max_bytes in limits.values()],
            ],
        )
        rows: list[tuple[Any, ...]] = cursor.fetchall()
        return rows


def has_batches_below_log_start(*, cluster_id: int) -> bool:
    """Whether some index rows of the cluster lie wholly below their partition's log
    start offset."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM floe_partition p JOIN floe_topic t ON t.id = p.topic_id"
            " WHERE t.cluster_id = %s AND EXISTS (SELECT 1 FROM floe_batch b"
            "  WHERE b.partition_id = p.id AND b.last_offset < p.log_start_offset))",
            [cluster_id],
        )
        return bool(cursor.fetchone()[0])


@transaction.atomic
def log_start_offsets_advance(*, moves: dict[int, int]) -> None:
    """Raise log start offsets (never lower them, never past the high watermark); a
    mirrored partition's is left as it is (it follows its source's: ``mirroring``)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id FROM floe_partition WHERE id = ANY(%s) ORDER BY id FOR UPDATE",
            [sorted(moves)],
        )
        cursor.execute(
            "UPDATE floe_partition p"
            " SET log_start_offset = greatest(p.log_start_offset, least(u.start, p.high_watermark))"
            " FROM unnest(%s::bigint[], %s::bigint[]) AS u(id, start)"
            " WHERE p.id = u.id AND NOT p.mirrored",
            [list(moves), list(moves.values())],
        )
    tail_feed.partitions_changed(None, moves)


@transaction.atomic
def batches_below_log_start_delete(*, cluster_id: int) -> tuple[int, int]:
    """Drop index rows wholly below their partition's log start offset (retention,
    DeleteRecords); (rows deleted, files released)."""
    below = (
        " FROM floe_partition p JOIN floe_topic t ON t.id = p.topic_id"
        " CROSS JOIN LATERAL (SELECT file_id FROM floe_batch"
        "  WHERE partition_id = p.id AND last_offset < p.log_start_offset) b"
        " WHERE t.cluster_id = %s"
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT DISTINCT b.file_id" + below, [cluster_id])
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
            [cluster_id],
        )
        deleted = cursor.rowcount
    return deleted, files_release(file_ids)
