"""Orphan cleanup: find objects in a cluster's prefix that no file row knows.

An agent that dies between its PUT and its commit leaves a segment nobody will ever
reference. This job lists the cluster's prefix, keeps the ``.seg`` objects that are not
known files (`transform_orphans`) and are older than the cutoff, and returns them; the
control plane checks them against the database once more and hands the survivors to
the retention job to delete (so the grace period is checked at the last step too).

Plan: ``bucket_url``, ``prefix`` (``vci_…/``), ``cutoff_ms``, ``known_keys`` (files the
metadata store has, live or awaiting deletion) and ``protected_prefixes`` (outputs of
jobs still running). Result: ``listed`` objects and bytes, ``orphans``: [key, size,
last_modified_ms].
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs.cli import job_main
from jobs.segment_io import store_for

OBJECT_SCHEMA = "key string, size long, last_modified_ms long"
SEGMENT_SUFFIX = ".seg"


def transform_orphans(
    objects: DataFrame, known: DataFrame, *, cutoff_ms: int, protected_prefixes: Sequence[str]
) -> DataFrame:
    """Segment objects older than `cutoff_ms`, not in `known` (a `key` column) and not
    under any of `protected_prefixes`."""
    candidates = objects.where(
        F.col("key").endswith(SEGMENT_SUFFIX) & (F.col("last_modified_ms") < F.lit(cutoff_ms))
    )
    for prefix in protected_prefixes:
        candidates = candidates.where(~F.col("key").startswith(prefix))
    return candidates.join(known, on="key", how="left_anti")


def list_objects(prefixes: Iterable[str], *, bucket_url: str) -> Iterator[tuple]:
    """Executor side: (key, size, last_modified_ms) of every object under each prefix."""
    store = store_for(bucket_url)
    for prefix in prefixes:
        for info in store.list(prefix):
            yield (info.key, info.size, int(info.last_modified.timestamp() * 1000))


def run(spark: SparkSession, plan: dict) -> dict:
    bucket_url, prefix = plan["bucket_url"], plan["prefix"]
    if not prefix.endswith("/"):
        raise ValueError(f"prefix must end with '/', got {prefix!r}")
    listing = spark.sparkContext.parallelize([prefix], 1).mapPartitions(
        lambda part: list_objects(part, bucket_url=bucket_url)
    )
    objects = spark.createDataFrame(listing, schema=OBJECT_SCHEMA).cache()
    try:
        known = spark.createDataFrame([(k,) for k in plan["known_keys"]], schema="key string")
        orphans = transform_orphans(
            objects,
            known,
            cutoff_ms=int(plan["cutoff_ms"]),
            protected_prefixes=plan.get("protected_prefixes", []),
        ).collect()
        listed = objects.agg(F.count("*"), F.coalesce(F.sum("size"), F.lit(0))).first()
        assert listed is not None  # an aggregate without grouping has one row
    finally:
        objects.unpersist()
    return {
        "listed": listed[0],
        "listed_bytes": listed[1],
        "orphans": [[row["key"], row["size"], row["last_modified_ms"]] for row in orphans],
    }


def main(argv: Sequence[str] | None = None) -> int:
    return job_main(argv, name="orphan_cleanup", run=run)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
