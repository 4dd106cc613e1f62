"""The jobs' pure transforms on tiny inline rows."""

from __future__ import annotations

from pyspark.testing import assertDataFrameEqual

from jobs.compaction import BATCH_SCHEMA, transform_output_layout
from jobs.key_compaction import RECORD_SCHEMA, transform_latest_per_key
from jobs.orphan_cleanup import OBJECT_SCHEMA, transform_orphans
from jobs.retention import FILE_SCHEMA, transform_past_grace

T1 = "00000000-0000-0000-0000-000000000001"
T2 = "00000000-0000-0000-0000-000000000002"


def test_output_layout_groups_partitions_in_offset_order_and_cuts_at_the_target(spark):
    batches = spark.createDataFrame(
        [
            # partition_id, topic, partition, base, last, file, position, length, rewrite
            (3, T2, 0, 0, 9, "f1", 0, 40, True),
            (1, T1, 0, 10, 19, "f2", 0, 40, True),
            (2, T1, 1, 0, 4, "f1", 40, 40, True),
            (1, T1, 0, 0, 9, "f1", 80, 40, True),
            (1, T1, 0, 20, 29, "f3", 0, 40, True),
        ],
        schema=BATCH_SCHEMA,
    )
    laid_out = transform_output_layout(batches, target_bytes=100)
    expected = spark.createDataFrame(
        [
            (1, T1, 0, 0, 9, "f1", 80, 40, True, 0),  # bytes 0..40
            (1, T1, 0, 10, 19, "f2", 0, 40, True, 0),  # 40..80
            (1, T1, 0, 20, 29, "f3", 0, 40, True, 0),  # starts at 80 < 100
            (2, T1, 1, 0, 4, "f1", 40, 40, True, 1),  # starts at 120
            (3, T2, 0, 0, 9, "f1", 0, 40, True, 1),  # starts at 160 < 200
        ],
        schema=BATCH_SCHEMA + ", out_index int",
    )
    assertDataFrameEqual(laid_out, expected)


def test_latest_per_key_keeps_the_last_value_and_drops_superseded_and_old_tombstones(spark):
    cutoff = 1_000
    records = spark.createDataFrame(
        [
            # partition_id, batch_last_offset, offset, key, tombstone, timestamp, cutoff,
            # aborted
            (1, 1, 0, b"a", False, 5_000, cutoff, False),  # superseded by offset 3
            (1, 1, 1, b"b", False, 5_000, cutoff, False),  # latest b
            (1, 3, 2, None, False, 5_000, cutoff, False),  # no key: kept
            (1, 3, 3, b"a", False, 5_000, cutoff, False),  # latest a
            (1, 5, 4, b"c", True, 500, cutoff, False),  # tombstone older than the cutoff
            (1, 5, 5, b"d", True, 2_000, cutoff, False),  # recent tombstone: kept
            (1, 7, 6, b"e", False, 5_000, cutoff, False),  # superseded by the old tombstone
            (1, 7, 7, b"e", True, 500, cutoff, False),  # old tombstone, but the last
            (2, 0, 0, b"a", False, 5_000, cutoff, False),  # another partition: its own keys
        ],
        schema=RECORD_SCHEMA,
    )
    kept = transform_latest_per_key(records)
    expected = spark.createDataFrame(
        [(1, 1, 1), (1, 3, 2), (1, 3, 3), (1, 5, 5), (1, 7, 7), (2, 0, 0)],
        schema="partition_id long, batch_last_offset long, offset long",
    )
    assertDataFrameEqual(kept, expected)


def test_latest_per_key_drops_aborted_records_which_supersede_nothing(spark):
    cutoff = 1_000
    records = spark.createDataFrame(
        [
            (1, 0, 0, b"k", False, 5_000, cutoff, False),  # committed: still k's latest
            (1, 1, 1, b"k", False, 5_000, cutoff, True),  # aborted: dropped
            (1, 1, 2, None, False, 5_000, cutoff, True),  # aborted, no key: dropped too
            (1, 3, 3, b"z", False, 5_000, cutoff, False),
            (2, 0, 0, b"x", False, 5_000, cutoff, True),  # aborted but the partition's last
        ],
        schema=RECORD_SCHEMA,
    )
    expected = spark.createDataFrame(
        [(1, 0, 0), (1, 3, 3), (2, 0, 0)],
        schema="partition_id long, batch_last_offset long, offset long",
    )
    assertDataFrameEqual(transform_latest_per_key(records), expected)


def test_past_grace_selects_only_files_unreferenced_long_enough(spark):
    files = spark.createDataFrame(
        [(1, "a.seg", 10_000), (2, "b.seg", 40_000), (3, "c.seg", None), (None, "d.seg", 39_999)],
        schema=FILE_SCHEMA,
    )
    due = transform_past_grace(files, now_ms=100_000, grace_ms=60_000)
    expected = spark.createDataFrame(
        [(1, "a.seg", 10_000), (2, "b.seg", 40_000), (None, "d.seg", 39_999)], schema=FILE_SCHEMA
    )
    assertDataFrameEqual(due, expected)


def test_orphans_are_old_unknown_segments_outside_running_jobs(spark):
    objects = spark.createDataFrame(
        [
            ("vci_a/segments/known.seg", 10, 1_000),
            ("vci_a/segments/orphan.seg", 20, 1_000),
            ("vci_a/segments/fresh.seg", 30, 9_000),
            ("vci_a/compacted/job_x/1/000000.seg", 40, 1_000),
            ("vci_a/compacted/job_y/1/000000.seg", 50, 1_000),
            ("vci_a/notes.txt", 60, 1_000),
        ],
        schema=OBJECT_SCHEMA,
    )
    known = spark.createDataFrame([("vci_a/segments/known.seg",)], schema="key string")
    orphans = transform_orphans(
        objects, known, cutoff_ms=5_000, protected_prefixes=["vci_a/compacted/job_x/"]
    )
    expected = spark.createDataFrame(
        [
            ("vci_a/segments/orphan.seg", 20, 1_000),
            ("vci_a/compacted/job_y/1/000000.seg", 50, 1_000),
        ],
        schema=OBJECT_SCHEMA,
    )
    assertDataFrameEqual(orphans, expected)
