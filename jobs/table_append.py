"""Table append: a topic's new records → Parquet data files → one Iceberg snapshot per
table, committed through the cluster's catalog, exactly once.

Each table's current snapshot summary says where every partition got to
(``floe.last-offsets``: partition → last offset appended). The driver loads the table,
the executors read the planned partition runs from the bucket, keep only the records
past those offsets, decode them and write Parquet files with PyArrow (PyIceberg's
writer: field ids, metrics, the table's partition spec) into the table's location; only
the files' descriptions (paths, counts, bounds) come back to the driver, which commits
them as one fast append whose summary carries the new offsets, with PyIceberg's
requirement that the table is still at the snapshot it loaded. A concurrent commit
fails that requirement (409): the job deletes its files and starts over from the new
snapshot. A retried run (a re-leased job, the same plan twice) finds its ranges already
in the summary and appends nothing. After a commit the job writes the new metadata
file at the location the catalog answered (the control plane never opens the bucket).

Plan: ``catalog_path`` (the cluster's catalog under the control plane; the agent that
runs it adds ``catalog_url`` and ``catalog_token``: its control plane's URL and its
agent key), ``bucket_url`` and ``tables``: [{``id``,
``namespace``, ``table``, ``schema`` ({"kind": "raw"}, or {"kind": "avro", "texts":
the registry's prefix in the bucket, "reader": fingerprint, "writers": {id:
fingerprint}}), ``batches``: partition runs as `RUN_COLUMNS`, ``stable``: partition →
its last stable offset, ``aborted``: [partition, producer id, first offset, marker
offset]}]: records are taken as a read_committed consumer reads them. An Avro table's
columns are the value's fields (added by name before the first append of a new
version) and ``kafka``: a struct of partition, offset, timestamp, key and headers.
With ``maintenance`` ({``retention_ms``: the topic's, ``target_bytes``, ``max_files``,
``orphan_grace_s``, ``sweep_s``})
a table and its dead letters are then compacted (on the executors) and their old
snapshots expired (``jobs/table_maintenance.py``).
Result: ``tables``: [{``id``, ``appended``, ``rows``, ``last_offsets``, ``files``,
``bytes``, ``snapshot_id``, ``conflicts``, ``maintenance``: {``compacted``,
``expired``, ``deleted``, ``orphans``, ``error``?}}] (or {``id``, ``error``}).
"""

from __future__ import annotations

import itertools
import json
import sys
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.io import load_file_io
from pyiceberg.io.pyarrow import _dataframe_to_data_files, schema_to_pyarrow
from pyiceberg.serializers import ToOutputFile
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadataUtil
from pyspark.sql import SparkSession

from core.kafka.records import decode_records
from jobs.avro_columns import Decoder, value_schema
from jobs.cli import job_main
from jobs.segment_io import BatchRef, read_batches, run_at_offsets, store_for
from jobs.table_maintenance import maintain

RUN_COLUMNS = (
    "partition",
    "base_offset",
    "last_offset",
    "file_key",
    "position",
    "length",
    "rewrite",
)
LAST_OFFSETS = "floe.last-offsets"  # the snapshot summary's key
COMMIT_ATTEMPTS = 5


def last_offsets(table: Table) -> dict[int, int]:
    """Partition → last offset already in the table (its current snapshot's summary)."""
    snapshot = table.current_snapshot()
    if snapshot is None or snapshot.summary is None:
        return {}
    text = snapshot.summary[LAST_OFFSETS]
    return {int(p): int(o) for p, o in json.loads(text).items()} if text else {}


def raw_rows(records: Iterable[tuple[int, Any]]) -> dict[str, list]:
    """The raw schema's columns of (partition, record) pairs."""
    columns: dict[str, list] = {
        "partition": [],
        "offset": [],
        "timestamp": [],
        "key": [],
        "value": [],
        "headers": [],
    }
    for partition, record in records:
        columns["partition"].append(partition)
        columns["offset"].append(record.offset)
        columns["timestamp"].append(record.timestamp * 1000)  # ms → µs
        columns["key"].append(record.key)
        columns["value"].append(record.value)
        columns["headers"].append([{"key": k, "value": v} for k, v in record.headers])
    return columns


def avro_rows(
    records: Iterable[tuple[int, Any]], decoder: Decoder
) -> tuple[list[dict], list[tuple[int, Any, str]]]:
    """Rows of an Avro table (the value's fields, and Kafka's own in the `kafka`
    struct), and the records whose value does not decode, with the reason."""
    rows, dead = [], []
    for partition, record in records:
        try:
            fields = decoder.decode(record.value)
        except Exception as exc:
            dead.append((partition, record, f"{type(exc).__name__}: {exc}"[:1000]))
            continue
        fields["kafka"] = {
            "partition": partition,
            "offset": record.offset,
            "timestamp": record.timestamp * 1000,
            "key": record.key,
            "headers": [{"key": k, "value": v} for k, v in record.headers],
        }
        rows.append(fields)
    return rows, dead


def write_files(
    runs: Iterable[tuple],
    *,
    bucket_url: str,
    metadata_json: str,
    io_properties: dict[str, str],
    done: dict[int, int],
    stable: dict[int, int],
    aborted: Sequence[Sequence[int]] = (),
    avro: dict | None = None,
    dead_letters: dict | None = None,
) -> Iterator[tuple]:
    """Executor side: the records of these runs past `done` and before `stable` (what a
    read_committed consumer reads: no control records, none of an aborted transaction),
    as Parquet data files in the table's location. Yields ("file", DataFile) per file,
    ("offsets", partition, last offset looked at, records taken) per partition, and for
    values that do not decode ("dead", DataFile) files of the dead-letter table
    (`dead_letters`: its ``metadata_json`` and ``done``, the offsets it already holds)
    and ("dead_offsets", partition, last offset, records)."""
    runs = sorted(runs, key=lambda r: (r[0], r[2]))
    if not runs:
        return
    aborted_ranges: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for partition, producer_id, first, marker in aborted:
        aborted_ranges.setdefault((partition, producer_id), []).append((first, marker))
    store = store_for(bucket_url)
    data = read_batches(store, [BatchRef(r[3], r[4], r[5]) for r in runs])
    picked: list[tuple[int, Any]] = []
    scanned: dict[int, int] = {}  # partition → the last offset looked at (decided)
    counts: dict[int, int] = {}
    for partition, base, last_offset, key, position, length, rewrite in runs:
        after, before = done.get(partition, -1), stable.get(partition, 0)
        for batch in run_at_offsets(
            data.pop(BatchRef(key, position, length)),
            base_offset=base,
            last_offset=last_offset,
            rewrite=rewrite,
            where=f"{key}@{position}",
        ):
            header, records = decode_records(batch.data)
            ranges = aborted_ranges.get((partition, header.producer_id), ())
            for record in records:
                if not after < record.offset < before:
                    continue  # already in the table, or not decided yet
                scanned[partition] = max(scanned.get(partition, -1), record.offset)
                if header.is_control:
                    continue  # a transaction marker: no record of the topic's
                if header.is_transactional and any(f <= record.offset < m for f, m in ranges):
                    continue  # an aborted transaction's: a consumer never sees it
                picked.append((partition, record))
                counts[partition] = counts.get(partition, 0) + 1
    if not picked:
        for partition, offset in scanned.items():
            yield ("offsets", partition, offset, 0)
        return
    metadata = TableMetadataUtil.parse_raw(metadata_json)
    arrow_schema = schema_to_pyarrow(metadata.schema())
    io = load_file_io(io_properties, metadata.location)
    dead: list[tuple[int, Any, str]] = []
    if avro is None:
        arrow = pa.Table.from_pydict(raw_rows(picked), schema=arrow_schema)
    else:
        decoder = Decoder(avro["reader"], {int(i): w for i, w in avro["writers"].items()})
        rows, dead = avro_rows(picked, decoder)
        arrow = pa.Table.from_pylist(rows, schema=arrow_schema)
    for partition, _, _ in dead:
        counts[partition] -= 1
    for partition, offset in scanned.items():
        yield ("offsets", partition, offset, counts.get(partition, 0))
    if dead:
        if dead_letters is None:
            partition, record, error = dead[0]
            raise ValueError(f"partition {partition} offset {record.offset}: {error}")
        yield from _dead_letter_files(dead, dead_letters, io_properties)
    if arrow.num_rows:
        for data_file in _dataframe_to_data_files(
            metadata, arrow, io, uuid.uuid4(), itertools.count()
        ):
            yield ("file", data_file)


def _dead_letter_files(
    dead: list[tuple[int, Any, str]], dead_letters: dict, io_properties: dict[str, str]
) -> Iterator[tuple]:
    """The dead letters not yet in their table, as its Parquet files."""
    done = {int(p): int(o) for p, o in dead_letters["done"].items()}
    fresh = [d for d in dead if d[1].offset > done.get(d[0], -1)]
    if not fresh:
        return
    metadata = TableMetadataUtil.parse_raw(dead_letters["metadata_json"])
    columns = raw_rows((partition, record) for partition, record, _ in fresh)
    columns["error"] = [error for _, _, error in fresh]
    arrow = pa.Table.from_pydict(columns, schema=schema_to_pyarrow(metadata.schema()))
    io = load_file_io(io_properties, metadata.location)
    for data_file in _dataframe_to_data_files(metadata, arrow, io, uuid.uuid4(), itertools.count()):
        yield ("dead", data_file)
    last: dict[int, int] = {}
    for partition, record, _ in fresh:
        last[partition] = max(last.get(partition, -1), record.offset)
    for partition, offset in last.items():
        yield ("dead_offsets", partition, offset, sum(1 for d in fresh if d[0] == partition))


def avro_schemas(bucket_url: str, schema: dict) -> dict:
    """The reader's schema and every writer's, by id, from the registry's texts in the
    bucket (``<cluster>/_schemas/<fingerprint>.json``)."""
    store = store_for(bucket_url)

    def text(fingerprint: str) -> dict:
        document = json.loads(store.get(f"{schema['texts']}{fingerprint}.json"))
        if document.get("schemaType", "AVRO") != "AVRO" or document.get("references"):
            raise ValueError(f"schema {fingerprint[:12]}…: only Avro without references")
        parsed: dict = json.loads(document["schema"])
        return parsed

    return {
        "reader": text(schema["reader"]),
        "writers": {str(i): text(fp) for i, fp in schema["writers"].items()},
    }


def columns_ensure(table: Table, reader: dict) -> None:
    """Add the value's fields the table lacks as columns (by name, through the catalog;
    a column is never dropped or retyped)."""
    wanted = value_schema(reader)
    if "kafka" in wanted.names:
        raise ValueError("the value has a field named 'kafka', the table's Kafka column")
    present = {field.name for field in table.schema().fields}
    if set(wanted.names) <= present:
        return
    with table.update_schema() as update:
        update.union_by_name(wanted)


def _write_on_executors(
    spark: SparkSession,
    runs: list[tuple],
    *,
    bucket_url: str,
    metadata_json: str,
    io_properties: dict[str, str],
    done: dict[int, int],
    stable: dict[int, int],
    aborted: list[list[int]],
    avro: dict | None,
    dead_letters: dict | None,
) -> list[tuple]:
    """`write_files` over the runs, one Spark task per group of Kafka partitions."""
    slices = max(1, min(len({r[0] for r in runs}), spark.sparkContext.defaultParallelism))
    return (
        spark.sparkContext.parallelize(runs, slices)
        .keyBy(lambda r: r[0])
        .partitionBy(slices, lambda p: p % slices)
        .values()
        .mapPartitions(
            lambda part: write_files(
                part,
                bucket_url=bucket_url,
                metadata_json=metadata_json,
                io_properties=io_properties,
                done=done,
                stable=stable,
                aborted=aborted,
                avro=avro,
                dead_letters=dead_letters,
            )
        )
        .collect()
    )


def _commit(table: Table, files: list, offsets: dict[int, int]) -> bool:
    """One fast append of `files` whose summary carries `offsets`, on the snapshot the
    table was loaded at; False when another writer committed first (409)."""
    summary = {LAST_OFFSETS: json.dumps({str(p): o for p, o in sorted(offsets.items())})}
    try:
        with table.transaction() as transaction:
            with transaction.update_snapshot(snapshot_properties=summary).fast_append() as add:
                for data_file in files:
                    add.append_data_file(data_file)
    except CommitFailedException:
        return False
    ToOutputFile.table_metadata(table.metadata, table.io.new_output(table.metadata_location))
    return True


def append_table(spark: SparkSession, catalog: RestCatalog, bucket_url: str, spec: dict) -> dict:
    """Append one table's planned runs past its summary's offsets; commit once (its
    dead letters first, in their own table, past that table's own offsets)."""
    identifier = (spec["namespace"], spec["table"])
    avro = avro_schemas(bucket_url, spec["schema"]) if spec["schema"]["kind"] == "avro" else None
    if avro is not None:
        columns_ensure(catalog.load_table(identifier), avro["reader"])
    conflicts = 0
    for _ in range(COMMIT_ATTEMPTS):
        table = catalog.load_table(identifier)
        done = last_offsets(table)
        runs = [tuple(r) for r in spec["batches"] if r[2] > done.get(r[0], -1)]
        outcome = {"id": spec["id"], "conflicts": conflicts, "files": 0, "bytes": 0, "dead": 0}
        if not runs and _through_markers(done, spec) == done:
            return {**outcome, **_state(table, appended=0)}
        dead_table = None
        if spec.get("dead_letters"):
            dead_table = catalog.load_table((spec["namespace"], spec["dead_letters"]))
        dead_done = last_offsets(dead_table) if dead_table is not None else {}
        written = (
            _write_on_executors(
                spark,
                runs,
                bucket_url=bucket_url,
                metadata_json=table.metadata.model_dump_json(),
                io_properties=dict(table.io.properties),
                done=done,
                stable={int(p): int(o) for p, o in spec["stable"].items()},
                aborted=[list(a) for a in spec.get("aborted") or []],
                avro=avro,
                dead_letters=None
                if dead_table is None
                else {
                    "metadata_json": dead_table.metadata.model_dump_json(),
                    "done": {str(p): o for p, o in dead_done.items()},
                },
            )
            if runs
            else []
        )
        files = [w[1] for w in written if w[0] == "file"]
        dead_files = [w[1] for w in written if w[0] == "dead"]
        scanned = {w[1]: w[2] for w in written if w[0] == "offsets"}
        appended = sum(w[3] for w in written if w[0] == "offsets")
        dead = sum(w[3] for w in written if w[0] == "dead_offsets")
        if dead_files and dead_table is not None:
            dead_reached = {**dead_done, **{w[1]: w[2] for w in written if w[0] == "dead_offsets"}}
            if not _commit(dead_table, dead_files, dead_reached):
                conflicts += 1
                for data_file in files + dead_files:
                    table.io.delete(data_file.file_path)
                continue
        # Also when only markers or aborted records came: the next append starts after.
        offsets = _through_markers({**done, **scanned}, spec)
        if not files and offsets == done:
            return {**outcome, "dead": dead, **_state(table, appended=0)}
        if not _commit(table, files, offsets):
            # Someone else appended first: drop these files, start from their snapshot
            # (dead letters already committed are in their table's offsets: not again).
            conflicts += 1
            for data_file in files:
                table.io.delete(data_file.file_path)
            continue
        return {
            **outcome,
            "files": len(files),
            "bytes": sum(f.file_size_in_bytes for f in files),
            "dead": dead,
            **_state(table, appended=appended),
        }
    raise CommitFailedException(f"{identifier}: {COMMIT_ATTEMPTS} commits in a row lost a race")


def _through_markers(offsets: dict[int, int], spec: dict) -> dict[int, int]:
    """`offsets` moved past the transaction markers that follow them (markers are rows
    of the metadata store, not records of any run)."""
    moved = dict(offsets)
    for partition, markers in (spec.get("markers") or {}).items():
        p = int(partition)
        for marker in sorted(markers):
            if marker == moved.get(p, -1) + 1:
                moved[p] = marker
    return moved


def _state(table: Table, *, appended: int) -> dict:
    snapshot = table.current_snapshot()
    rows = 0
    if snapshot is not None and snapshot.summary is not None:
        rows = int(snapshot.summary["total-records"] or 0)
    return {
        "appended": appended,
        "rows": rows,
        "last_offsets": {str(p): o for p, o in sorted(last_offsets(table).items())},
        "snapshot_id": snapshot.snapshot_id if snapshot is not None else None,
    }


def run(spark: SparkSession, plan: dict) -> dict:
    """Append every planned table; one table's failure does not stop the others."""
    catalog = RestCatalog("floe", uri=plan["catalog_url"], token=plan["catalog_token"])
    results = []
    for spec in plan["tables"]:
        try:
            outcome = append_table(spark, catalog, plan["bucket_url"], spec)
        except Exception as exc:  # reported per table: the control plane shows last_error
            results.append({"id": spec["id"], "error": f"{type(exc).__name__}: {exc}"[:2000]})
            continue
        if spec.get("maintenance"):
            outcome["maintenance"] = maintain_tables(spark, catalog, spec)
        results.append(outcome)
    return {"tables": results}


def maintain_tables(spark: SparkSession, catalog: RestCatalog, spec: dict) -> dict:
    """`maintain` the table and its dead letters after their append (a failure is
    reported, the append stands)."""
    settings = spec["maintenance"]
    total = {"compacted": 0, "expired": 0, "deleted": 0, "orphans": 0}
    try:
        for name in filter(None, (spec["table"], spec.get("dead_letters"))):
            done = maintain(
                spark,
                catalog.load_table((spec["namespace"], name)),
                topic_retention_ms=int(settings["retention_ms"]),
                now_ms=time.time_ns() // 1_000_000,
                target_bytes=int(settings["target_bytes"]),
                max_files=int(settings["max_files"]),
                orphan_grace_s=float(settings["orphan_grace_s"]),
                sweep_s=float(settings.get("sweep_s", 0)),
            )
            total = {k: total[k] + done[k] for k in total}
    except Exception as exc:
        return {**total, "error": f"{type(exc).__name__}: {exc}"[:2000]}
    return total


def main(argv: Sequence[str] | None = None) -> int:
    return job_main(argv, name="table_append", run=run)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
