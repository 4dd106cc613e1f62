"""Table maintenance, the table append's last step for each table it appended to:
small data files compacted, snapshots older than the table's retention expired and the
files only they referenced deleted from the bucket.

Compaction: in each partition (of the partition spec) holding more than ``max_files``
data files smaller than ``target_bytes``, those files are cut into groups of about
``target_bytes`` (the driver plans from the manifests: file lists and stats only). One
Spark task per group reads its files through the table's schema (older files gain the
columns added since as nulls) and writes them again as one target-sized file into the
table's location with PyIceberg's writer, as the append's tasks do; only the new files'
descriptions come back. The driver commits them as one overwrite snapshot on the
snapshot it read (a concurrent append wins: the rewrite is dropped and its files
deleted, the next run tries again), so its memory does not grow with the table. The new
snapshot carries the same ``floe.last-offsets`` — compaction never moves where the
appends are. The replaced files stay in the bucket while an unexpired snapshot still
references them (time travel within the retention).

Expiry: every snapshot but the current one older than ``retention_ms`` (-1: never) is
removed through the catalog; then every manifest list, manifest and data file that the
removed snapshots referenced and the remaining ones do not is deleted.

Orphans: data files (``data/``) and manifests (``metadata/*.avro``) in the table's
location that no snapshot references and that are older than ``orphan_grace_s`` — what
an attempt wrote and never committed (a lost race whose cleanup failed, an agent killed
between its writes and its commit) — are deleted. The grace is the longest a job may run:
no live attempt can still commit them.
"""

from __future__ import annotations

import itertools
import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator

import pyarrow as pa
from pyarrow.fs import FileSelector, FileType
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io import load_file_io
from pyiceberg.io.pyarrow import ArrowScan, PyArrowFileIO, _dataframe_to_data_files
from pyiceberg.manifest import DataFile
from pyiceberg.serializers import ToOutputFile
from pyiceberg.table import FileScanTask, Table
from pyiceberg.table.metadata import TableMetadataUtil
from pyiceberg.table.snapshots import Snapshot
from pyspark.sql import SparkSession

LAST_OFFSETS = "floe.last-offsets"  # as jobs/table_append.py writes it
MAX_AGE_PROPERTY = "history.expire.max-snapshot-age-ms"  # Iceberg's own; longer only
SWEPT_AT = "floe.orphans-swept-at-ms"  # when `orphans_delete` last ran


def _write_metadata(table: Table) -> None:
    """The committed metadata file where the catalog points (it never opens the bucket)."""
    ToOutputFile.table_metadata(table.metadata, table.io.new_output(table.metadata_location))


def small_file_groups(table: Table, *, target_bytes: int, max_files: int) -> list[list]:
    """The current snapshot's small data files, per partition, where there are more
    than `max_files` of them."""
    groups: dict[tuple, list[FileScanTask]] = defaultdict(list)
    for task in table.scan().plan_files():
        data_file = task.file
        if data_file.file_size_in_bytes < target_bytes:
            groups[(data_file.spec_id, repr(data_file.partition))].append(task)
    return [tasks for tasks in groups.values() if len(tasks) > max_files]


def compaction_plan(table: Table, *, target_bytes: int, max_files: int) -> list[list]:
    """`small_file_groups` cut into runs of files adding up to about `target_bytes`, in
    the order the manifests list them: each run becomes one file (a last run of a single
    file joins the one before: rewriting one file alone gains nothing)."""
    plan: list[list[FileScanTask]] = []
    for tasks in small_file_groups(table, target_bytes=target_bytes, max_files=max_files):
        runs: list[list[FileScanTask]] = [[]]
        size = 0
        for task in tasks:
            if runs[-1] and size + task.file.file_size_in_bytes > target_bytes:
                runs.append([])
                size = 0
            runs[-1].append(task)
            size += task.file.file_size_in_bytes
        if len(runs) > 1 and len(runs[-1]) == 1:
            last = runs.pop()
            runs[-1] += last
        plan += runs
    return plan


def rewrite_files(
    runs: Iterable[list[tuple[DataFile, set[DataFile]]]],
    *,
    metadata_json: str,
    io_properties: dict[str, str],
) -> Iterator[DataFile]:
    """Executor side: each run's files (data file, its delete files) read through the
    table's schema and written again as target-sized Parquet files in the table's
    location; their descriptions. An unpartitioned table streams (a file's worth of
    batches in memory), a partitioned one reads the run (one partition's) whole."""
    metadata = TableMetadataUtil.parse_raw(metadata_json)
    io = load_file_io(io_properties, metadata.location)
    scan = ArrowScan(metadata, io, metadata.schema(), AlwaysTrue())
    for run in runs:
        tasks = [FileScanTask(data_file, delete_files=deletes) for data_file, deletes in run]
        rows: pa.Table | pa.RecordBatchReader
        if metadata.spec().is_unpartitioned():
            batches = scan.to_record_batches(tasks)
            first = next(batches, None)
            if first is None:
                continue
            rows = pa.RecordBatchReader.from_batches(
                first.schema, itertools.chain([first], batches)
            )
        else:
            rows = scan.to_table(tasks)
        yield from _dataframe_to_data_files(metadata, rows, io, uuid.uuid4(), itertools.count())


def _rewrite_on_executors(spark: SparkSession, table: Table, plan: list[list]) -> list[DataFile]:
    """`rewrite_files` over the plan, one Spark task per run."""
    runs = [[(task.file, task.delete_files) for task in run] for run in plan]
    metadata_json = table.metadata.model_dump_json()
    io_properties = dict(table.io.properties)
    return (
        spark.sparkContext.parallelize(runs, len(runs))
        .mapPartitions(
            lambda part: rewrite_files(
                part, metadata_json=metadata_json, io_properties=io_properties
            )
        )
        .collect()
    )


def compact(spark: SparkSession, table: Table, *, target_bytes: int, max_files: int) -> int:
    """Rewrite the partitions with too many small files on Spark's executors; the number
    of files replaced (0 when none needed it, or a concurrent commit won)."""
    snapshot = table.current_snapshot()
    if snapshot is None:
        return 0
    plan = compaction_plan(table, target_bytes=target_bytes, max_files=max_files)
    if not plan:
        return 0
    written = _rewrite_on_executors(spark, table, plan)
    offsets = snapshot.summary[LAST_OFFSETS] if snapshot.summary is not None else None
    summary = {LAST_OFFSETS: offsets} if offsets else {}
    replaced = [task.file for run in plan for task in run]
    try:
        with table.transaction() as transaction:
            with transaction.update_snapshot(snapshot_properties=summary).overwrite() as rewrite:
                for data_file in replaced:
                    rewrite.delete_data_file(data_file)
                for data_file in written:
                    rewrite.append_data_file(data_file)
    except CommitFailedException:
        for data_file in written:
            table.io.delete(data_file.file_path)
        return 0
    _write_metadata(table)
    return len(replaced)


def referenced_files(table: Table, snapshots: list[Snapshot]) -> set[str]:
    """Every manifest list, manifest and live data file of these snapshots."""
    paths: set[str] = set()
    seen_manifests: set[str] = set()
    for snapshot in snapshots:
        paths.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(table.io):
            paths.add(manifest.manifest_path)
            if manifest.manifest_path in seen_manifests:
                continue
            seen_manifests.add(manifest.manifest_path)
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                paths.add(entry.data_file.file_path)
    return paths


def retention_of(table: Table, topic_retention_ms: int) -> int:
    """The table's retention: its topic's, or longer if the table's own property says
    so (-1: forever)."""
    own = table.properties.get(MAX_AGE_PROPERTY)
    if own is None:
        return topic_retention_ms
    if int(own) < 0 or topic_retention_ms < 0:
        return -1
    return max(int(own), topic_retention_ms)


def expire(table: Table, *, retention_ms: int, now_ms: int) -> tuple[int, int]:
    """Expire the snapshots older than the retention (never the current one) and delete
    what only they referenced: (snapshots expired, files deleted)."""
    current = table.current_snapshot()
    if retention_ms < 0 or current is None:
        return 0, 0
    old = [
        s.snapshot_id
        for s in table.metadata.snapshots
        if s.timestamp_ms < now_ms - retention_ms and s.snapshot_id != current.snapshot_id
    ]
    if not old:
        return 0, 0
    before = referenced_files(table, table.metadata.snapshots)
    try:
        table.maintenance.expire_snapshots().by_ids(old).commit()
    except CommitFailedException:
        return 0, 0
    _write_metadata(table)
    gone = before - referenced_files(table, table.metadata.snapshots)
    for path in sorted(gone):
        table.io.delete(path)
    return len(old), len(gone)


def orphans_delete(table: Table, *, grace_s: float, now_ms: int) -> int:
    """Delete the table's data files and manifests no snapshot references, older than
    the grace; how many."""
    io = table.io
    if not isinstance(io, PyArrowFileIO):
        return 0
    scheme, netloc, root = PyArrowFileIO.parse_location(table.location())
    fs = io.fs_by_scheme(scheme, netloc)
    live = {
        PyArrowFileIO.parse_location(p)[2]
        for p in referenced_files(table, table.metadata.snapshots)
    }
    found = []
    for folder, suffix in (("data", ".parquet"), ("metadata", ".avro")):
        selector = FileSelector(
            f"{root.rstrip('/')}/{folder}", recursive=True, allow_not_found=True
        )
        found += [i for i in fs.get_file_info(selector) if i.path.endswith(suffix)]
    deleted = 0
    for info in found:
        if info.type != FileType.File or info.path in live or info.mtime is None:
            continue
        if now_ms - info.mtime.timestamp() * 1000 < grace_s * 1000:
            continue  # perhaps an attempt still running: it may yet commit it
        fs.delete_file(info.path)
        deleted += 1
    return deleted


def maintain(
    spark: SparkSession,
    table: Table,
    *,
    topic_retention_ms: int,
    now_ms: int,
    target_bytes: int,
    max_files: int,
    orphan_grace_s: float,
    sweep_s: float = 0,
) -> dict:
    """Compact, expire, delete orphans. Expiry and the orphan sweep read every
    snapshot's manifests: each waits until there is `sweep_s` of work (snapshots that
    much past the retention; that long since the last sweep, kept in the table's
    property `SWEPT_AT`)."""
    compacted = compact(spark, table, target_bytes=target_bytes, max_files=max_files)
    retention_ms = retention_of(table, topic_retention_ms)
    expired = deleted = orphans = 0
    oldest = min((s.timestamp_ms for s in table.metadata.snapshots), default=now_ms)
    if retention_ms >= 0 and oldest < now_ms - retention_ms - sweep_s * 1000:
        expired, deleted = expire(table, retention_ms=retention_ms, now_ms=now_ms)
    swept = int(table.properties.get(SWEPT_AT, "0"))
    if now_ms - swept >= sweep_s * 1000:
        orphans = orphans_delete(table, grace_s=orphan_grace_s, now_ms=now_ms)
        try:
            with table.transaction() as transaction:
                transaction.set_properties({SWEPT_AT: str(now_ms)})
        except CommitFailedException:
            pass  # another writer came first: the next run sweeps again
        else:
            _write_metadata(table)
    return {"compacted": compacted, "expired": expired, "deleted": deleted, "orphans": orphans}
