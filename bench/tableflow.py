"""Topic-table append throughput: a topic's records → one Iceberg snapshot, by Spark.

Writes ``--bytes`` of ``--record-bytes`` records (default 128 MiB of 1 KiB records) into
``--partitions`` partitions the way agents do (segment files of about 1 MiB, committed
through the metadata store of a fresh ``floe_bench`` database, a ``file://`` bucket),
keeps the topic as a raw table, and times one ``table_append`` run end to end (plan →
the Spark job on ``--master``, default ``local[2]``, reading the runs, writing Parquet
and committing through the catalog of a real control plane web server → the result
recorded), after a tiny warm-up append (a long-running jobs agent has paid Spark's
start-up long ago). Checks the table's row count.

Then, for ``--steady-seconds`` (default 30; 0 skips it), records are written at
``--rate-mib`` MiB/s (default 5) in segment files of ``--file-bytes`` by a thread of
this process while the main thread appends as a jobs agent does whenever the table is
due (``freshness_seconds`` 1, maintenance on): after each append, the table's lag
(records of the topic not in it, and seconds since the oldest of them was committed)
and the data files the append added. Checks every record written is in the table at
the end. Prints one JSON object.

With ``--avro`` the values are Avro records of ``--record-bytes`` (a long, a string, a
double and the rest as bytes) in Confluent's wire format (magic byte, the schema's id),
the schema registered under the subject ``bench-value`` as the agent's registry does it
(its text in the bucket, its fingerprint through the metadata store), and the table is
kept with ``{"subject": "bench-value"}``: the job decodes every value into columns.

    .venv/bin/python bench/tableflow.py [--bytes 134217728] [--master local[2]]
        [--steady-seconds 30] [--rate-mib 5] [--avro]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

from common import bench_env, control_plane, django_setup

MIB = 1024 * 1024


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bytes", type=int, default=128 * MIB, help="record bytes to write")
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--batch-records", type=int, default=64)
    parser.add_argument("--file-bytes", type=int, default=1 * MIB, help="ingestion file size")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--steady-seconds", type=float, default=30.0)
    parser.add_argument("--rate-mib", type=float, default=5.0, help="steady produce rate")
    parser.add_argument("--avro", action="store_true", help="Avro values through a subject")
    parser.add_argument("--keep", action="store_true", help="keep the bucket folder")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    work = Path(tempfile.mkdtemp(prefix="floe-bench-tableflow-"))
    env = bench_env(work / "data")
    env["SPARK_MASTER"] = args.master
    django_setup(env)

    from django.conf import settings
    from pyiceberg.catalog.rest import RestCatalog

    from core.kafka.records import RecordInput, encode_batch
    from tests.factories import make_api_key, make_cluster
    from tests.jobs import driver
    from tests.jobs.segments import SegmentWriter
    from virtualclusters.jobs import services as jobs_services
    from virtualclusters.tables.topic_tables import catalog_path, topic_table_enable

    bucket = (work / "bucket").as_uri()
    driver.BUCKET_URL = bucket
    driver.SPARK_MASTER = args.master
    settings.FLOE_TABLE_APPEND_MAX_BYTES = 4 * args.bytes + 64 * MIB

    def cluster_with_table(name: str, partitions: int):
        cluster, agent_key = make_cluster(name)
        cluster.bucket_url = bucket
        cluster.save(update_fields=["bucket_url"])
        writer = SegmentWriter(cluster, bucket)
        topic = writer.topic(name, partitions)
        return cluster, agent_key, writer, topic

    cluster, agent_key, writer, topic = cluster_with_table("bench", args.partitions)
    rng = random.Random(1)
    noise = os.urandom(4 * MIB)
    table_schema: object = "raw"
    value_of = None
    if args.avro:
        table_schema = {"subject": "bench-value", "version": "latest"}
        value_of = avro_values(cluster, bucket, args.record_bytes)
    batch_bytes = args.record_bytes * args.batch_records
    batches_per_file = max(1, args.file_bytes // batch_bytes)
    files = max(1, args.bytes // (batches_per_file * batch_bytes))
    file_records = batches_per_file * args.batch_records

    def write_file(n: int) -> None:
        """One segment file of `batches_per_file` batches, over the partitions."""
        ts = int(time.time() * 1000)
        chosen = []
        for b in range(batches_per_file):
            records = []
            for i in range(args.batch_records):
                at = rng.randrange(len(noise) - args.record_bytes)
                value = noise[at : at + args.record_bytes]
                if value_of is not None:
                    value = value_of(
                        n * batches_per_file * args.batch_records + b * 1000 + i, value
                    )
                records.append(RecordInput(key=f"{n}-{b}-{i}".encode(), value=value, timestamp=ts))
            chosen.append((topic, (n + b) % args.partitions, encode_batch(records)))
        writer.commit(chosen)

    started = time.perf_counter()
    for n in range(files):
        write_file(n)
    write_s = time.perf_counter() - started
    records = files * file_records

    with control_plane(env) as url:
        driver.CONTROL_PLANE_URL = url

        def append(cluster, key) -> tuple[object, float, float]:
            driver.AGENT_KEY = key
            spark_s: list[float] = []
            real = driver.spark_step

            def timed(name, plan):
                began = time.perf_counter()
                try:
                    return real(name, plan)
                finally:
                    spark_s.append(time.perf_counter() - began)

            driver.spark_step = timed
            began = time.perf_counter()
            try:
                run = jobs_services.job_dispatch(cluster=cluster, kind="table_append")
                run = driver.job_run_execute(run_id=run.id)
            finally:
                driver.spark_step = real
            if run.state != "succeeded" or run.details.get("errors"):
                raise SystemExit(f"the append failed: {run.state} {run.error} {run.details}")
            return run, time.perf_counter() - began, spark_s[0]

        warm_cluster, warm_key, warm, warm_topic = cluster_with_table("warm", 2)
        warm.commit([(warm_topic, 0, encode_batch([RecordInput(key=b"k", value=b"v")]))])
        topic_table_enable(topic=warm_topic, schema="raw")
        _, first_s, _ = append(warm_cluster, warm_key)

        topic_table_enable(topic=topic, schema=table_schema)
        run, total_s, spark_s = append(cluster, agent_key)
        api_key = make_api_key(cluster.organization)
        table = RestCatalog("bench", uri=url + catalog_path(cluster), token=api_key).load_table(
            ("topics", "bench")
        )
        rows = table.scan().count() if hasattr(table.scan(), "count") else None
        columns = [field.name for field in table.schema().fields]
        if args.avro and not {"id", "name", "amount", "payload"} <= set(columns):
            raise SystemExit(f"the Avro values did not become columns: {columns}")
        data_files = len(list(table.scan().plan_files()))
        steady = steady_phase(
            args, cluster, agent_key, topic, write_file, files, file_records, append, table_schema
        )
        if steady:
            table = table.refresh()
            steady["rows_read"] = table.scan().count()
            steady["data_files_at_end"] = len(list(table.scan().plan_files()))
            if steady["rows_read"] != records + steady["records_written"]:
                raise SystemExit(f"steady phase: read {steady['rows_read']} rows, wrote more")

    if run.details["appended"] != records or (rows is not None and rows != records):
        raise SystemExit(f"appended {run.details['appended']}, read {rows}, wrote {records}")
    mib = records * args.record_bytes / MIB
    print(
        json.dumps(
            {
                "records": records,
                "record_bytes": args.record_bytes,
                "values": "avro" if args.avro else "raw",
                "columns": columns,
                "partitions": args.partitions,
                "master": args.master,
                "segment_files": files,
                "data_files": data_files,
                "parquet_mib": round(run.output_bytes / MIB, 1),
                "seconds_total": round(total_s, 2),
                "seconds_spark_job": round(spark_s, 2),
                "records_per_s": round(records / total_s),
                "mib_per_s": round(mib / total_s, 1),
                "mib_per_s_spark_job": round(mib / spark_s, 1),
                "seconds_first_tiny_append": round(first_s, 2),
                "seconds_writing_inputs": round(write_s, 2),
                "steady": steady,
            }
        )
    )
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


def avro_values(cluster, bucket: str, record_bytes: int):
    """Register the bench's Avro schema under ``bench-value`` as the agent's registry does
    (its document in the bucket under its fingerprint, the fingerprint through the
    metadata store); a function (n, noise) → a value of about `record_bytes` in
    Confluent's wire format."""
    import io
    import struct

    import fastavro

    from core.schemas.formats import parse
    from jobs.segment_io import store_for
    from schema_registry.services import schema_register

    schema = {
        "type": "record",
        "name": "Bench",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "name", "type": "string"},
            {"name": "amount", "type": "double"},
            {"name": "payload", "type": "bytes"},
        ],
    }
    parsed = parse(json.dumps(schema), "AVRO")
    store_for(bucket).put(
        f"{cluster.public_id}/_schemas/{parsed.fingerprint}.json",
        json.dumps(parsed.document(), separators=(",", ":")).encode(),
    )
    answer = schema_register(
        cluster=cluster, subject="bench-value", fingerprint=parsed.fingerprint,
        schema_type="AVRO", references=[], checked_latest=0,
    )  # fmt: skip
    header = b"\x00" + struct.pack(">i", answer["id"])
    compiled = fastavro.parse_schema(schema)
    payload_bytes = max(0, record_bytes - len(header) - 40)

    def value_of(n: int, noise: bytes) -> bytes:
        out = io.BytesIO()
        out.write(header)
        record = {"id": n, "name": f"record-{n}", "amount": n / 7, "payload": noise[:payload_bytes]}
        fastavro.schemaless_writer(out, compiled, record)
        return out.getvalue()

    return value_of


def steady_phase(
    args, cluster, agent_key, topic, write_file, first_file, file_records, append, table_schema
) -> dict | None:
    """Files written at the steady rate by a thread while this one appends whenever the
    table is due; the lag after each append and the files each added."""
    if args.steady_seconds <= 0:
        return None
    from django.db import connection
    from django.utils import timezone

    from virtualclusters.tables.models import TopicTable
    from virtualclusters.tables.selectors import lag_records, table_behind, table_last_offsets
    from virtualclusters.tables.topic_tables import topic_table_enable

    topic_table_enable(topic=topic, schema=table_schema, freshness_seconds=1)
    file_seconds = args.file_bytes / (args.rate_mib * MIB)
    written = [0]
    stop = threading.Event()

    def produce() -> None:
        began = time.perf_counter()
        try:
            while not stop.is_set():
                write_file(first_file + written[0])
                written[0] += 1
                ahead = began + written[0] * file_seconds - time.perf_counter()
                if ahead > 0:
                    stop.wait(ahead)
        finally:
            connection.close()

    def lag() -> tuple[int, int]:
        kept = TopicTable.objects.select_related("table").get(topic=topic)
        offsets = table_last_offsets(kept.table)
        behind = table_behind(kept, offsets, now=timezone.now())
        return lag_records(kept, offsets), behind["lag_seconds"]

    thread = threading.Thread(target=produce, daemon=True)
    began = time.perf_counter()
    thread.start()
    appends: list[dict] = []
    while time.perf_counter() - began < args.steady_seconds:
        TopicTable.objects.filter(topic=topic).update(last_appended_at=None)
        if lag()[0] == 0:
            time.sleep(0.2)
            continue
        run, seconds, _ = append(cluster, agent_key)
        records_behind, seconds_behind = lag()
        appends.append(
            {
                "seconds": seconds,
                "appended": run.details["appended"],
                "files": run.output_files,
                "compacted": run.details.get("compacted_files", 0),
                "lag_records": records_behind,
                "lag_seconds": seconds_behind,
            }
        )
    stop.set()
    thread.join(60)
    elapsed = time.perf_counter() - began
    while lag()[0]:  # the rest, for the count check
        TopicTable.objects.filter(topic=topic).update(last_appended_at=None)
        append(cluster, agent_key)
    produced_mib = written[0] * args.file_bytes / MIB

    def summary(key: str) -> dict:
        values = [a[key] for a in appends] or [0]
        return {"median": statistics.median(values), "max": max(values)}

    return {
        "seconds": round(elapsed, 1),
        "target_mib_per_s": args.rate_mib,
        "produced_mib_per_s": round(produced_mib / elapsed, 2),
        "records_written": written[0] * file_records,
        "appends": len(appends),
        "append_seconds": {k: round(v, 2) for k, v in summary("seconds").items()},
        "records_per_append": summary("appended"),
        "files_per_append": summary("files"),
        "files_compacted": sum(a["compacted"] for a in appends),
        "lag_records_after_append": summary("lag_records"),
        "lag_seconds_after_append": summary("lag_seconds"),
    }


if __name__ == "__main__":
    main()
