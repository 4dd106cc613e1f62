"""Key compaction of ``cleanup.policy=compact`` topics: the latest record per key survives.

Two passes over a partition's batches, as Kafka's log cleaner does:

1. decode every record into (partition, batch, offset, key, tombstone?, timestamp) rows,
   and keep (`transform_latest_per_key`) the last record of each key, dropping
   tombstones older than ``delete.retention.ms``;
2. rewrite only the index rows (partition runs) that lost records: the kept records
   keep their ORIGINAL offsets (offset deltas with gaps) and each batch keeps its
   baseOffset and lastOffsetDelta (Kafka's cleaner does the same), so the index row
   keeps its (base_offset, last_offset) and only its file, position, length, record and
   batch counts and max timestamp change. A batch left with no records is dropped from
   its run; a run left with no batch leaves the index.

Transactions (KIP-98): records of aborted transactions (``aborted``: [partition id,
producer id, first offset, abort marker offset]) are dropped and never count as a key's
latest value; control records (markers) are not in files at all. The plan stops at the
last stable offset, so open transactions are never cleaned.

Record keys travel between executors (the shuffle of pass 1) and never reach the
driver: it collects only offsets and pointers.

Plan: as compaction's, with rows of `KEY_BATCH_COLUMNS`. Result: ``files`` and
``batches``: [partition_id, last_offset, file_key or None (dropped), position, length,
record_count, max_timestamp, batch_count] for every rewritten or dropped row.
"""

from __future__ import annotations

import math
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from core.kafka.records import RecordInput, decode_records, encode_batch
from jobs.cli import job_main
from jobs.compaction import BATCH_COLUMNS, output_count, transform_output_layout
from jobs.segment_io import BatchRef, OutputFile, read_batches, run_at_offsets, store_for

KEY_BATCH_COLUMNS = (*BATCH_COLUMNS, "record_count", "tombstone_cutoff_ms")
KEY_BATCH_SCHEMA = (
    "partition_id long, topic_id string, partition int, base_offset long, last_offset long,"
    " file_key string, position long, length int, rewrite boolean, record_count int,"
    " tombstone_cutoff_ms long"
)
RECORD_SCHEMA = (
    "partition_id long, batch_last_offset long, offset long, key binary, tombstone boolean,"
    " timestamp long, tombstone_cutoff_ms long, aborted boolean"
)
READ_TASK_BYTES = 64 * 1024 * 1024  # pass 1 reads about this much per task


def transform_latest_per_key(records: DataFrame) -> DataFrame:
    """The records to keep: (partition_id, batch_last_offset, offset).

    Kept: the last record of each key; records without a key (nothing supersedes them);
    and the partition's last record whatever it is, so the batch holding the partition's
    last offset survives and consumers can always read up to the high watermark. Dropped:
    superseded records, tombstones older than their ``tombstone_cutoff_ms``, and records
    of aborted transactions, which supersede nothing.
    """
    expired_tombstone = F.col("tombstone") & (F.col("timestamp") < F.col("tombstone_cutoff_ms"))
    keep = (F.col("offset") == F.col("tail")) | (
        ~F.col("aborted")
        & (F.col("key").isNull() | ((F.col("offset") == F.col("latest")) & ~expired_tombstone))
    )
    latest_key = F.when(F.col("aborted"), F.lit(None)).otherwise(F.col("key"))
    return (
        records.withColumn(
            "latest",
            F.max(F.when(~F.col("aborted"), F.col("offset"))).over(
                Window.partitionBy("partition_id", latest_key)
            ),
        )
        .withColumn("tail", F.max("offset").over(Window.partitionBy("partition_id")))
        .where(keep)
        .select("partition_id", "batch_last_offset", "offset")
    )


def _decoded(store, rows: list[tuple]):
    """(row, [(stored batch, records)]) of each row (a partition run), read with
    coalesced requests per file."""
    data = read_batches(store, [BatchRef(r[5], r[6], r[7]) for r in rows])
    for row in rows:
        _, _, _, base, last, key, position, length, rewrite = row[:9]
        batches = run_at_offsets(
            data.pop(BatchRef(key, position, length)),
            base_offset=base,
            last_offset=last,
            rewrite=rewrite,
            where=f"{key}@{position}",
        )
        yield row, [(b, decode_records(b.data)[1]) for b in batches]


def _aborted_check(aborted: Iterable[Sequence[int]]):
    """`is_aborted(partition id, producer id, offset)` over the plan's aborted ranges."""
    ranges: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for pid, producer_id, first, marker in aborted:
        ranges[(pid, producer_id)].append((first, marker))

    def is_aborted(pid: int, producer_id: int, offset: int) -> bool:
        return any(first <= offset < marker for first, marker in ranges.get((pid, producer_id), ()))

    return is_aborted


def record_rows(
    rows: Iterable[tuple], *, bucket_url: str, aborted: Iterable[Sequence[int]] = ()
) -> Iterator[tuple]:
    """Executor side of pass 1: one `RECORD_SCHEMA` row per record of each batch."""
    is_aborted = _aborted_check(aborted)
    store = store_for(bucket_url)
    by_file: dict[str, list[tuple]] = defaultdict(list)
    for row in rows:
        by_file[row[5]].append(row)
    for members in by_file.values():
        for row, batches in _decoded(store, members):
            pid, last, cutoff = row[0], row[4], row[10]
            for stored, records in batches:
                header = stored.header
                transactional = header.is_transactional and not header.is_control
                for record in records:
                    # Control records (transaction markers) are never compacted away.
                    key = None if header.is_control else record.key
                    tombstone = record.value is None and not header.is_control
                    dropped = transactional and is_aborted(pid, header.producer_id, record.offset)
                    yield (
                        pid,
                        last,
                        record.offset,
                        key,
                        tombstone,
                        record.timestamp,
                        cutoff,
                        dropped,
                    )


def rewrite_outputs(
    rows: Iterable[tuple[int, tuple]], *, bucket_url: str, output_prefix: str
) -> Iterator[tuple]:
    """Executor side of pass 2: rewrite each batch with only its kept records.

    Yields ("file", key, size, batch_count) and ("batch", partition_id, last_offset,
    key or None, position, length, record_count, max_timestamp, batch_count).
    """
    store = store_for(bucket_url)
    by_output: dict[int, list[tuple]] = defaultdict(list)
    for out_index, row in rows:
        by_output[out_index].append(row)
    for out_index, members in sorted(by_output.items()):
        members.sort(key=lambda r: (r[1], r[2], r[3]))
        kept = {(m[0], m[4]): set(m[-1]) for m in members}
        output = OutputFile(f"{output_prefix}{out_index:06d}.seg")
        placed: list[tuple[str, int, int, str | None, int, int, int, int, int]] = []
        for row, batches in _decoded(store, [m[:-1] for m in members]):
            pid, topic_id, partition, base, last = row[:5]
            entries = []
            for stored, records in batches:
                survivors = [r for r in records if r.offset in kept[(pid, last)]]
                if not survivors:
                    continue  # the whole batch goes; the run keeps its other batches
                header, batch_base = stored.header, stored.base_offset
                batch = encode_batch(
                    [
                        RecordInput(r.offset - batch_base, r.timestamp, r.key, r.value, r.headers)
                        for r in survivors
                    ],
                    base_offset=batch_base,
                    compression=header.compression,
                    producer_id=header.producer_id,
                    producer_epoch=header.producer_epoch,
                    base_sequence=header.base_sequence,
                    is_transactional=header.is_transactional,
                    partition_leader_epoch=header.partition_leader_epoch,
                    timestamp_type=header.timestamp_type,
                    last_offset_delta=header.last_offset_delta,
                )
                entries.append(
                    output.append(
                        topic_id=topic_id, partition=partition, batch=batch, base_offset=batch_base
                    )
                )
            if not entries:
                placed.append(("batch", pid, last, None, -1, 0, 0, -1, 0))
                continue
            placed.append(
                (
                    "batch",
                    pid,
                    last,
                    output.key,
                    entries[0].position,
                    sum(e.length for e in entries),
                    sum(e.record_count for e in entries),
                    max(e.max_timestamp for e in entries),
                    len(entries),
                )
            )
        if len(output.builder):
            yield ("file", output.key, output.put(store), len(output.builder))
        yield from placed


def run(spark: SparkSession, plan: dict) -> dict:
    """Compact the plan's partitions by key; say which batches changed and where they went."""
    rows = [tuple(row) for row in plan["batches"]]
    if not rows:
        return {"files": [], "batches": []}
    bucket_url, prefix = plan["bucket_url"], plan["output_prefix"]
    aborted = [tuple(a) for a in plan.get("aborted", [])]
    target = int(plan["target_bytes"])
    batches = spark.createDataFrame(rows, schema=KEY_BATCH_SCHEMA)

    reads = max(1, math.ceil(sum(r[7] for r in rows) / READ_TASK_BYTES))
    records = spark.createDataFrame(
        batches.repartition(reads, "file_key").rdd.mapPartitions(
            lambda part: record_rows(part, bucket_url=bucket_url, aborted=aborted)
        ),
        schema=RECORD_SCHEMA,
    )
    kept = (
        transform_latest_per_key(records)
        .groupBy("partition_id", "batch_last_offset")
        .agg(F.collect_list("offset").alias("kept"))
    )
    shrunk = (
        batches.join(
            kept,
            (batches.partition_id == kept.partition_id)
            & (batches.last_offset == kept.batch_last_offset),
            "left",
        )
        .select(batches["*"], F.coalesce(kept.kept, F.array().cast("array<long>")).alias("kept"))
        .where(F.size("kept") < F.col("record_count"))
    )
    outputs = output_count(rows, target_bytes=target)
    columns = [*KEY_BATCH_COLUMNS[:9], "kept"]
    written = (
        transform_output_layout(shrunk, target_bytes=target)
        .rdd.map(lambda r: (r["out_index"], tuple(r[c] for c in columns)))
        .partitionBy(outputs, lambda out_index: out_index % outputs)
        .mapPartitions(
            lambda part: rewrite_outputs(part, bucket_url=bucket_url, output_prefix=prefix)
        )
        .collect()
    )
    return {
        "files": [
            {"key": r[1], "size": r[2], "batch_count": r[3]} for r in written if r[0] == "file"
        ],
        "batches": [list(r[1:]) for r in written if r[0] == "batch"],
    }


def main(argv: Sequence[str] | None = None) -> int:
    return job_main(argv, name="key_compaction", run=run)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
