"""Metadata-store throughput through the real HTTP API against PostgreSQL.

For 1, 8 and 32 concurrent committers, each commit is one file with 100 batches over 50
partitions (of a 256-partition topic), sent as agents send it — each partition's two
batches one entry (`batch_count`), or with `--per-batch` an entry per batch, the shape of
idempotent producers' batches — to the web server as `make run` starts it (uvicorn,
``controlplane.asgi``): prints commits/s, batches/s and p50/p99 commit latency. Then
fetch-plan calls/s for 100 partitions, for consumers at the tail (the last few batches of
each partition) and catching up (1 MiB per partition from offset 0). Prints one JSON object.

    .venv/bin/python bench/metadata_commit.py [--seconds 10] [--committers 1,8,32] [--per-batch]

With `--ha`, the commits (no fetch plans) against the replicated metadata PostgreSQL
(tests/ha/cluster.py: three Patroni nodes, synchronous replication, WAL archived to a moto
S3 bucket, fsync on) and against one such node alone, in one sitting, in `--rounds` rounds
(3) of a fresh run of this script each, the order flipped every round; prints each run,
the medians and the ratios (three nodes over one).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import socket
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import msgspec
from common import bench_env, control_plane, django_setup, percentile

PARTITIONS = 256


class Client:
    """A keep-alive HTTP/1.1 connection to the agent API, kept as thin as a client can be
    (one send per request, the answer's headers split by hand): the client shares the two
    cores with the server and the database, and what it spends is not the server's speed.
    """

    def __init__(self, url: str, key: str):
        parts = urlsplit(url)
        self.sock = socket.create_connection((parts.hostname, parts.port), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.head = (
            f"Host: {parts.hostname}:{parts.port}\r\nAuthorization: Bearer {key}\r\n"
            "Content-Type: application/json\r\n"
        ).encode()
        self.buffer = b""

    def call(self, name: str, body: bytes) -> dict:
        self.sock.sendall(
            b"POST /agent/v1/%s HTTP/1.1\r\n%sContent-Length: %d\r\n\r\n%s"
            % (name.encode(), self.head, len(body), body)
        )
        while b"\r\n\r\n" not in self.buffer:
            self._read()
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        length = next(
            int(line.split(b":", 1)[1])
            for line in lines
            if line.lower().startswith(b"content-length:")
        )
        while len(self.buffer) < length:
            self._read()
        data, self.buffer = self.buffer[:length], self.buffer[length:]
        if status != 200:
            raise RuntimeError(f"{name}: HTTP {status}: {data[:200]!r}")
        return msgspec.json.decode(data)

    def _read(self) -> None:
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buffer += chunk


def commit_batches(topic_id: str, rng: random.Random, *, per_batch: bool = False) -> list[dict]:
    """A commit's entries as an agent sends them for 100 batches over 50 partitions, each
    partition's two batches side by side: one entry per partition covering both
    (`batch_count`, as for producers without a producer id), or with `per_batch` one
    entry per batch (as for idempotent producers' batches)."""
    partitions = sorted(rng.sample(range(PARTITIONS), 50))
    if per_batch:
        return [
            {"topic_id": topic_id, "partition": partitions[i // 2], "pos": i * 16384,
             "len": 16384, "records": 16, "base_ts": 1, "max_ts": 2}
            for i in range(100)
        ]  # fmt: skip
    return [
        {"topic_id": topic_id, "partition": p, "pos": i * 32768, "len": 32768, "records": 32,
         "base_ts": 1, "max_ts": 2, "batch_count": 2}
        for i, p in enumerate(partitions)
    ]  # fmt: skip


class CommitBodies:
    """Commit bodies with fresh file keys, cheap to make: the entries are serialized once
    (a pool of layouts per committer), so the client's CPU — on the same cores as the
    server — goes to HTTP, not to JSON."""

    def __init__(self, cluster_id: str, topic_id: str, name: str, *, per_batch: bool = False):
        rng = random.Random(name)
        self.layouts = [
            json.dumps(commit_batches(topic_id, rng, per_batch=per_batch)).encode()
            for _ in range(32)
        ]
        self.prefix = f'{{"file_key": "{cluster_id}/segments/{name}-'.encode()
        self.n = 0

    def next(self) -> bytes:
        self.n += 1
        layout = self.layouts[self.n % len(self.layouts)]
        return b'%s%d.seg", "size": 1638400, "batches": %s}' % (self.prefix, self.n, layout)


def run_commits(
    url, key, cluster_id, topic_id, committers: int, seconds: float, *, per_batch: bool
) -> dict:
    latencies: list[float] = []
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def worker(w: int) -> None:
        client, local = Client(url, key), []
        bodies = CommitBodies(cluster_id, topic_id, f"c{committers}-w{w}", per_batch=per_batch)
        while time.monotonic() < stop_at:
            body = bodies.next()
            started = time.perf_counter()
            answer = client.call("commit", body)
            local.append(time.perf_counter() - started)
            assert answer["batches"][0]["error_code"] == 0, answer
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
        "entries": "per batch" if per_batch else "per partition run",
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
    parser.add_argument(
        "--per-batch",
        action="store_true",
        help="one commit entry per batch (idempotent producers' shape), not per partition run",
    )
    parser.add_argument(
        "--ha",
        action="store_true",
        help="compare a synchronous three-node Patroni cluster with one node (commits only)",
    )
    parser.add_argument(
        "--synchronous-commit",
        default="remote_write",
        choices=["on", "remote_write"],
        help="with --ha: PostgreSQL's synchronous_commit on both clusters",
    )
    parser.add_argument("--rounds", type=int, default=3, help="with --ha: rounds of each")
    parser.add_argument("--skip-fetch-plans", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ha:
        compare_ha(args)
        return
    data_dir = Path(tempfile.mkdtemp(prefix="floe-bench-"))
    env = bench_env(data_dir)
    django_setup(env)
    from metadata_store.topics import topic_create
    from tests.factories import make_cluster

    cluster, key = make_cluster("bench")
    topic = topic_create(cluster=cluster, name="bench", num_partitions=PARTITIONS)
    results = {"commit": [], "fetch_plan": []}
    # The client's heap (Django, loaded to make the cluster) stays out of the collector's
    # walks: a full collection pauses every committer thread at once.
    gc.collect()
    gc.freeze()
    with control_plane(env) as url:
        warm = CommitBodies(cluster.public_id, str(topic.id), "warm")
        for _ in range(20):
            Client(url, key).call("commit", warm.next())
        for n in [int(c) for c in args.committers.split(",")]:
            results["commit"].append(
                run_commits(
                    url,
                    key,
                    cluster.public_id,
                    str(topic.id),
                    n,
                    args.seconds,
                    per_batch=args.per_batch,
                )
            )
            print(json.dumps(results["commit"][-1]), flush=True)
        for tail in () if args.skip_fetch_plans else (True, False):
            results["fetch_plan"].append(
                run_fetch_plans(url, key, str(topic.id), args.seconds, tail=tail)
            )
    print(json.dumps(results, indent=2))


def compare_ha(args: argparse.Namespace) -> None:
    """This benchmark's commits on one Patroni node and on three (synchronous), both
    clusters up side by side, each run a child of this script with `DATABASE_URL` at that
    cluster's primary; `--rounds` rounds, the order flipped every round (the machine's
    load moves), each figure the median of its rounds."""
    import contextlib
    import logging
    import os
    import statistics
    import subprocess
    import sys

    from common import ROOT

    sys.path.insert(0, str(ROOT))
    from tests.ha.cluster import ha_cluster

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    command = [sys.executable, __file__, "--seconds", str(args.seconds),
               "--committers", args.committers, "--skip-fetch-plans"]  # fmt: skip
    if args.per_batch:
        command.append("--per-batch")
    labels = {"one node": 1, "three nodes, synchronous": 3}
    runs: dict[str, list[list[dict]]] = {label: [] for label in labels}
    with contextlib.ExitStack() as stack:
        urls = {}
        for label, nodes in labels.items():
            cluster = stack.enter_context(
                ha_cluster(nodes=nodes, fsync=True, synchronous_commit=args.synchronous_commit)
            )
            urls[label] = cluster.node_dsn(cluster.primary(), "postgres")
        for n in range(args.rounds):
            for label in list(labels)[:: 1 if n % 2 == 0 else -1]:
                done = subprocess.run(
                    command, env={**os.environ, "DATABASE_URL": urls[label]}, cwd=ROOT,
                    check=True, capture_output=True, text=True, timeout=180 + 10 * args.seconds,
                )  # fmt: skip
                runs[label].append(json.loads(done.stdout[done.stdout.index("{\n") :])["commit"])
                for row in runs[label][-1]:
                    print(json.dumps({"round": n + 1, "database": label, **row}), flush=True)

    def median(label: str) -> list[dict]:
        rows = list(zip(*runs[label], strict=True))  # per committers, a row per round
        return [
            {"committers": same[0]["committers"],
             "commits_per_s": statistics.median(r["commits_per_s"] for r in same),
             "p99_ms": statistics.median(r["p99_ms"] for r in same)}
            for same in rows
        ]  # fmt: skip

    one, three = median("one node"), median("three nodes, synchronous")
    ratios = [
        {
            "committers": a["committers"],
            "commits_per_s_ratio": round(b["commits_per_s"] / a["commits_per_s"], 2),
            "p99_ratio": round(b["p99_ms"] / a["p99_ms"], 2),
        }
        for a, b in zip(one, three, strict=True)
    ]
    print(json.dumps({"one_node": one, "three_nodes": three, "ratios": ratios}, indent=2))


if __name__ == "__main__":
    main()
