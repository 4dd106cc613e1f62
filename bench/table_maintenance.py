"""Table maintenance throughput: a table's small files compacted on Spark's executors.

For each size in ``--sizes-mib`` (default 256 and 1024) builds a raw topic table
(``RAW_SCHEMA``: 1 KiB random values, one Kafka partition, offsets in order) of that many
MiB in small files (``--files-per-gib``, default 1,000: about 1 MiB each), written by two
worker processes with PyArrow through PyIceberg's writer into a ``file://`` warehouse
under /tmp and committed as one append through a catalog in a JSON file
(``tests/jobs/local_catalog.py``, which like Floe's never writes the metadata file).
Then times ``jobs.table_maintenance.compact`` on ``--master`` (default ``local[2]``;
``local-cluster[1,2,2048]`` is a standalone master and one 2-core worker inside the
driver's JVM, executors in their own JVM; or ``spark://…``) with ``--target-bytes``
(128 MiB) and ``--max-files`` (10), after a warm-up compaction of a 16 MiB table (a
long-running jobs agent paid Spark's start-up long ago). Checks every (partition,
offset) is read back once. ``--on-driver`` runs the compaction as it was before it moved
to the executors (the driver reads every small file into one Arrow table), to compare.

The driver's memory is its resident set (VmRSS from /proc) sampled every 20 ms during
the compaction: this Python process and the JVM it started (``driver_jvm``; on
``local[N]`` that JVM also runs the executors' JVM side, the Python workers that read
and write are its children, counted under ``executors``: every other descendant
process). The baseline is the RSS right before. Prints one JSON object.

    .venv/bin/python bench/table_maintenance.py [--sizes-mib 256 1024] [--master local[2]]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

MIB = 1024 * 1024
ROOT = Path(__file__).resolve().parent.parent


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes-mib", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--files-per-gib", type=int, default=1000)
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--target-bytes", type=int, default=128 * MIB)
    parser.add_argument("--max-files", type=int, default=10)
    parser.add_argument(
        "--on-driver", action="store_true", help="the rewrite as it was: on the driver"
    )
    parser.add_argument("--keep", action="store_true", help="keep the warehouse folder")
    return parser.parse_args()


def django_setup() -> None:
    """`RAW_SCHEMA` lives with the topic tables' models: settings that open nothing."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    os.environ.setdefault("DATABASE_URL", "postgres://bench@127.0.0.1:1/unused")
    os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:1/0")
    os.environ.setdefault("SECRET_KEY", "bench-table-maintenance-" + "x" * 40)
    import django

    django.setup()


def write_files(metadata_json: str, first_file: int, files: int, rows: int, value_bytes: int):
    """Worker process: `files` data files of `rows` records each (offsets from
    `first_file` * `rows`), as PyIceberg's writer writes them; their descriptions."""
    import itertools
    import uuid
    from datetime import UTC, datetime

    import pyarrow as pa
    from pyiceberg.io import load_file_io
    from pyiceberg.io.pyarrow import _dataframe_to_data_files, schema_to_pyarrow
    from pyiceberg.table.metadata import TableMetadataUtil

    metadata = TableMetadataUtil.parse_raw(metadata_json)
    io = load_file_io({}, metadata.location)
    schema = schema_to_pyarrow(metadata.schema())
    start = int(datetime(2026, 11, 1, tzinfo=UTC).timestamp() * 1_000_000)
    written = []
    for n in range(first_file, first_file + files):
        offsets = pa.array(range(n * rows, (n + 1) * rows), pa.int64())
        blob = os.urandom(rows * value_bytes)  # incompressible, as encrypted or packed data
        ends = pa.array(range(0, (rows + 1) * value_bytes, value_bytes), pa.int32())
        values = pa.Array.from_buffers(
            pa.binary(), rows, [None, ends.buffers()[1], pa.py_buffer(blob)]
        )
        arrow = pa.Table.from_pydict(
            {
                "partition": pa.array([0] * rows, pa.int32()),
                "offset": offsets,
                "timestamp": pa.array(
                    [start + o * 1000 for o in range(n * rows, (n + 1) * rows)], pa.int64()
                ).cast(pa.timestamp("us", "UTC")),
                "key": pa.array([None] * rows, pa.binary()),
                "value": values,
                "headers": pa.array([[]] * rows, schema.field("headers").type),
            },
            schema=schema,
        )
        written += _dataframe_to_data_files(metadata, arrow, io, uuid.uuid4(), itertools.count())
    return written


def table_build(catalog, name: str, *, size: int, files: int, record_bytes: int):
    """A table of `size` bytes of records in `files` files, committed as one append."""
    from jobs.table_maintenance import LAST_OFFSETS
    from virtualclusters.tables.topic_tables import RAW_SCHEMA, TABLE_PROPERTIES

    table = catalog.create_table(("topics", name), RAW_SCHEMA, properties=TABLE_PROPERTIES)
    rows = max(1, size // files // record_bytes)
    metadata_json = table.metadata.model_dump_json()
    chunks = [(first, min(50, files - first)) for first in range(0, files, 50)]
    with ProcessPoolExecutor(max_workers=2, mp_context=get_context("spawn")) as pool:
        parts = pool.map(
            write_files,
            *zip(*[(metadata_json, f, n, rows, record_bytes) for f, n in chunks], strict=True),
        )
        data_files = [d for part in parts for d in part]
    summary = {LAST_OFFSETS: json.dumps({"0": files * rows - 1})}
    with table.transaction() as transaction:
        with transaction.update_snapshot(snapshot_properties=summary).fast_append() as add:
            for data_file in data_files:
                add.append_data_file(data_file)
    return catalog.load_table(("topics", name)), files * rows


def compact_on_driver(table, *, target_bytes: int, max_files: int) -> int:
    """The compaction before it moved to the executors (for comparison): the driver
    reads every small file into one Arrow table and writes it again itself."""
    import itertools
    import uuid

    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan, _dataframe_to_data_files

    from jobs.table_maintenance import LAST_OFFSETS, small_file_groups

    snapshot = table.current_snapshot()
    groups = small_file_groups(table, target_bytes=target_bytes, max_files=max_files)
    tasks = [t for group in groups for t in group]
    arrow = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue()).to_table(tasks)
    written = list(
        _dataframe_to_data_files(table.metadata, arrow, table.io, uuid.uuid4(), itertools.count())
    )
    del arrow
    summary = {LAST_OFFSETS: snapshot.summary[LAST_OFFSETS]}
    with table.transaction() as transaction:
        with transaction.update_snapshot(snapshot_properties=summary).overwrite() as rewrite:
            for task in tasks:
                rewrite.delete_data_file(task.file)
            for data_file in written:
                rewrite.append_data_file(data_file)
    return len(tasks)


def rss(pid: int) -> int:
    """The process's resident set in bytes (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def descendants(pid: int) -> list[int]:
    import psutil

    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return []


class PeakSampler(threading.Thread):
    """Peak RSS of this process, the driver's JVM and the rest of their descendants."""

    def __init__(self, jvm_pid: int) -> None:
        super().__init__(daemon=True)
        self.jvm_pid = jvm_pid
        self.base = self.sample()
        self.peak = dict(self.base)
        self.stopping = threading.Event()

    def sample(self) -> dict[str, int]:
        others = [p for p in descendants(os.getpid()) if p != self.jvm_pid]
        return {
            "driver_python": rss(os.getpid()),
            "driver_jvm": rss(self.jvm_pid),
            "executors": sum(rss(p) for p in others),
        }

    def run(self) -> None:
        while not self.stopping.wait(0.02):
            for name, value in self.sample().items():
                self.peak[name] = max(self.peak[name], value)

    def stop(self) -> None:
        self.stopping.set()
        self.join()


def compact_once(spark, catalog, name: str, *, args, size: int, files: int) -> dict:
    import gc

    from jobs.table_maintenance import compact

    started = time.monotonic()
    table, rows = table_build(catalog, name, size=size, files=files, record_bytes=args.record_bytes)
    built_s = time.monotonic() - started
    before = [t.file for t in table.scan().plan_files()]
    table_bytes = sum(f.file_size_in_bytes for f in before)
    gc.collect()
    sampler = PeakSampler(spark.sparkContext._gateway.proc.pid)
    sampler.start()
    started = time.monotonic()
    if args.on_driver:
        replaced = compact_on_driver(
            table, target_bytes=args.target_bytes, max_files=args.max_files
        )
    else:
        replaced = compact(spark, table, target_bytes=args.target_bytes, max_files=args.max_files)
    seconds = time.monotonic() - started
    sampler.stop()
    table = catalog.load_table(("topics", name))
    after = list(table.scan().plan_files())
    offsets = table.scan(selected_fields=("partition", "offset")).to_arrow()
    every_row_once = offsets.num_rows == rows and len(set(offsets["offset"].to_pylist())) == rows
    return {
        "table_mib": round(table_bytes / MIB, 1),
        "rows": rows,
        "files_before": len(before),
        "files_after": len(after),
        "files_replaced": replaced,
        "every_row_once": every_row_once,
        "build_s": round(built_s, 1),
        "compact_s": round(seconds, 2),
        "mib_per_s": round(table_bytes / MIB / seconds, 1),
        **{f"{k}_base_mib": round(v / MIB) for k, v in sampler.base.items()},
        **{f"{k}_peak_mib": round(v / MIB) for k, v in sampler.peak.items()},
    }


def main() -> int:
    args = parse_args()
    django_setup()
    from jobs.session import spark_session
    from tests.jobs.local_catalog import FileCatalog

    folder = Path(tempfile.mkdtemp(prefix="floe-bench-tables-"))
    catalog = FileCatalog(folder / "warehouse")
    load_before = os.getloadavg()
    spark = spark_session(args.master)
    result: dict = {
        "master": args.master,
        "rewrite": "driver" if args.on_driver else "executors",
        "target_bytes": args.target_bytes,
        "runs": [],
    }
    try:
        warm = compact_once(spark, catalog, "warmup", args=args, size=16 * MIB, files=16)
        result["warmup_s"] = warm["compact_s"]
        for n, mib in enumerate(args.sizes_mib):
            files = max(args.max_files + 1, round(mib / 1024 * args.files_per_gib))
            run = compact_once(spark, catalog, f"t{n}", args=args, size=mib * MIB, files=files)
            result["runs"].append(run)
            print(json.dumps(run), file=sys.stderr, flush=True)
    finally:
        spark.stop()
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    result["loadavg_before"] = [round(x, 2) for x in load_before]
    result["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
