"""Compaction: many small level-0 files → a few large files, batches grouped by partition.

Ingestion files mix every partition an agent wrote in a few hundred milliseconds, so a
consumer of one partition reads a little of many files. Compaction rewrites the batches
the index points at into files of about ``target_bytes``, sorted by (topic, partition,
offset), each batch's baseOffset set to its assigned offset (in the bytes and in the
footer). Offsets never change: the control plane repoints the index rows at the new
files in one compare-and-swap (``virtualclusters.jobs.services.compaction_swap``).

Plan: ``bucket_url``, ``output_prefix`` (unique per attempt), ``target_bytes`` and
``batches``, index rows (partition runs) as `BATCH_COLUMNS`. Result: ``files`` written
({key, size, batch_count}) and ``batches``: [partition_id, last_offset, file_key,
position, length] — each run is moved whole.
"""

from __future__ import annotations

import math
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from jobs.cli import job_main
from jobs.segment_io import BatchRef, OutputFile, read_batches, run_at_offsets, store_for

# One row per index row (a partition run); `rewrite`: its file is level 0, so its
# batches still carry the producers' baseOffsets.
BATCH_COLUMNS = (
    "partition_id",
    "topic_id",
    "partition",
    "base_offset",
    "last_offset",
    "file_key",
    "position",
    "length",
    "rewrite",
)
BATCH_SCHEMA = (
    "partition_id long, topic_id string, partition int, base_offset long, last_offset long,"
    " file_key string, position long, length int, rewrite boolean"
)


def transform_output_layout(batches: DataFrame, *, target_bytes: int) -> DataFrame:
    """Give each batch the output file it goes to (`out_index`, from 0).

    Batches are laid end to end in (topic, partition, offset) order and cut into files of
    about `target_bytes`: a batch goes to the file where its first byte would fall.
    """
    if target_bytes <= 0:
        raise ValueError(f"target_bytes must be positive, got {target_bytes}")
    # One global order: these rows are pointers (tens of bytes each), never batch data.
    order = Window.orderBy("topic_id", "partition", "base_offset").rowsBetween(
        Window.unboundedPreceding, Window.currentRow
    )
    start = F.sum("length").over(order) - F.col("length")
    return batches.withColumn("out_index", F.floor(start / F.lit(target_bytes)).cast("int"))


def output_count(batches: Sequence[Sequence], *, target_bytes: int) -> int:
    """How many files `transform_output_layout` makes at most (its index is below this)."""
    total = sum(row[BATCH_COLUMNS.index("length")] for row in batches)
    return max(1, math.ceil(total / target_bytes))


def write_outputs(
    rows: Iterable[tuple[int, tuple]], *, bucket_url: str, output_prefix: str
) -> Iterator[tuple]:
    """Executor side: build and PUT the output files of this task's rows.

    Yields ("file", key, size, batch_count) per file and ("batch", partition_id,
    last_offset, key, position, length) per batch.
    """
    store = store_for(bucket_url)
    by_output: dict[int, list[tuple]] = defaultdict(list)
    for out_index, row in rows:
        by_output[out_index].append(row)
    for out_index, members in sorted(by_output.items()):
        members.sort(key=lambda r: (r[1], r[2], r[3]))  # topic, partition, base offset
        data = read_batches(store, [BatchRef(r[5], r[6], r[7]) for r in members])
        output = OutputFile(f"{output_prefix}{out_index:06d}.seg")
        placed = []
        for pid, topic_id, partition, base, last, key, position, length, rewrite in members:
            batches = run_at_offsets(
                data.pop(BatchRef(key, position, length)),
                base_offset=base,
                last_offset=last,
                rewrite=rewrite,
                where=f"{key}@{position}",
            )
            # The run stays one run: its batches go side by side into the output.
            entries = [
                output.append(
                    topic_id=topic_id, partition=partition, batch=b.data, base_offset=b.base_offset
                )
                for b in batches
            ]
            placed.append(
                (
                    "batch",
                    pid,
                    last,
                    output.key,
                    entries[0].position,
                    sum(e.length for e in entries),
                )
            )
        size = output.put(store)
        yield ("file", output.key, size, len(output.builder))
        yield from placed


def run(spark: SparkSession, plan: dict) -> dict:
    """Compact the plan's batches into new files; say where each batch now lives."""
    rows = [tuple(row) for row in plan["batches"]]
    if not rows:
        return {"files": [], "batches": []}
    target = int(plan["target_bytes"])
    outputs = output_count(rows, target_bytes=target)
    bucket_url, prefix = plan["bucket_url"], plan["output_prefix"]
    laid_out = transform_output_layout(
        spark.createDataFrame(rows, schema=BATCH_SCHEMA), target_bytes=target
    )
    written = (
        laid_out.rdd.map(lambda r: (r["out_index"], tuple(r[c] for c in BATCH_COLUMNS)))
        .partitionBy(outputs, lambda out_index: out_index % outputs)
        .mapPartitions(
            lambda part: write_outputs(part, bucket_url=bucket_url, output_prefix=prefix)
        )
        .collect()
    )
    return {
        "files": [
            {"key": key, "size": size, "batch_count": count}
            for kind, key, size, count in (r for r in written if r[0] == "file")
        ],
        "batches": [list(r[1:]) for r in written if r[0] == "batch"],
    }


def main(argv: Sequence[str] | None = None) -> int:
    return job_main(argv, name="compaction", run=run)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
