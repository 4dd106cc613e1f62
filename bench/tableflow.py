"""Topic-table append throughput: a topic's records → one Iceberg snapshot, by Spark.

Writes ``--bytes`` of ``--record-bytes`` records (default 128 MiB of 1 KiB records) into
``--partitions`` partitions the way agents do (segment files of about 1 MiB, committed
through the metadata store of a fresh ``floe_bench`` database, a ``file://`` bucket),
keeps the topic as a raw table, and times one ``table_append`` run end to end (plan →
the Spark job on ``--master``, default ``local[2]``, reading the runs, writing Parquet
and committing through the catalog of a real control plane web server → the result
recorded), after a tiny warm-up append (a long-running jobs agent has paid Spark's
start-up long ago). Checks the table's row count. Prints one JSON object.

    .venv/bin/python bench/tableflow.py [--bytes 134217728] [--master local[2]]

Not yet measured: Avro records, a standalone master, the lag at a steady produce rate.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
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
    batch_bytes = args.record_bytes * args.batch_records
    batches_per_file = max(1, args.file_bytes // batch_bytes)
    files = max(1, args.bytes // (batches_per_file * batch_bytes))
    started = time.perf_counter()
    ts = int(time.time() * 1000)
    for n in range(files):
        chosen = []
        for b in range(batches_per_file):
            records = []
            for i in range(args.batch_records):
                at = rng.randrange(len(noise) - args.record_bytes)
                value = noise[at : at + args.record_bytes]
                records.append(RecordInput(key=f"{n}-{b}-{i}".encode(), value=value, timestamp=ts))
            chosen.append((topic, (n + b) % args.partitions, encode_batch(records)))
        writer.commit(chosen)
    write_s = time.perf_counter() - started
    records = files * batches_per_file * args.batch_records

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

        topic_table_enable(topic=topic, schema="raw")
        run, total_s, spark_s = append(cluster, agent_key)
        api_key = make_api_key(cluster.organization)
        table = RestCatalog("bench", uri=url + catalog_path(cluster), token=api_key).load_table(
            ("topics", "bench")
        )
        rows = table.scan().count() if hasattr(table.scan(), "count") else None
        data_files = len(list(table.scan().plan_files()))

    if run.details["appended"] != records or (rows is not None and rows != records):
        raise SystemExit(f"appended {run.details['appended']}, read {rows}, wrote {records}")
    mib = records * args.record_bytes / MIB
    print(
        json.dumps(
            {
                "records": records,
                "record_bytes": args.record_bytes,
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
            }
        )
    )
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
