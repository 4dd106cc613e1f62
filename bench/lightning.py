"""Produce acknowledgement latency: a lightning topic against a standard one, in one sitting.

Starts a control plane (uvicorn, bench database) and, per bucket (`file://` and `s3://`
on moto's server over HTTP, a process of its own) and per flush age (`--flush-ages`,
default 250 and 5 ms), one agent; creates a standard and a lightning topic of
`--partitions` partitions (default 12) and produces `--rate` 1 KiB records/s (default
500) to each for `--seconds` (default 5) with confluent-kafka (acks=all, linger.ms 0),
measuring each record's send → delivery
report time. Beside the lightning p99 it prints the bound the design promises —
flush age + the bucket's PUT p99 + 5 ms — with the PUT p99 measured on the same bucket,
right after, with objects of the size the agent writes at that rate and age, at its pace
(one a flush age) and overlapping as its PUTs do (`put_p99_ms`). It also prints the bound
with the PUT p99 measured during the lightning run (`put_p99_under_load_ms`; during the
standard run too, so both topics meet the same load), by a process of its own PUTting one
such object every 25 ms: the bucket (moto, or the disk the files are fsynced to) shares
the machine with the agent, the control plane and the producer, and its tail under that
load is longer than alone.

Prints one JSON object.

    .venv/bin/python bench/lightning.py [--seconds 5] [--rate 500] [--flush-ages 250,5]
                                        [--buckets file,s3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from common import ROOT, bench_env, control_plane, django_setup, percentile
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

RECORD_BYTES = 1024
PROBE_EVERY_S = 0.025  # the PUT probe's pace, at the most (`put_p99_ms`)


def start_agent(url: str, key: str, bucket_url: str, flush_ms: int, logs: Path):
    log = open(logs / f"agent-{uuid.uuid4().hex[:6]}.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "agents", "--control-plane-url", url, "--agent-key", key,
         "--bucket-url", bucket_url, "--kafka-port", "0", "--http-port", "0",
         "--schema-registry-port", "0", "--batch-timeout", str(flush_ms)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    match = re.search(r"serving Kafka on (\S+) for", proc.stdout.readline())
    if not match:
        proc.kill()
        raise RuntimeError(f"agent did not start; see {log.name}")
    return proc, match.group(1)


def create_topic(bootstrap: str, name: str, partitions: int, topic_type: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(name, partitions, 1, config={"floe.topic.type": topic_type})
    for future in admin.create_topics([new]).values():
        future.result(30)


def ack_latencies(bootstrap: str, topic: str, rate: int, seconds: float) -> list[float]:
    """Send → delivery report of every record, in ms, produced at `rate` records/s."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "batch.num.messages": 1000}
    )
    latencies: list[float] = []
    errors: list = []

    def report(err, _msg, sent: float) -> None:
        if err:
            errors.append(err)
        else:
            latencies.append((time.perf_counter() - sent) * 1000)

    value = b"x" * RECORD_BYTES
    # Warm up (metadata, connections) outside the measurement.
    producer.produce(topic, value)
    producer.flush(30)
    started = time.perf_counter()
    count = int(rate * seconds)
    for n in range(count):
        due = started + n / rate
        while (now := time.perf_counter()) < due:
            producer.poll(min(due - now, 0.001))
        producer.produce(topic, value, on_delivery=lambda e, m, t=now: report(e, m, t))
        producer.poll(0)
    producer.flush(60)
    if errors:
        raise RuntimeError(f"{len(errors)} produce errors, first: {errors[0]}")
    return latencies


def put_p99_ms(
    bucket_url: str, size: int, every_s: float, count: int = 200, on_ready=None
) -> float:
    """The bucket's PUT p99 as the agent's write path meets it: objects of the size the
    agent writes, one every flush age (at most every 25 ms, to keep this short: a PUT that
    takes less is alone in flight at either pace), each on its own thread, so PUTs overlap
    as the agent's do when they take longer than the flush age (8 at most, its PUT slots).
    Run alone, after the produce runs, and in a process of its own beside each produce run
    (`put_probe_beside`)."""
    sys.path.insert(0, str(ROOT))
    from concurrent.futures import ThreadPoolExecutor

    from core.storage import open_store

    store = open_store(bucket_url)
    data = b"p" * size
    store.put(f"bench-put/{uuid.uuid4().hex}", data)  # warm up (connections)
    if on_ready is not None:
        on_ready()

    def put(n: int) -> float:
        started = time.perf_counter()
        store.put(f"bench-put/{uuid.uuid4().hex}-{n}", data)
        return (time.perf_counter() - started) * 1000

    every_s = min(every_s, PROBE_EVERY_S)
    with ThreadPoolExecutor(max_workers=8) as pool:
        started = time.perf_counter()
        futures = []
        for n in range(count):
            time.sleep(max(0.0, started + n * every_s - time.perf_counter()))
            futures.append(pool.submit(put, n))
        times = [f.result() for f in futures]
    return percentile(times, 99)


def _probe_process(bucket_url: str, size: int, count: int, ready, answer) -> None:
    answer.put(put_p99_ms(bucket_url, size, PROBE_EVERY_S, count, on_ready=ready.set))


@contextlib.contextmanager
def put_probe_beside(bucket_url: str, size: int, seconds: float):
    """`put_p99_ms` in a process of its own (not this one's GIL, which the producer's loop
    holds) for `seconds`, one PUT every 25 ms; yields a dict that gets its `p99_ms`."""
    import multiprocessing

    spawn = multiprocessing.get_context("spawn")
    answer, ready = spawn.Queue(), spawn.Event()
    count = max(1, int(seconds / PROBE_EVERY_S))
    probe = spawn.Process(target=_probe_process, args=(bucket_url, size, count, ready, answer))
    probe.start()
    found: dict = {}
    try:
        if not ready.wait(60):
            raise RuntimeError("the PUT probe did not start")
        yield found
        found["p99_ms"] = answer.get(timeout=60)
    finally:
        probe.join(10)
        if probe.is_alive():
            probe.kill()


def summary(values: list[float]) -> dict:
    return {
        "p50_ms": round(percentile(values, 50), 2),
        "p99_ms": round(percentile(values, 99), 2),
        "max_ms": round(max(values), 2),
        "records": len(values),
    }


def run_bucket(url: str, key: str, kind: str, bucket_url: str, logs: Path, args) -> list[dict]:
    runs = []
    for flush_ms in args.flush_ages:
        proc, bootstrap = start_agent(url, key, bucket_url, flush_ms, logs)
        try:
            run = {"bucket": kind, "flush_age_ms": flush_ms, "partitions": args.partitions}
            segment_bytes = max(RECORD_BYTES, int(args.rate * flush_ms / 1000 * RECORD_BYTES))
            for topic_type in ("standard", "lightning"):
                topic = f"{topic_type}-{flush_ms}-{uuid.uuid4().hex[:4]}"
                create_topic(bootstrap, topic, args.partitions, topic_type)
                # Beside both topics' runs, so that the two meet the same load.
                with put_probe_beside(bucket_url, segment_bytes, args.seconds) as under_load:
                    latencies = ack_latencies(bootstrap, topic, args.rate, args.seconds)
                run[topic_type] = summary(latencies)
                run[topic_type]["put_p99_beside_ms"] = round(under_load["p99_ms"], 2)
            put = put_p99_ms(bucket_url, segment_bytes, flush_ms / 1000)
            bound = flush_ms + put + 5
            run["put_p99_ms"] = round(put, 2)
            run["lightning_p99_bound_ms"] = round(bound, 2)
            run["lightning_p99_within_bound"] = run["lightning"]["p99_ms"] <= bound
            # `under_load`: the lightning run's probe (the last topic's).
            loaded = flush_ms + under_load["p99_ms"] + 5
            run["put_p99_under_load_ms"] = round(under_load["p99_ms"], 2)
            run["lightning_p99_bound_under_load_ms"] = round(loaded, 2)
            run["lightning_p99_within_bound_under_load"] = run["lightning"]["p99_ms"] <= loaded
            runs.append(run)
            print(json.dumps(run), file=sys.stderr, flush=True)
        finally:
            proc.terminate()
            proc.wait(30)
    return runs


@contextlib.contextmanager
def moto_bucket(logs: Path):
    """A bucket on moto's server in a process of its own, as a bucket is a service of its
    own: in this process's threads its PUTs waited for the GIL behind the producer's loop
    (at a 5 ms flush age the agent PUTs 200 files a second)."""
    sys.path.insert(0, str(ROOT))
    from tests.fixtures_s3 import REGION, create_bucket, moto_s3_process

    with moto_s3_process(logs / "moto.log") as moto:
        yield f"s3://{create_bucket(moto.endpoint)}?endpoint={moto.endpoint}&region={REGION}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rate", type=int, default=500)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument(
        "--flush-ages", type=lambda s: [int(x) for x in s.split(",")], default=[250, 5]
    )
    parser.add_argument("--buckets", default="file,s3")
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="floe-bench-lightning-"))
    env = bench_env(
        data_dir, database=os.environ.get("FLOE_BENCH_DATABASE", "floe_bench_lightning")
    )
    django_setup(env)
    from tests.factories import make_cluster

    results: dict = {"record_bytes": RECORD_BYTES, "rate": args.rate, "runs": []}
    with control_plane(env) as url:
        for kind in args.buckets.split(","):
            _, key = make_cluster(f"bench-lightning-{kind}", max_flush_age_ms=max(args.flush_ages))
            if kind == "file":
                folder = data_dir / "bucket"
                folder.mkdir()
                results["runs"] += run_bucket(url, key, kind, folder.as_uri(), data_dir, args)
            else:
                with moto_bucket(data_dir) as bucket_url:
                    results["runs"] += run_bucket(url, key, kind, bucket_url, data_dir, args)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
