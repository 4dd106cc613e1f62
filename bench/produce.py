"""Produce and consume through one agent: throughput and latency, with confluent-kafka.

Starts a control plane (uvicorn, bench database) and one agent with a file:// bucket —
or uses `--control-plane-url` + `--agent-key` of a running control plane, or measures a
running agent given by `--bootstrap` — then, for each
`--batch-timeouts` value (default 250 and 50 ms) and each `--partitions` count (default
12), on a fresh topic with 1 KiB records and acks=all:

1. throughput: produce as fast as possible for `--seconds`; MiB/s;
2. latency: produce at `--rate` records/s while a consumer tails the topic; produce
   latency (send → delivery callback) and end-to-end latency (timestamp in the record
   → consumed), p50/p99;
3. catch-up: a new consumer reads the topic from the beginning; MiB/s.

`--idempotent` makes the producers of the phases idempotent and `--batch-bytes` caps
their batches (librdkafka's batch.size): librdkafka sends an idempotent producer's next
request for a partition only while fewer than five of the partition's records are in
flight (rdkafka_broker.c, rd_kafka_toppar_producer_serve: RD_KAFKA_IDEMP_MAX_INFLIGHT
compared with rktp_msgs_inflight), so with batches of five records or more it waits for
each batch's answer — one produce latency per batch and partition.

With `--transactional` the phases are instead, per partition count: `--producers`
producers (default 16), each in its own thread, write groups of `--txn-records` records
(default 100) as fast as they can — once as transactions (begin, produce, commit; the
transaction's records spread over the partitions), once the same idempotent producers
without transactions (produce, flush) — reporting groups/s, MiB/s and the per-group
latency p50/p99.

Prints one JSON object. `FLOE_BENCH_COMPRESSION=lz4` (or gzip, snappy, zstd) makes the
producers compress (default none).

    .venv/bin/python bench/produce.py [--seconds 10] [--batch-timeouts 250,50]
                                      [--partitions 12,100,1000]
                                      [--idempotent] [--batch-bytes 10000]
                                      [--transactional [--producers 16] [--txn-records 100]]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import ROOT, bench_env, control_plane, django_setup, percentile
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

RECORD_BYTES = 1024
MIB = 1024 * 1024
_STAMP = struct.Struct(">d")  # send time, at the start of every value


def start_agent(url: str, key: str, bucket: Path, batch_timeout_ms: int) -> tuple:
    """One agent process on OS-chosen ports; returns (process, bootstrap)."""
    log = open(bucket.parent / f"agent-{batch_timeout_ms}.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "agents", "--control-plane-url", url, "--agent-key", key,
         "--bucket-url", bucket.as_uri(), "--kafka-port", "0", "--http-port", "0", "--schema-registry-port", "0",
         "--batch-timeout", str(batch_timeout_ms)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True,
    )  # fmt: skip
    line = proc.stdout.readline()
    match = re.search(r"serving Kafka on (\S+) for", line)
    if not match:
        proc.kill()
        raise RuntimeError(f"agent did not start: {line!r}; see {log.name}")
    return proc, match.group(1)


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(30)


def producer(bootstrap: str, config: dict | None = None) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "queue.buffering.max.kbytes": 256 * 1024,
            "compression.type": os.environ.get("FLOE_BENCH_COMPRESSION", "none"),
            **(config or {}),
        }
    )


def producer_config(args) -> dict:
    """The options `--idempotent` and `--batch-bytes` add to the producers of the phases."""
    config: dict = {}
    if args.idempotent:
        config["enable.idempotence"] = True
    if args.batch_bytes:
        config["batch.size"] = args.batch_bytes
    return config


def run_throughput(
    bootstrap: str, topic: str, partitions: int, seconds: float, config: dict | None = None
) -> dict:
    """Produce flat out; MiB/s from the first send to the last delivery."""
    prod = producer(bootstrap, config)
    payload = bytes(RECORD_BYTES)
    delivered = [0, 0]  # ok, failed

    def on_delivery(err, msg) -> None:
        delivered[1 if err else 0] += 1

    started = time.perf_counter()
    sent = 0
    while time.perf_counter() - started < seconds:
        for _ in range(1000):
            try:
                prod.produce(topic, payload, partition=sent % partitions, on_delivery=on_delivery)
                sent += 1
            except BufferError:
                prod.poll(0.005)
        prod.poll(0)
    prod.flush(60)
    elapsed = time.perf_counter() - started
    return {
        "records": sent,
        "failed": delivered[1],
        "seconds": round(elapsed, 2),
        "mib_per_s": round(delivered[0] * RECORD_BYTES / MIB / elapsed, 1),
    }


def run_groups(
    bootstrap: str, topic: str, partitions: int, seconds: float, args, *, transactional: bool
) -> dict:
    """`args.producers` producers write groups of `args.txn_records` records for
    `seconds`: as transactions, or produce-then-flush without."""
    payload = bytes(RECORD_BYTES)
    latencies: list[float] = []
    failed = [0]
    lock = threading.Lock()
    started = time.perf_counter()

    def work(n: int) -> None:
        # Idempotent both ways, so that only the transaction differs: librdkafka then
        # keeps at most 5 produce requests in flight per connection, one per partition.
        config = {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "acks": "all",
            "enable.idempotence": True,
        }
        if transactional:
            config["transactional.id"] = f"bench-{topic}-{n}"
        prod = Producer(config)
        if transactional:
            prod.init_transactions(30)
        sent = n
        while time.perf_counter() - started < seconds:
            began = time.perf_counter()
            try:
                if transactional:
                    prod.begin_transaction()
                for _ in range(args.txn_records):
                    prod.produce(topic, payload, partition=sent % partitions)
                    sent += 1
                if transactional:
                    prod.commit_transaction(30)
                else:
                    prod.flush(30)
            except Exception:  # noqa: BLE001 - counted, the run goes on
                with lock:
                    failed[0] += 1
                if transactional:
                    prod.abort_transaction(30)
                continue
            with lock:
                latencies.append(time.perf_counter() - began)
        prod.flush(30)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(args.producers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    groups = len(latencies)
    return {
        "transactional": transactional,
        "producers": args.producers,
        "records_per_group": args.txn_records,
        "groups": groups,
        "failed": failed[0],
        "groups_per_s": round(groups / elapsed, 1),
        "mib_per_s": round(groups * args.txn_records * RECORD_BYTES / MIB / elapsed, 2),
        "group_p50_ms": round(percentile(latencies, 50) * 1000, 1) if latencies else None,
        "group_p99_ms": round(percentile(latencies, 99) * 1000, 1) if latencies else None,
    }


def run_latency(
    bootstrap: str,
    topic: str,
    partitions: int,
    seconds: float,
    rate: int,
    config: dict | None = None,
) -> dict:
    """Produce at `rate` records/s while a consumer tails the topic."""
    e2e: list[float] = []
    stop = threading.Event()
    ready = threading.Event()

    def tail() -> None:
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False}
        )
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        ready.set()
        while not stop.is_set():
            # poll, not consume(n, timeout): consume holds messages until n or the timeout.
            msg = consumer.poll(0.1)
            if msg is not None and not msg.error():
                e2e.append(time.time() - _STAMP.unpack_from(msg.value())[0])
        consumer.close()

    thread = threading.Thread(target=tail)
    thread.start()
    ready.wait(10)
    time.sleep(1)  # let the consumer's first fetches go out
    prod = producer(bootstrap, config)
    produce_latency: list[float] = []
    started = time.perf_counter()
    sent = 0
    while (now := time.perf_counter()) - started < seconds:
        due = int((now - started) * rate)
        while sent < due:
            sent_at = time.perf_counter()
            value = _STAMP.pack(time.time()) + bytes(RECORD_BYTES - _STAMP.size)

            def on_delivery(err, msg, sent_at=sent_at) -> None:
                if not err:
                    produce_latency.append(time.perf_counter() - sent_at)

            prod.produce(topic, value, partition=sent % partitions, on_delivery=on_delivery)
            sent += 1
        prod.poll(0.001)
    prod.flush(30)
    deadline = time.monotonic() + 10
    while len(e2e) < sent and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    thread.join(10)

    def ms(values: list[float], p: float) -> float:
        return round(percentile(values, p) * 1000, 1)

    return {
        "rate_per_s": rate,
        "records": sent,
        "produce_p50_ms": ms(produce_latency, 50),
        "produce_p99_ms": ms(produce_latency, 99),
        "e2e_p50_ms": ms(e2e, 50),
        "e2e_p99_ms": ms(e2e, 99),
        "consumed": len(e2e),
    }


def run_catch_up(bootstrap: str, topic: str, partitions: int, records: int) -> dict:
    """Read `records` records of the topic from the beginning; MiB/s."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-catch-up",
            "enable.auto.commit": False,
            "fetch.max.bytes": 64 * MIB,
            "max.partition.fetch.bytes": 8 * MIB,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = size = 0
    started = time.perf_counter()
    deadline = time.monotonic() + 120
    while got < records and time.monotonic() < deadline:
        for msg in consumer.consume(10000, 0.5):
            if not msg.error():
                got += 1
                size += len(msg.value())
    elapsed = time.perf_counter() - started
    consumer.close()
    return {
        "records": got,
        "seconds": round(elapsed, 2),
        "mib_per_s": round(size / MIB / elapsed, 1),
    }


def stop_embedded_postgres(data_dir: Path) -> None:
    """Stop the PostgreSQL that `bench_env` started in `data_dir` (it outlives us otherwise)."""
    pid_file = data_dir / "postgres" / "postmaster.pid"
    if pid_file.exists():
        os.kill(int(pid_file.read_text().split()[0]), signal.SIGINT)  # fast shutdown


def run_phases(bootstrap: str, label: str, args) -> list[dict]:
    """Throughput, latency and catch-up against one agent, per partition count."""
    results = []
    for partitions in [int(p) for p in args.partitions.split(",")]:
        topic = f"bench-{label}-{partitions}-{int(time.time())}"
        create_topic(bootstrap, topic, partitions)
        if args.transactional:
            results.append(
                {
                    "partitions": partitions,
                    "transactions": run_groups(
                        bootstrap, topic, partitions, args.seconds, args, transactional=True
                    ),
                    "without_transactions": run_groups(
                        bootstrap, topic, partitions, args.seconds, args, transactional=False
                    ),
                }
            )
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)
            continue
        config = producer_config(args)
        throughput = run_throughput(bootstrap, topic, partitions, args.seconds, config)
        latency_topic = topic + "-latency"
        create_topic(bootstrap, latency_topic, partitions)
        latency = run_latency(bootstrap, latency_topic, partitions, args.seconds, args.rate, config)
        written = throughput["records"] - throughput["failed"]
        catch_up = run_catch_up(bootstrap, topic, partitions, written)
        results.append(
            {
                "partitions": partitions,
                "produce": throughput,
                "latency": latency,
                "catch_up": catch_up,
            }
        )
        print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    return results


def bench_one(url: str, key: str, bucket: Path, timeout_ms: int, args) -> dict:
    proc, bootstrap = start_agent(url, key, bucket, timeout_ms)
    try:
        return {
            "batch_timeout_ms": timeout_ms,
            "topics": run_phases(bootstrap, str(timeout_ms), args),
        }
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each phase")
    parser.add_argument("--batch-timeouts", default="250,50")
    parser.add_argument("--rate", type=int, default=5000, help="records/s in the latency phase")
    parser.add_argument("--partitions", default="12", help="partition counts, e.g. 12,100,1000")
    parser.add_argument(
        "--transactional", action="store_true", help="transactions vs the same without"
    )
    parser.add_argument(
        "--idempotent", action="store_true", help="idempotent producers (enable.idempotence)"
    )
    parser.add_argument(
        "--batch-bytes", type=int, help="the producers' batch.size (librdkafka: 1000000)"
    )
    parser.add_argument("--producers", type=int, default=16, help="with --transactional")
    parser.add_argument("--txn-records", type=int, default=100, help="records per transaction")
    parser.add_argument("--control-plane-url", help="use a running control plane")
    parser.add_argument("--agent-key", help="agent key of a cluster on that control plane")
    parser.add_argument("--bootstrap", help="measure a running agent (host:port) instead")
    args = parser.parse_args()
    if args.bootstrap:
        print(
            json.dumps(
                {"bootstrap": args.bootstrap, "topics": run_phases(args.bootstrap, "x", args)}
            )
        )
        return
    data_dir = Path(tempfile.mkdtemp(prefix="floe-bench-produce-"))
    bucket = data_dir / "bucket"
    bucket.mkdir()
    timeouts = [int(t) for t in args.batch_timeouts.split(",")]
    results = []
    if args.control_plane_url:
        for timeout_ms in timeouts:
            results.append(
                bench_one(args.control_plane_url, args.agent_key, bucket, timeout_ms, args)
            )
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    else:
        embedded = not os.environ.get("DATABASE_URL")  # django_setup exports one below
        env = bench_env(data_dir)
        try:
            django_setup(env)
            from tests.factories import make_cluster

            # The cluster's flush-age cap must not clip the timeouts under test.
            _, key = make_cluster("bench-produce", max_flush_age_ms=max(timeouts))
            with control_plane(env) as url:
                for timeout_ms in timeouts:
                    results.append(bench_one(url, key, bucket, timeout_ms, args))
                    print(json.dumps(results[-1]), file=sys.stderr, flush=True)
        finally:
            if embedded:
                stop_embedded_postgres(data_dir)
    print(json.dumps({"record_bytes": RECORD_BYTES, "runs": results}, indent=2))


if __name__ == "__main__":
    main()
