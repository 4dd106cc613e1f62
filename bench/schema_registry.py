"""The agent's Schema Registry: lookups by id (served from the agent's cache) and
registrations (each through the control plane: a lock on the cluster's registry row).

Starts a control plane (uvicorn, bench database `floe_bench_registry`) and one agent with
a file:// bucket, then:

1. registrations: `--schemas` distinct Avro schemas (default 300), each under its own
   subject, from `--threads` threads (default 4) with confluent-kafka's
   `SchemaRegistryClient`; registrations/s and p99 latency;
2. `GET /schemas/ids/{id}`: `--threads` keep-alive connections asking for the registered
   ids round-robin for `--seconds` (default 5); requests/s and p99 latency.

Prints one JSON object.

    .venv/bin/python bench/schema_registry.py [--schemas 300] [--threads 4] [--seconds 5]
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import ROOT, bench_env, control_plane, django_setup, percentile
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient


def start_agent(url: str, key: str, bucket: Path) -> tuple[subprocess.Popen, int]:
    log_path = bucket.parent / "agent.log"
    log = open(log_path, "wb")  # noqa: SIM115 - lives as long as the agent
    proc = subprocess.Popen(
        [sys.executable, "-m", "agents", "--control-plane-url", url, "--agent-key", key,
         "--bucket-url", bucket.as_uri(), "--kafka-port", "0", "--http-port", "0",
         "--schema-registry-port", "0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True,
    )  # fmt: skip
    proc.stdout.readline()  # the ready line: the registry already listens
    match = re.search(r"schema registry on http://[^:]+:(\d+)/", log_path.read_text())
    if not match:
        proc.kill()
        raise RuntimeError(f"agent did not start a schema registry; see {log_path}")
    return proc, int(match.group(1))


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--schemas", type=int, default=300)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="floe-bench-registry-") as tmp:
        data_dir = Path(tmp)
        bucket = data_dir / "bucket"
        bucket.mkdir()
        env = bench_env(data_dir, "floe_bench_registry")
        django_setup(env)
        from tests.factories import make_cluster

        _, key = make_cluster("bench-registry")
        with control_plane(env) as url:
            agent, port = start_agent(url, key, bucket)
            try:
                registrations, ids = bench_registrations(
                    f"http://127.0.0.1:{port}", args.schemas, args.threads
                )
                lookups = bench_lookups(port, ids, args.threads, args.seconds)
            finally:
                agent.terminate()
                agent.wait(15)
    print(
        json.dumps(
            {"threads": args.threads, "register": registrations, "get_schema_by_id": lookups},
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
