"""Compaction throughput: small ingestion files of 1 KiB records, compacted by Spark.

Writes ``--bytes`` of records (default 1 GiB) the way agents do — segment files of
``--file-bytes`` (default 1 MiB), each holding one batch of ``--batch-records`` records
for every partition it touches — into a ``file://`` bucket, commits them through the
metadata store (a fresh ``floe_bench`` database), then times one compaction run end to
end (plan → Spark job on ``--master``, default ``local[2]`` → compare-and-swap) and
checks a sample of the records. Spark's start-up is measured apart (a worker pays it
once, and a tiny compaction warms it up first, as a long-running worker is). Prints
one JSON object.

    .venv/bin/python bench/compaction.py [--bytes 1073741824] [--master local[2]]
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

from common import bench_env, django_setup

MIB = 1024 * 1024


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bytes", type=int, default=1024 * MIB, help="record bytes to write")
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--batch-records", type=int, default=16)
    parser.add_argument("--file-bytes", type=int, default=1 * MIB, help="ingestion file size")
    parser.add_argument("--partitions", type=int, default=16)
    parser.add_argument("--target-bytes", type=int, default=128 * MIB, help="output file size")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--keep", action="store_true", help="keep the bucket folder")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    work = Path(tempfile.mkdtemp(prefix="floe-bench-compaction-"))
    env = bench_env(work / "data")
    env["SPARK_MASTER"] = args.master
    django_setup(env)

    from django.conf import settings

    from core.kafka.records import RecordInput, encode_batch
    from jobs.session import spark_session
    from metadata_store.models import Partition
    from tests.factories import make_cluster
    from tests.jobs import driver
    from tests.jobs.segments import SegmentWriter, read_partition
    from virtualclusters.jobs import services as jobs_services

    bucket = (work / "bucket").as_uri()
    driver.BUCKET_URL = bucket
    driver.SPARK_MASTER = args.master
    settings.FLOE_COMPACTION_TARGET_BYTES = args.target_bytes
    settings.FLOE_COMPACTION_MAX_INPUT_FILES = 10**7
    settings.FLOE_COMPACTION_MIN_FILES = 2
    settings.FLOE_COMPACTION_MAX_INPUT_BYTES = 2 * args.bytes + 64 * MIB

    cluster, _ = make_cluster("bench-compaction")
    writer = SegmentWriter(cluster, bucket)
    topic = writer.topic("bench", args.partitions)

    # Distinct batches (random values) so nothing is accidentally shared or cached.
    rng = random.Random(1)
    noise = os.urandom(4 * MIB)
    batch_bytes = args.record_bytes * args.batch_records
    batches_per_file = max(1, args.file_bytes // batch_bytes)
    files = max(2, args.bytes // (batches_per_file * batch_bytes))
    started = time.perf_counter()
    ts = int(time.time() * 1000)
    for n in range(files):
        chosen = []
        for b in range(batches_per_file):
            records = []
            for i in range(args.batch_records):
                at = rng.randrange(len(noise) - args.record_bytes)
                key = f"{n}-{b}-{i}".encode()
                records.append(
                    RecordInput(key=key, value=noise[at : at + args.record_bytes], timestamp=ts)
                )
            chosen.append((topic, (n + b) % args.partitions, encode_batch(records)))
        writer.commit(chosen)
    write_s = time.perf_counter() - started

    started = time.perf_counter()
    spark_session(args.master).sparkContext.parallelize(range(4), 2).count()
    spark_start_s = time.perf_counter() - started
    # A worker's first job also warms the JVM and starts the Python workers: pay that
    # on a small cluster first, as a long-running worker would have long ago.
    warm_cluster, _ = make_cluster("bench-warm-up")
    warm = SegmentWriter(warm_cluster, bucket)
    warm_topic = warm.topic("warm", 2)
    for n in range(4):
        warm.commit([(warm_topic, n % 2, encode_batch([RecordInput(key=b"k", value=b"v")]))])
    started = time.perf_counter()
    warm_run = jobs_services.job_dispatch(cluster=warm_cluster, kind="compaction")
    driver.job_run_execute(run_id=warm_run.id)
    first_job_s = time.perf_counter() - started

    spark_s = []
    real_spark = driver.spark_step

    def timed(name, plan):
        began = time.perf_counter()
        try:
            return real_spark(name, plan)
        finally:
            spark_s.append(time.perf_counter() - began)

    driver.spark_step = timed
    started = time.perf_counter()
    run = jobs_services.job_dispatch(cluster=cluster, kind="compaction")
    run = driver.job_run_execute(run_id=run.id)
    total_s = time.perf_counter() - started
    if run.state != "succeeded" or not run.details.get("swapped"):
        raise SystemExit(f"compaction did not swap: {run.state} {run.error} {run.details}")

    sample = read_partition(writer, topic, 0)
    high_watermark = Partition.objects.get(topic=topic, index=0).high_watermark
    assert [r.offset for r in sample] == list(range(high_watermark))

    print(
        json.dumps(
            {
                "input_files": run.input_files,
                "input_mib": round(run.input_bytes / MIB, 1),
                "output_files": run.output_files,
                "output_mib": round(run.output_bytes / MIB, 1),
                "records": files * batches_per_file * args.batch_records,
                "batches": files * batches_per_file,
                "master": args.master,
                "target_mib": round(args.target_bytes / MIB, 1),
                "seconds_total": round(total_s, 2),
                "seconds_spark_job": round(spark_s[0], 2),
                "seconds_plan_and_swap": round(total_s - spark_s[0], 2),
                "mib_per_s": round(run.input_bytes / MIB / total_s, 1),
                "mib_per_s_spark_job": round(run.input_bytes / MIB / spark_s[0], 1),
                "files_reduction": round(run.input_files / max(1, run.output_files), 1),
                "seconds_spark_startup": round(spark_start_s, 2),
                "seconds_first_tiny_job": round(first_job_s, 2),
                "seconds_writing_inputs": round(write_s, 2),
            }
        )
    )
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
