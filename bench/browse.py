"""The message browser's cost: browse latency and the connections an agent holds.

Starts a control plane (uvicorn, bench database) and one agent with a file:// bucket,
produces `--records` records to one partition, then asks the REST API for a page of
records (`GET /api/v1/clusters/<id>/topics/<t>/records/?limit=20`, what the console's
message browser asks) `--browses` times in a row, and prints one JSON object:

- `browse_ms`: p50/p99/max of those requests, end to end;
- `agent_to_control_plane_idle`: TCP connections the agent holds open to the web
  server after `--idle` seconds without browsing (its keep-alive connection for
  heartbeats and other calls, and the browse channel's long-poll when there is one).

    cd bench && ../.venv/bin/python browse.py [--browses 200] [--records 100] [--idle 5]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil
from common import bench_env, control_plane, django_setup, percentile
from produce import create_topic, producer, start_agent

TOPIC = "browsed"


def connections_to(pid: int, port: int) -> int:
    """Established TCP connections of process `pid` to local port `port`."""
    return sum(
        1
        for conn in psutil.Process(pid).net_connections(kind="tcp")
        if conn.status == psutil.CONN_ESTABLISHED and conn.raddr and conn.raddr.port == port
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--browses", type=int, default=200)
    parser.add_argument("--records", type=int, default=100)
    parser.add_argument("--idle", type=float, default=5.0)
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="floe-bench-browse-"))
    bucket = data_dir / "bucket"
    bucket.mkdir()
    env = bench_env(data_dir, os.environ.get("FLOE_BENCH_DATABASE", "floe_bench_browse"))
    django_setup(env)
    from tests.factories import make_api_key, make_cluster, make_org

    _, org = make_org("Bench browse")
    cluster, key = make_cluster("bench-browse", org=org, default_partitions=1)
    api_key = make_api_key(org)
    with control_plane(env) as url:
        proc, bootstrap = start_agent(url, key, bucket, 20)
        try:
            create_topic(bootstrap, TOPIC, 1)
            prod = producer(bootstrap)
            for n in range(args.records):
                prod.produce(TOPIC, key=f"k-{n}".encode(), value=json.dumps({"n": n}).encode())
            assert prod.flush(30) == 0
            page = f"{url}/api/v1/clusters/{cluster.public_id}/topics/{TOPIC}/records/?limit=20"
            ask = urllib.request.Request(page, headers={"Authorization": f"Bearer {api_key}"})
            time.sleep(1.0)  # the agent's first heartbeats and channel are in place
            latencies = []
            for _ in range(args.browses):
                started = time.perf_counter()
                with urllib.request.urlopen(ask, timeout=30) as resp:
                    body = json.loads(resp.read())
                latencies.append((time.perf_counter() - started) * 1000)
                assert len(body["records"]) == 20, body
            time.sleep(args.idle)
            port = int(url.rsplit(":", 1)[1])
            result = {
                "browses": args.browses,
                "browse_ms": {
                    "p50": round(percentile(latencies, 50), 2),
                    "p99": round(percentile(latencies, 99), 2),
                    "max": round(max(latencies), 2),
                },
                "agent_to_control_plane_idle": connections_to(proc.pid, port),
            }
            print(json.dumps(result, indent=2))
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
