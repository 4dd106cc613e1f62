"""A cluster with 10,000 partitions, and 1,000 idle connections on one agent.

Starts a control plane (uvicorn, bench database) and one agent with a file:// bucket,
then measures, with confluent-kafka:

1. CreateTopics of `--topics` topics with `--partitions` partitions each (default 10 ×
   1,000): seconds;
2. Metadata for all topics: seconds and response size;
3. produce one record to every partition: seconds;
4. ListOffsets latest for every partition (one AdminClient call): seconds;
5. a consumer reading every partition from the beginning: seconds until all records;
6. `--idle` idle connections (each after an ApiVersions exchange) plus a producer at
   `--rate` records/s: agent RSS before and after, produce latency p50/p99, and the
   agent's open file limit.

Prints one JSON object.

    cd bench && ../.venv/bin/python scale.py [--topics 10] [--partitions 1000] [--idle 1000]
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import tempfile
import time
from pathlib import Path

from common import bench_env, control_plane, django_setup, percentile
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from produce import start_agent

_API_VERSIONS_V0 = struct.pack(">ihhih", 10 + 6, 18, 0, 1, 6) + b"idle-1"


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def open_file_limit(pid: int) -> int:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    return -1


def timed(fn):
    started = time.perf_counter()
    result = fn()
    return round(time.perf_counter() - started, 2), result


def create_topics(bootstrap: str, names: list[str], partitions: int) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def create():
        futures = admin.create_topics(
            [NewTopic(n, partitions, 1) for n in names], operation_timeout=120
        )
        for future in futures.values():
            future.result(180)

    return timed(create)[0]


def metadata(bootstrap: str) -> dict:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    seconds, found = timed(lambda: admin.list_topics(timeout=60))
    partitions = sum(len(t.partitions) for t in found.topics.values())
    return {"seconds": seconds, "topics": len(found.topics), "partitions": partitions}


def metadata_bytes(host: str, port: int) -> int:
    """The size of a Metadata v1 response naming every topic (null topic list)."""
    body = struct.pack(">hhih", 3, 1, 7, 5) + b"bytes" + struct.pack(">i", -1)
    with socket.create_connection((host, port), timeout=60) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", _read(sock, 4))[0]
        _read(sock, size)
    return size


def _read(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def produce_everywhere(bootstrap: str, names: list[str], partitions: int) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all"})
    failed = []

    def produce():
        for name in names:
            for p in range(partitions):
                producer.produce(
                    name, b"x" * 100, partition=p, on_delivery=lambda e, m: e and failed.append(e)
                )
                producer.poll(0)
        assert producer.flush(300) == 0 and not failed, failed[:3]

    return timed(produce)[0]


def list_offsets_latest(bootstrap: str, names: list[str], partitions: int) -> dict:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    wanted = {TopicPartition(n, p): OffsetSpec.latest() for n in names for p in range(partitions)}

    def ask():
        futures = admin.list_offsets(wanted, request_timeout=120)
        return [f.result(180) for f in futures.values()]

    seconds, answers = timed(ask)
    return {
        "seconds": seconds,
        "partitions": len(answers),
        "all_one": all(a.offset == 1 for a in answers),
    }


def consume_everything(bootstrap: str, names: list[str], partitions: int) -> dict:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "scale", "enable.auto.commit": False}
    )
    consumer.assign(
        [TopicPartition(n, p, OFFSET_BEGINNING) for n in names for p in range(partitions)]
    )
    wanted, got = len(names) * partitions, 0
    started = time.perf_counter()
    deadline = time.monotonic() + 600
    while got < wanted and time.monotonic() < deadline:
        got += sum(1 for m in consumer.consume(10000, 1.0) if not m.error())
    seconds = round(time.perf_counter() - started, 2)
    consumer.close()
    return {"seconds": seconds, "records": got, "of": wanted}


def idle_connections(host: str, port: int, count: int, pid: int, bootstrap: str, rate: int) -> dict:
    before = rss_mib(pid)
    sockets = []
    for _ in range(count):
        sock = socket.create_connection((host, port), timeout=30)
        sock.sendall(_API_VERSIONS_V0)
        size = struct.unpack(">i", _read(sock, 4))[0]
        _read(sock, size)
        sockets.append(sock)
    with_idle = rss_mib(pid)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    latencies: list[float] = []
    started = time.perf_counter()
    sent = 0
    while (now := time.perf_counter()) - started < 10:
        while sent < int((now - started) * rate):
            sent_at = time.perf_counter()
            producer.produce(
                "idle-probe",
                b"x" * 1024,
                on_delivery=lambda e, m, t=sent_at: e or latencies.append(time.perf_counter() - t),
            )
            sent += 1
        producer.poll(0.001)
    producer.flush(30)
    alive = sum(1 for s in sockets if s.fileno() >= 0)
    for sock in sockets:
        sock.close()
    return {
        "idle_connections": count,
        "still_open": alive,
        "agent_rss_mib_before": before,
        "agent_rss_mib_with_idle": with_idle,
        "rss_kib_per_connection": round((with_idle - before) * 1024 / max(count, 1), 1),
        "agent_open_file_limit": open_file_limit(pid),
        "produce_rate_per_s": rate,
        "produce_p50_ms": round(percentile(latencies, 50) * 1000, 1),
        "produce_p99_ms": round(percentile(latencies, 99) * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--partitions", type=int, default=1000, help="per topic")
    parser.add_argument("--idle", type=int, default=1000, help="idle connections")
    parser.add_argument("--rate", type=int, default=1000, help="records/s beside them")
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="floe-bench-scale-"))
    bucket = data_dir / "bucket"
    bucket.mkdir()
    env = bench_env(data_dir)
    django_setup(env)
    from tests.factories import make_cluster

    _, key = make_cluster("bench-scale", default_partitions=1)
    names = [f"scale-{n:02d}" for n in range(args.topics)]
    result: dict = {"topics": args.topics, "partitions_per_topic": args.partitions}
    with control_plane(env) as url:
        proc, bootstrap = start_agent(url, key, bucket, 100)
        host, port = bootstrap.rsplit(":", 1)
        try:
            result["create_topics_s"] = create_topics(bootstrap, names, args.partitions)
            result["metadata"] = metadata(bootstrap)
            result["metadata"]["response_bytes"] = metadata_bytes(host, int(port))
            result["produce_one_per_partition_s"] = produce_everywhere(
                bootstrap, names, args.partitions
            )
            result["list_offsets_latest"] = list_offsets_latest(bootstrap, names, args.partitions)
            result["consume_all"] = consume_everything(bootstrap, names, args.partitions)
            result["connections"] = idle_connections(
                host, int(port), args.idle, proc.pid, bootstrap, args.rate
            )
            print(json.dumps(result, indent=2))
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
