"""Retention's bucket half: delete files nothing has referenced for the grace period.

Moving a partition's log start offset is a metadata change in PostgreSQL (the index
lives there; ``virtualclusters.jobs.services.retention_apply``). What is left for the bucket is deleting
the files that no index row points at any more — expired, compacted away, or orphaned —
once the grace period has passed since they became unreferenced (readers may still hold
pointers from a fetch plan; invariant 6). The control plane selects them; this job
checks the grace again (`transform_past_grace`) and deletes in parallel.

Plan: ``bucket_url``, ``now_ms``, ``grace_ms`` and ``files``: [file_id or None, key,
unreferenced_at_ms]. Result: ``deleted``: [file_id or None, key].
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Iterator, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.cli import job_main
from jobs.segment_io import store_for

FILE_SCHEMA = "file_id long, key string, unreferenced_at_ms long"
DELETES_PER_TASK = 5000


def transform_past_grace(files: DataFrame, *, now_ms: int, grace_ms: int) -> DataFrame:
    """The files unreferenced since at least `grace_ms` before `now_ms`."""
    return files.where(
        F.col("unreferenced_at_ms").isNotNull()
        & (F.col("unreferenced_at_ms") <= F.lit(now_ms - grace_ms))
    )


def delete_objects(rows: Iterable, *, bucket_url: str) -> Iterator[tuple]:
    """Executor side: delete this task's objects; yields (file_id, key) of each."""
    rows = [(row[0], row[1]) for row in rows]
    if rows:
        store_for(bucket_url).delete_many(key for _, key in rows)
    yield from rows


def run(spark: SparkSession, plan: dict) -> dict:
    rows = [tuple(row) for row in plan["files"]]
    if not rows:
        return {"deleted": []}
    bucket_url = plan["bucket_url"]
    due = transform_past_grace(
        spark.createDataFrame(rows, schema=FILE_SCHEMA),
        now_ms=int(plan["now_ms"]),
        grace_ms=int(plan["grace_ms"]),
    )
    deleted = (
        due.repartition(max(1, math.ceil(len(rows) / DELETES_PER_TASK)))
        .rdd.mapPartitions(lambda part: delete_objects(part, bucket_url=bucket_url))
        .collect()
    )
    return {"deleted": [list(row) for row in deleted]}


def main(argv: Sequence[str] | None = None) -> int:
    return job_main(argv, name="retention", run=run)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
