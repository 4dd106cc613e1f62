"""The agent's Schema Registry: lookups by id (served from the agent's cache) and
registrations (each through the control plane: a lock on the cluster's registry row).

Starts a control plane (uvicorn, bench database `floe_bench_registry`) and one agent with
a file:// bucket, then:

1. registrations: `--schemas` distinct Avro schemas (default 300), each under its own
   subject, from `--threads` threads (default 4) with confluent-kafka's
   `SchemaRegistryClient`; registrations/s and p99 latency;
2. `GET /schemas/ids/{id}`: `--threads` keep-alive connections asking for the registered
   ids round-robin for `--seconds` (default 5); requests/s and p99 latency;
3. produce: 1 KiB values framed with a registered id, as fast as one confluent-kafka
   producer goes for `--seconds`, to a topic with `confluent.value.schema.validation`
   on and to one with it off (same shape: 4 partitions; `--compression` sets the
   producer's compression.type, none by default), in `--rounds` rounds (default 5),
   each round one run of each, the order flipped every round (off-on, on-off…): MiB/s
   of each run, and the agent's CPU seconds per MiB produced (from /proc: what a shared
   machine's load changes least). The cost of validation is the median over the rounds
   of each round's pair: `validation_cost_percent` (MiB/s, off vs on) and
   `validation_cpu_cost_percent` (agent CPU per MiB, on vs off); a round compares two
   runs a few seconds apart, so the machine's drifting load moves both alike.

Prints one JSON object.

    .venv/bin/python bench/schema_registry.py [--schemas 300] [--threads 4] [--seconds 5] \
        [--rounds 5] [--compression none]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import ROOT, bench_env, control_plane, django_setup, percentile
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

MIB = 1024 * 1024


def start_agent(url: str, key: str, bucket: Path) -> tuple[subprocess.Popen, int, str]:
    log_path = bucket.parent / "agent.log"
    log = open(log_path, "wb")  # noqa: SIM115 - lives as long as the agent
    proc = subprocess.Popen(
        [sys.executable, "-m", "agents", "--control-plane-url", url, "--agent-key", key,
         "--bucket-url", bucket.as_uri(), "--kafka-port", "0", "--http-port", "0",
         "--schema-registry-port", "0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True,
    )  # fmt: skip
    ready = proc.stdout.readline()  # the registry already listens
    match = re.search(r"schema registry on http://[^:]+:(\d+)/", log_path.read_text())
    if not match:
        proc.kill()
        raise RuntimeError(f"agent did not start a schema registry; see {log_path}")
    bootstrap = re.search(r"serving Kafka on (\S+) for", ready)
    assert bootstrap, ready
    return proc, int(match.group(1)), bootstrap.group(1)


def schema(n: int) -> str:
    return json.dumps(
        {"type": "record", "name": f"R{n}", "fields": [{"name": "f", "type": "long"}]}
    )


def in_threads(threads: int, work) -> None:
    running = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for t in running:
        t.start()
    for t in running:
        t.join(300)


def bench_registrations(url: str, schemas: int, threads: int) -> tuple[dict, list[int]]:
    latencies: list[float] = []
    ids: list[int] = []

    def work(t: int) -> None:
        client = SchemaRegistryClient({"url": url, "timeout": 30})
        for n in range(t, schemas, threads):
            started = time.perf_counter()
            ids.append(client.register_schema(f"subject-{n}", Schema(schema(n), "AVRO")))
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    in_threads(threads, work)
    elapsed = time.perf_counter() - started
    assert len(set(ids)) == schemas, "one id per distinct schema"
    return {
        "registrations": schemas,
        "registrations_per_s": round(schemas / elapsed, 1),
        "p99_ms": round(percentile(latencies, 99) * 1000, 2),
    }, ids


def bench_lookups(port: int, ids: list[int], threads: int, seconds: float) -> dict:
    latencies: list[list[float]] = [[] for _ in range(threads)]
    deadline = time.monotonic() + seconds

    def work(t: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        mine = latencies[t]
        n = t
        while time.monotonic() < deadline:
            started = time.perf_counter()
            conn.request("GET", f"/schemas/ids/{ids[n % len(ids)]}")
            answer = conn.getresponse()
            answer.read()
            assert answer.status == 200
            mine.append(time.perf_counter() - started)
            n += threads
        conn.close()

    started = time.perf_counter()
    in_threads(threads, work)
    elapsed = time.perf_counter() - started
    every = [x for per in latencies for x in per]
    return {
        "requests": len(every),
        "requests_per_s": round(len(every) / elapsed, 1),
        "p50_ms": round(percentile(every, 50) * 1000, 3),
        "p99_ms": round(percentile(every, 99) * 1000, 3),
    }


def cpu_seconds(pid: int) -> float:
    """A process's user and system CPU time so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _produce_flat_out(
    bootstrap: str, topic: str, value: bytes, seconds: float, agent_pid: int, compression: str
) -> tuple[float, float]:
    """(MiB/s, agent CPU seconds per MiB) of one producer sending `value` as fast as it
    can for `seconds`."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
         "queue.buffering.max.kbytes": 256 * 1024, "compression.type": compression}
    )  # fmt: skip
    failed: list = []

    def on_delivery(err, _msg) -> None:
        if err is not None:
            failed.append(err)

    sent = 0
    cpu_before = cpu_seconds(agent_pid)
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        try:
            producer.produce(topic, value, on_delivery=on_delivery)
            sent += 1
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    producer.flush(60)
    elapsed = time.perf_counter() - started
    cpu = cpu_seconds(agent_pid) - cpu_before
    assert not failed, failed[:3]
    mib = sent * len(value) / MIB
    return round(mib / elapsed, 2), round(cpu / mib, 5)


def bench_produce(
    bootstrap: str, port: int, seconds: float, rounds: int, agent_pid: int, compression: str
) -> dict:
    topics = {"validated": {"confluent.value.schema.validation": "true"}, "unvalidated": {}}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    created = admin.create_topics([NewTopic(t, 4, 1, config=c) for t, c in topics.items()])
    for future in created.values():
        future.result(30)
    registry = SchemaRegistryClient({"url": f"http://127.0.0.1:{port}"})
    values = {}
    for topic in topics:
        schema_id = registry.register_schema(f"{topic}-value", Schema(schema(0), "AVRO"))
        values[topic] = b"\x00" + schema_id.to_bytes(4, "big") + b"x" * 1019
    results: dict = {
        topic: {"runs_mib_per_s": [], "runs_agent_cpu_s_per_mib": []} for topic in topics
    }
    # Paired and alternated: a shared machine's load drifts; flipping the order each round
    # keeps whatever the first run of a round pays (or leaves to the second) off one side.
    for n in range(rounds):
        order = ("unvalidated", "validated") if n % 2 == 0 else ("validated", "unvalidated")
        for topic in order:
            rate, cpu = _produce_flat_out(
                bootstrap, topic, values[topic], seconds, agent_pid, compression
            )
            results[topic]["runs_mib_per_s"].append(rate)
            results[topic]["runs_agent_cpu_s_per_mib"].append(cpu)
    for topic in topics:
        results[topic]["median_mib_per_s"] = statistics.median(results[topic]["runs_mib_per_s"])
        results[topic]["median_agent_cpu_s_per_mib"] = statistics.median(
            results[topic]["runs_agent_cpu_s_per_mib"]
        )
    on, off = results["validated"], results["unvalidated"]
    pairs = range(rounds)
    rate_costs = [
        100 * (off["runs_mib_per_s"][n] - on["runs_mib_per_s"][n]) / off["runs_mib_per_s"][n]
        for n in pairs
    ]
    cpu_costs = [
        100
        * (on["runs_agent_cpu_s_per_mib"][n] - off["runs_agent_cpu_s_per_mib"][n])
        / on["runs_agent_cpu_s_per_mib"][n]
        for n in pairs
    ]
    results["compression"] = compression
    results["rounds_validation_cost_percent"] = [round(c, 1) for c in rate_costs]
    results["validation_cost_percent"] = round(statistics.median(rate_costs), 1)
    results["rounds_validation_cpu_cost_percent"] = [round(c, 1) for c in cpu_costs]
    results["validation_cpu_cost_percent"] = round(statistics.median(cpu_costs), 1)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--schemas", type=int, default=300)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"]
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="floe-bench-registry-") as tmp:
        data_dir = Path(tmp)
        bucket = data_dir / "bucket"
        bucket.mkdir()
        # FLOE_BENCH_DATABASE: a name of its own where benchmarks share one server.
        env = bench_env(data_dir, os.environ.get("FLOE_BENCH_DATABASE", "floe_bench_registry"))
        django_setup(env)
        from tests.factories import make_cluster

        _, key = make_cluster("bench-registry")
        with control_plane(env) as url:
            agent, port, bootstrap = start_agent(url, key, bucket)
            try:
                registrations, ids = bench_registrations(
                    f"http://127.0.0.1:{port}", args.schemas, args.threads
                )
                lookups = bench_lookups(port, ids, args.threads, args.seconds)
                produce = bench_produce(
                    bootstrap, port, args.seconds, args.rounds, agent.pid, args.compression
                )
            finally:
                agent.terminate()
                agent.wait(15)
    print(
        json.dumps(
            {
                "threads": args.threads,
                "register": registrations,
                "get_schema_by_id": lookups,
                "produce": produce,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
