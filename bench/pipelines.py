"""Managed pipelines: records a second through a map+filter pipeline on ONE agent.

The real web server and one agent (every role: it serves Kafka and runs the pipeline).
`--records` JSON records of about `--record-bytes` (1 KiB) are produced to a topic of
`--partitions` partitions first; then a pipeline (parse_json → filter → map, to another
topic, exactly-once) is created through the REST API, and its describe is polled until
the agent has committed every record (written, filtered out or dead-lettered: counted
once its transaction commits, as the agent reports them every 2 s to the control plane;
the agent's own /metrics would cost it CPU to render). Records/s counts from the first
records committed to the last; the agent's CPU (user + system, from /proc/<pid>/stat)
over the same records divided by them is its CPU per record — the agent also serves the
pipeline's own Kafka traffic (its fetches and transactional produce), as it would in a
small cluster. The output is then read back (read_committed) and counted.

    .venv/bin/python bench/pipelines.py [--records 200000] [--partitions 4]

One JSON object at the end, with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from common import bench_env, control_plane, django_setup

PIPELINE = """
input:
  kafka: {topics: [bench-in], group: bench-pipeline}
processors:
  - parse_json: {}
  - filter: 'value.n % 10 != 0'
  - map: '{"n": value.n, "double": value.n * 2, "payload": value.payload}'
outputs:
  default: {kafka: {topic: bench-out}}
"""


# A record's fate once its transaction commits: written, filtered out, or dead-lettered.
_COMMITTED = ("records_out", "records_filtered", "records_dead_lettered")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of process `pid` so far (/proc/<pid>/stat, clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _call(url: str, key: str, body: dict | None = None) -> dict:
    """A REST call of the control plane (POST with `body`, else GET)."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        method="POST" if body is not None else "GET",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args(argv)

    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    from produce import create_topic, producer

    data_dir = Path(tempfile.mkdtemp(prefix="floe-bench-"))
    env = bench_env(data_dir, database="floe_bench_pipelines")
    django_setup(env)
    from tests.factories import make_api_key, make_cluster

    cluster, key = make_cluster("bench")
    api_key = make_api_key(cluster.organization)
    bucket = data_dir / "bucket"
    bucket.mkdir()
    padding = "x" * max(0, args.record_bytes - len('{"n":0000000,"payload":""}'))
    results: dict = {
        "records": args.records,
        "record_bytes": args.record_bytes,
        "partitions": args.partitions,
        "pipeline": "parse_json, filter (drops 1 in 10), map; to a topic, exactly-once",
    }
    with control_plane(env) as url:
        log = open(data_dir / "agent.log", "wb")  # noqa: SIM115
        import subprocess

        agent = subprocess.Popen(
            [sys.executable, "-m", "agents", "--control-plane-url", url, "--agent-key", key,
             "--bucket-url", bucket.as_uri(), "--kafka-port", "0", "--http-port", "0",
             "--schema-registry-port", "0", "--batch-timeout", "20"],
            cwd=Path(__file__).resolve().parent.parent, stdout=subprocess.PIPE, stderr=log,
            text=True,
        )  # fmt: skip
        try:
            line = agent.stdout.readline() if agent.stdout else ""
            found = re.search(r"serving Kafka on (\S+) for", line)
            if not found:
                raise RuntimeError(f"agent did not start: {line!r}; see {log.name}")
            bootstrap = found.group(1)
            create_topic(bootstrap, "bench-in", args.partitions)
            create_topic(bootstrap, "bench-out", args.partitions)
            print(f"producing {args.records} records", file=sys.stderr, flush=True)
            p = producer(bootstrap)
            for i in range(args.records):
                value = b'{"n":%d,"payload":"%s"}' % (i, padding.encode())
                while True:
                    try:
                        p.produce("bench-in", value, partition=i % args.partitions)
                        break
                    except BufferError:
                        p.poll(0.05)
            if p.flush(120):
                raise RuntimeError("records not delivered")

            print("creating the pipeline", file=sys.stderr, flush=True)
            cpu_before = _cpu_seconds(agent.pid)
            created = time.monotonic()
            pipelines = f"{url}/api/v1/clusters/{cluster.public_id}/pipelines/"
            _call(
                pipelines,
                api_key,
                {"name": "bench", "config": PIPELINE, "state": "running"},
            )
            first = None
            done = None
            deadline = created + args.timeout
            cpu_first = cpu_before
            while time.monotonic() < deadline:
                described = _call(pipelines + "bench/", api_key)
                # Committed: what the agent counts once a record's transaction commits
                # (it counts records read before they are processed and written).
                seen = sum(described[k] for k in _COMMITTED)
                now = time.monotonic()
                if seen > 0 and first is None:
                    first, cpu_first = now, _cpu_seconds(agent.pid)
                    first_seen = seen
                if seen >= args.records:
                    done = now
                    break
                time.sleep(0.25)
            cpu_after = _cpu_seconds(agent.pid)
            if first is None or done is None:
                raise RuntimeError(f"the pipeline committed {seen} of {args.records} in time")
            counted = args.records - first_seen
            seconds = done - first
            results["seconds_from_create_to_first_record"] = round(first - created, 2)
            results["seconds"] = round(seconds, 2)
            results["records_per_s"] = round(counted / seconds) if seconds > 0 else None
            results["agent_cpu_seconds"] = round(cpu_after - cpu_first, 2)
            results["agent_cpu_us_per_record"] = round(
                (cpu_after - cpu_first) * 1e6 / max(counted, 1), 1
            )
            results["agent_cpu_cores_busy"] = round((cpu_after - cpu_first) / seconds, 2)

            consumer = Consumer(
                {"bootstrap.servers": bootstrap, "group.id": "bench-check",
                 "isolation.level": "read_committed", "enable.auto.commit": False}
            )  # fmt: skip
            consumer.assign(
                [TopicPartition("bench-out", n, OFFSET_BEGINNING) for n in range(args.partitions)]
            )
            expected = sum(1 for i in range(args.records) if i % 10)
            out, quiet = 0, time.monotonic()
            while time.monotonic() - quiet < 3 and out < expected:
                batch = consumer.consume(10_000, 0.5)
                if batch:
                    out += sum(1 for m in batch if m.error() is None)
                    quiet = time.monotonic()
            consumer.close()
            results["output_records"] = out
            results["output_expected"] = expected
        finally:
            agent.terminate()
            agent.wait(30)
    results["load_average"] = os.getloadavg()
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
