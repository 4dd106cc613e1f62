"""Table compaction on Spark's executors (`jobs/table_maintenance.compact`): the driver
plans runs of small files from the manifests, Spark tasks rewrite each run as one file
in the table's location, the driver commits one overwrite. Every row read back through
PyIceberg is the same before and after, older files gain the columns added since as
nulls, a partitioned table is rewritten partition by partition, and a concurrent append
wins (the rewrite's files leave the bucket). Tables live in a file:// warehouse behind
a catalog in a JSON file (`tests/jobs/local_catalog.py`)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pyarrow as pa
import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import StringType

from jobs.table_maintenance import LAST_OFFSETS, compact, compaction_plan
from tests.jobs.local_catalog import FileCatalog
from virtualclusters.tables.topic_tables import RAW_SCHEMA, TABLE_PROPERTIES

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

START = datetime(2026, 11, 1, tzinfo=UTC)


def rows_of(table, first: int, count: int, *, partition: int = 0, note: bool = False) -> pa.Table:
    """`count` records of `partition` from offset `first`."""
    offsets = range(first, first + count)
    columns = {
        "partition": pa.array([partition] * count, pa.int32()),
        "offset": pa.array(offsets, pa.int64()),
        "timestamp": pa.array(
            [START + timedelta(seconds=o) for o in offsets], pa.timestamp("us", "UTC")
        ),
        "key": pa.array([f"k{o}".encode() for o in offsets], pa.binary()),
        "value": pa.array([f"value {o} ".encode() * 20 for o in offsets], pa.binary()),
        "headers": pa.array([[{"key": "h", "value": b"1"}]] * count),
    }
    if note:
        columns["note"] = pa.array([f"n{o}" for o in offsets], pa.string())
    schema = table.schema().as_arrow()
    return pa.Table.from_pydict(columns, schema=schema)


def append(table, rows: pa.Table) -> None:
    last = max(rows.column("offset").to_pylist())
    partition = rows.column("partition")[0].as_py()
    table.append(rows, snapshot_properties={LAST_OFFSETS: json.dumps({str(partition): last})})


def read_back(table) -> list[tuple]:
    found = table.scan().to_arrow().to_pylist()
    return sorted((r["partition"], r["offset"], r["key"], r["value"], r.get("note")) for r in found)


def parquet_on_disk(table) -> set[str]:
    root = Path(unquote(urlsplit(table.location()).path))
    return {str(p) for p in root.rglob("*.parquet")}


def live_files(table) -> set[str]:
    return {unquote(urlsplit(t.file.file_path).path) for t in table.scan().plan_files()}


class TopicTables(FileCatalog):
    """Tables made as the control plane makes topic tables (no PyIceberg commit retry)."""

    def create_table(self, identifier, schema, **kwargs):
        return super().create_table(identifier, schema, properties=TABLE_PROPERTIES, **kwargs)


@pytest.fixture
def catalog(tmp_path):
    return TopicTables(tmp_path / "warehouse")


def test_small_files_are_rewritten_on_executors_and_every_row_stays(spark, catalog):
    table = catalog.create_table(("topics", "clicks"), schema=RAW_SCHEMA)
    for n in range(6):
        append(table, rows_of(table, n * 50, 50))
    with table.update_schema() as update:  # files from here on hold a column more
        update.add_column("note", StringType())
    for n in range(6, 12):
        append(table, rows_of(table, n * 50, 50, note=True))
    table = catalog.load_table(("topics", "clicks"))
    before = read_back(table)
    assert len(before) == 600 and sum(1 for r in before if r[4] is None) == 300
    sizes = [t.file.file_size_in_bytes for t in table.scan().plan_files()]
    assert len(sizes) == 12
    target = int(max(sizes) * 4.5)  # runs of four files each

    plan = compaction_plan(table, target_bytes=target, max_files=3)
    assert [len(run) for run in plan] == [4, 4, 4]
    # Every file in one run; a last run of one file joins the run before it.
    paths = sorted(t.file.file_path for t in table.scan().plan_files())
    for cut in (2, 5, 11):
        plan = compaction_plan(table, target_bytes=sum(sizes[:cut]) + 1, max_files=3)
        assert sorted(t.file.file_path for run in plan for t in run) == paths
        assert min(len(run) for run in plan) > 1
    assert [
        len(run) for run in compaction_plan(table, target_bytes=sum(sizes[:11]) + 1, max_files=3)
    ] == [12]
    assert compact(spark, table, target_bytes=target, max_files=3) == 12

    table = catalog.load_table(("topics", "clicks"))
    assert len(list(table.scan().plan_files())) == 3
    assert read_back(table) == before
    snapshot = table.current_snapshot()
    assert snapshot.summary.operation.value == "overwrite"
    assert json.loads(snapshot.summary[LAST_OFFSETS]) == {"0": 599}
    assert int(snapshot.summary["total-records"]) == 600
    # The replaced files stay for time travel; the previous snapshot still reads them.
    assert len(parquet_on_disk(table)) == 12 + 3
    assert compact(spark, table, target_bytes=target, max_files=3) == 0  # nothing left


def test_a_partitioned_table_is_rewritten_partition_by_partition(spark, catalog):
    # By Kafka partition (identity): a day or hour transform needs pyiceberg-core to write.
    spec = PartitionSpec(
        PartitionField(source_id=1, field_id=1000, transform=IdentityTransform(), name="p")
    )
    table = catalog.create_table(("topics", "split"), schema=RAW_SCHEMA, partition_spec=spec)
    for n in range(10):
        append(table, rows_of(table, n * 20, 20, partition=n % 2))
    table = catalog.load_table(("topics", "split"))
    before = read_back(table)

    assert compact(spark, table, target_bytes=10 * 1024 * 1024, max_files=3) == 10

    table = catalog.load_table(("topics", "split"))
    files = [t.file for t in table.scan().plan_files()]
    assert sorted(f.partition[0] for f in files) == [0, 1]  # one file a partition
    assert sorted(f.record_count for f in files) == [100, 100]
    assert read_back(table) == before


def test_a_concurrent_append_wins_and_the_rewrite_leaves_no_file(spark, catalog):
    table = catalog.create_table(("topics", "raced"), schema=RAW_SCHEMA)
    for n in range(5):
        append(table, rows_of(table, n * 10, 10))
    stale = catalog.load_table(("topics", "raced"))
    append(catalog.load_table(("topics", "raced")), rows_of(table, 50, 10))  # comes first

    assert compact(spark, stale, target_bytes=10 * 1024 * 1024, max_files=3) == 0

    table = catalog.load_table(("topics", "raced"))
    assert len(read_back(table)) == 60
    assert parquet_on_disk(table) == live_files(table)  # the rewrite's files are gone
    assert compact(spark, table, target_bytes=10 * 1024 * 1024, max_files=3) == 6
    assert len(read_back(catalog.load_table(("topics", "raced")))) == 60
