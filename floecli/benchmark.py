"""``floe benchmark-producer`` / ``floe benchmark-consumer``: records/s, MiB/s and
latency percentiles (producer: send → acknowledgement; consumer: the record's timestamp
→ its arrival), with a progress line on stderr every second while it runs."""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from typing import Any

from floecli.errors import BadInput, CommandFailed
from floecli.kafka_config import add_connection_arguments, client_config, reachable

MIB = 1024 * 1024


def add_parsers(subparsers: Any) -> None:
    producer = subparsers.add_parser(
        "benchmark-producer",
        help="write N records as fast as acknowledged; report throughput and latency",
        description="Writes --num-records records of --record-size bytes to TOPIC.",
    )
    add_connection_arguments(producer)
    producer.add_argument("--topic", "-t", required=True)
    producer.add_argument("--num-records", "-n", type=int, default=100_000)
    producer.add_argument("--record-size", "-s", type=int, default=1024, metavar="BYTES")
    producer.add_argument("--acks", default="all", choices=("0", "1", "all", "-1"))
    producer.add_argument("--linger-ms", type=int, default=5)
    producer.add_argument("--json", action="store_true", help="the result as one JSON object")
    producer.set_defaults(run=benchmark_producer)

    consumer = subparsers.add_parser(
        "benchmark-consumer",
        help="read N records of a topic from the beginning; report throughput and latency",
        description="Reads --num-records records of TOPIC from its earliest offsets "
        "(latency: now − each record's timestamp).",
    )
    add_connection_arguments(consumer)
    consumer.add_argument("--topic", "-t", required=True)
    consumer.add_argument("--num-records", "-n", type=int, default=100_000)
    consumer.add_argument(
        "--timeout-ms",
        type=int,
        default=10_000,
        metavar="MS",
        help="fail when no record arrives for MS milliseconds (default 10000)",
    )
    consumer.add_argument("--json", action="store_true", help="the result as one JSON object")
    consumer.set_defaults(run=benchmark_consumer)


def percentile(sorted_values: list[float], fraction: float) -> float:
    """The nearest-rank percentile of already sorted values (0 when there are none)."""
    if not sorted_values:
        return 0.0
    rank = max(int(round(fraction * len(sorted_values) + 0.5)) - 1, 0)
    return sorted_values[min(rank, len(sorted_values) - 1)]


def summary(records: int, data_bytes: int, seconds: float, latencies_ms: list[float]) -> dict:
    latencies_ms.sort()
    seconds = max(seconds, 1e-9)
    return {
        "records": records,
        "bytes": data_bytes,
        "seconds": round(seconds, 3),
        "records_per_s": round(records / seconds, 1),
        "mib_per_s": round(data_bytes / MIB / seconds, 3),
        "latency_ms_p50": round(percentile(latencies_ms, 0.50), 2),
        "latency_ms_p99": round(percentile(latencies_ms, 0.99), 2),
        "latency_ms_max": round(latencies_ms[-1], 2) if latencies_ms else 0.0,
    }


def _report(result: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(result))
        return
    print(
        f"{result['records']} records in {result['seconds']} s: "
        f"{result['records_per_s']} records/s, {result['mib_per_s']} MiB/s, "
        f"latency p50 {result['latency_ms_p50']} ms, p99 {result['latency_ms_p99']} ms, "
        f"max {result['latency_ms_max']} ms"
    )


class Progress:
    """One line on stderr a second: records so far, and the rate since the last line."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.started = self.last_at = time.monotonic()
        self.last_records = 0

    def tick(self, records: int, data_bytes: int) -> None:
        now = time.monotonic()
        if now - self.last_at < 1.0:
            return
        rate = (records - self.last_records) / (now - self.last_at)
        mib = data_bytes / MIB / max(now - self.started, 1e-9)
        print(
            f"{records}/{self.total} records, {rate:.0f} records/s, {mib:.2f} MiB/s",
            file=sys.stderr,
            flush=True,
        )
        self.last_at, self.last_records = now, records


def _check_counts(args: argparse.Namespace) -> None:
    if args.num_records < 1:
        raise BadInput("--num-records must be at least 1")


def benchmark_producer(args: argparse.Namespace) -> int:
    from confluent_kafka import Producer

    _check_counts(args)
    if args.record_size < 1:
        raise BadInput("--record-size must be at least 1")
    config = client_config(
        args,
        acks=args.acks,
        **{"linger.ms": args.linger_ms, "message.timeout.ms": int(args.request_timeout * 3000)},
    )
    reachable(config, args.request_timeout)
    value = os.urandom(args.record_size)
    latencies: list[float] = []
    failures: list[str] = []
    acked = [0]

    def delivered(sent_at: float, error: Any, _message: Any) -> None:
        if error is not None:
            failures.append(error.str())
            return
        latencies.append((time.perf_counter() - sent_at) * 1000)
        acked[0] += 1

    producer = Producer(config)
    progress = Progress(args.num_records)
    started = time.perf_counter()
    for _ in range(args.num_records):
        sent_at = time.perf_counter()
        while True:
            try:
                producer.produce(
                    args.topic,
                    value=value,
                    on_delivery=functools.partial(delivered, sent_at),
                )
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
        if failures:
            break
        progress.tick(acked[0], acked[0] * args.record_size)
    deadline = time.monotonic() + args.request_timeout * 3
    while len(producer) and time.monotonic() < deadline and not failures:
        producer.poll(0.1)
        progress.tick(acked[0], acked[0] * args.record_size)
    elapsed = time.perf_counter() - started
    if failures or len(producer):
        reason = failures[0] if failures else f"{len(producer)} records unacknowledged"
        raise CommandFailed(f"stopped after {acked[0]} records: {reason}")
    _report(summary(acked[0], acked[0] * args.record_size, elapsed, latencies), args.json)
    return 0


def benchmark_consumer(args: argparse.Namespace) -> int:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    _check_counts(args)
    config = client_config(
        args,
        **{"group.id": f"floe-benchmark-{os.getpid()}", "enable.auto.commit": False},
    )
    reachable(config, args.request_timeout)
    consumer = Consumer(config)
    try:
        metadata = consumer.list_topics(args.topic, timeout=args.request_timeout)
        topic = metadata.topics.get(args.topic)
        if topic is None or topic.error is not None:
            reason = topic.error.str() if topic is not None and topic.error else "unknown"
            raise CommandFailed(f"topic {args.topic!r}: {reason}")
        consumer.assign([TopicPartition(args.topic, p, OFFSET_BEGINNING) for p in topic.partitions])
        progress = Progress(args.num_records)
        latencies: list[float] = []
        records = data_bytes = 0
        started = time.perf_counter()
        idle_since = time.monotonic()
        while records < args.num_records:
            messages = consumer.consume(min(10_000, args.num_records - records), 0.2)
            now_ms = time.time() * 1000
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.fatal() or not error.retriable():
                        raise CommandFailed(error.str())
                    continue
                records += 1
                data_bytes += len(message.value() or b"") + len(message.key() or b"")
                latencies.append(max(now_ms - message.timestamp()[1], 0.0))
            if messages:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > args.timeout_ms / 1000:
                raise CommandFailed(
                    f"{records} of {args.num_records} records, then none for {args.timeout_ms} ms"
                )
            progress.tick(records, data_bytes)
        elapsed = time.perf_counter() - started
    finally:
        consumer.close()
    _report(summary(records, data_bytes, elapsed, latencies), args.json)
    return 0
