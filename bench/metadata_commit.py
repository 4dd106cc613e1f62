"""Metadata-store throughput through the real HTTP API against PostgreSQL.

For 1, 8 and 32 concurrent committers, each commit is one file with 100 batches over 50
partitions (of a 256-partition topic): prints commits/s, batches/s and p50/p99 commit
latency. Then fetch-plan calls/s for 100 partitions, for consumers at the tail (the last few
batches of each partition) and catching up (1 MiB per partition from offset 0). Prints one JSON object.

    .venv/bin/python bench/metadata_commit.py [--seconds 10]
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

from common import bench_env, control_plane, django_setup, percentile

PARTITIONS = 256


class Client:
    """A keep-alive HTTP connection to the agent API."""

    def __init__(self, url: str, key: str):
        parts = urlsplit(url)
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        self.headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

    def call(self, name: str, body: bytes) -> dict:
        self.conn.request("POST", f"/agent/v1/{name}", body=body, headers=self.headers)
        response = self.conn.getresponse()
        data = response.read()
        if response.status != 200:
            raise RuntimeError(f"{name}: HTTP {response.status}: {data[:200]!r}")
        return json.loads(data)


def commit_body(cluster_id: str, topic_id: str, n: str, rng: random.Random) -> bytes:
    # Laid out as an agent lays out a segment: each partition's two batches side by side.
    partitions = sorted(rng.sample(range(PARTITIONS), 50))
    batches = [
        {
            "topic_id": topic_id,
            "partition": partitions[i // 2],
            "pos": i * 16384,
            "len": 16384,
            "records": 16,
            "base_ts": 1,
            "max_ts": 2,
            "producer_id": -1,
            "producer_epoch": -1,
            "base_sequence": -1,
        }
        for i in range(100)
    ]
    return json.dumps(
        {"file_key": f"{cluster_id}/segments/{n}.seg", "size": 1638400, "batches": batches}
    ).encode()


def run_commits(url, key, cluster_id, topic_id, committers: int, seconds: float) -> dict:
    latencies: list[float] = []
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def worker(w: int) -> None:
        client, rng, local, i = Client(url, key), random.Random(w), [], 0
        while time.monotonic() < stop_at:
            body = commit_body(cluster_id, topic_id, f"c{committers}-w{w}-{i}", rng)
            started = time.perf_counter()
            answer = client.call("commit", body)
            local.append(time.perf_counter() - started)
            assert answer["batches"][0]["error_code"] == 0, answer
            i += 1
        with lock:
            latencies.extend(local)

    began = time.monotonic()
    threads = [threading.Thread(target=worker, args=(w,)) for w in range(committers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - began
    return {
        "committers": committers,
        "commits_per_s": round(len(latencies) / elapsed, 1),
        "batches_per_s": round(100 * len(latencies) / elapsed, 1),
        "p50_ms": round(percentile(latencies, 50) * 1000, 2),
        "p99_ms": round(percentile(latencies, 99) * 1000, 2),
        "commits": len(latencies),
    }


def fetch_plan_body(topic_id: str, offsets: dict[int, int]) -> bytes:
    partitions = [
        {"topic_id": topic_id, "partition": p, "offset": o, "max_bytes": 1 << 20}
        for p, o in offsets.items()
    ]
    return json.dumps({"partitions": partitions, "max_bytes": 50 << 20}).encode()


def run_fetch_plans(url, key, topic_id, seconds: float, *, tail: bool, clients: int = 4) -> dict:
    """Catch-up (from offset 0: 1 MiB per partition) or tail (the last few batches)."""
    offsets = {p: 0 for p in range(100)}
    if tail:
        answer = Client(url, key).call("fetch-plan", fetch_plan_body(topic_id, offsets))
        offsets = {a["partition"]: max(0, a["high_watermark"] - 40) for a in answer["partitions"]}
    body = fetch_plan_body(topic_id, offsets)
    counts: list[int] = []
    latencies: list[float] = []
    stop_at = time.monotonic() + seconds

    def worker() -> None:
        client, n, local = Client(url, key), 0, []
        while time.monotonic() < stop_at:
            started = time.perf_counter()
            client.call("fetch-plan", body)
            local.append(time.perf_counter() - started)
            n += 1
        counts.append(n)
        latencies.extend(local)

    began = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - began
    return {
        "partitions": 100,
        "from": "tail" if tail else "offset 0",
        "clients": clients,
        "calls_per_s": round(sum(counts) / elapsed, 1),
        "p50_ms": round(percentile(latencies, 50) * 1000, 2),
        "p99_ms": round(percentile(latencies, 99) * 1000, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="duration of each run")
    parser.add_argument("--committers", default="1,8,32")
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="floe-bench-"))
    env = bench_env(data_dir)
    django_setup(env)
    from metadata_store.topics import topic_create
    from tests.factories import make_cluster

    cluster, key = make_cluster("bench")
    topic = topic_create(cluster=cluster, name="bench", num_partitions=PARTITIONS)
    results = {"commit": [], "fetch_plan": []}
    with control_plane(env) as url:
        Client(url, key).call(
            "commit", commit_body(cluster.public_id, str(topic.id), "warm", random.Random(0))
        )
        for n in [int(c) for c in args.committers.split(",")]:
            results["commit"].append(
                run_commits(url, key, cluster.public_id, str(topic.id), n, args.seconds)
            )
            print(json.dumps(results["commit"][-1]), flush=True)
        for tail in (True, False):
            results["fetch_plan"].append(
                run_fetch_plans(url, key, str(topic.id), args.seconds, tail=tail)
            )
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
