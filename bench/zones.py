"""The read path per zone: object-store GETs per MiB delivered, cross-zone bytes, and
catch-up speed as a zone grows.

Starts a control plane (uvicorn, database `floe_bench_zones`), a writer agent in zone
`w` and, per bucket (file:// and s3:// on moto's server over HTTP), two zones of two
agents. The writer produces `--mib` MiB of incompressible 16 KiB records to an
8-partition topic (8 MiB segments); then `--consumers` consumers per zone, each naming
its zone in client.id, read the whole topic from the beginning at the same time.
Per zone it reports, from the agents' own counters (`/metrics`):

- GET requests and GET bytes per MiB of the topic (the data each zone needs once;
  targets ≤ 1 request/MiB with 4 MiB chunks, ≤ 1.1 bytes/byte) and per MiB delivered
  to consumers (which read it `--consumers` times);
- bytes sent to aligned clients across zones (target 0);
- with `--baseline`: the same zone with the distributed cache off (`--zone-cache
  false`), i.e. every agent reading for itself, as before.

Then catch-up: 1, 2 and 4 fresh agents in one zone, `--consumers` consumers reading the
topic from the beginning; MiB/s delivered. Prints one JSON object.

    .venv/bin/python bench/zones.py [--mib 64] [--consumers 8] [--buckets file,s3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from common import ROOT, bench_env, control_plane, django_setup, free_port
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

MIB = 1024 * 1024
PARTITIONS = 8
VALUE_BYTES = 16 * 1024
TOPIC = "zones"


class Agent:
    """One agent process on a free port, in a zone."""

    def __init__(self, url: str, key: str, bucket_url: str, zone: str, log: Path, extra=()):
        self.zone = zone
        self.http_port = free_port()
        self.log = open(log, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agents", "--control-plane-url", url, "--agent-key", key,
             "--bucket-url", bucket_url, "--kafka-port", "0", "--http-port", str(self.http_port),
             "--schema-registry-port", "0",
             "--zone", zone, "--batch-timeout", "250", *extra],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=self.log, text=True,
        )  # fmt: skip
        line = self.proc.stdout.readline()
        found = re.search(r"serving Kafka on (\S+) for", line)
        if not found:
            self.proc.kill()
            raise RuntimeError(f"agent did not start: {line!r}; see {log}")
        self.bootstrap = found.group(1)

    def metric(self, name: str, **labels: str) -> float:
        url = f"http://127.0.0.1:{self.http_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
        total = 0.0
        for line in text.splitlines():
            head, _, value = line.rpartition(" ")
            metric_name = head.split("{", 1)[0]
            if metric_name == name and all(f'{k}="{v}"' in head for k, v in labels.items()):
                total += float(value)
        return total

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


def brokers(bootstrap: str, client_id: str) -> set[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": client_id})
    return {f"{b.host}:{b.port}" for b in admin.list_topics(timeout=10).brokers.values()}


def wait_for_zones(agents: list[Agent], timeout: float = 30.0) -> None:
    """Until each agent lists exactly its zone's agents to a client of that zone."""
    deadline = time.monotonic() + timeout
    while True:
        if all(
            brokers(a.bootstrap, f"probe,floe_az={a.zone}")
            == {b.bootstrap for b in agents if b.zone == a.zone}
            for a in agents
        ):
            return
        if time.monotonic() > deadline:
            raise RuntimeError("agents did not learn each other")
        time.sleep(0.5)


def produce(bootstrap: str, mib: int) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "client.id": "writer,floe_az=w", "linger.ms": 100,
         "batch.size": MIB, "queue.buffering.max.kbytes": 256 * 1024, "acks": "all"}
    )  # fmt: skip
    blob = os.urandom(VALUE_BYTES * 64)
    count = mib * MIB // VALUE_BYTES
    for i in range(count):
        start = (i * 4099) % (len(blob) - VALUE_BYTES)  # distinct values, cheaply
        while True:
            try:
                producer.produce(TOPIC, blob[start : start + VALUE_BYTES])
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(300):
        raise RuntimeError("produce did not finish")
    return count


def read_everything(bootstrap_list: list[str], zone: str, consumers: int, records: int) -> dict:
    """`consumers` consumers (spread over the given agents) read the whole topic."""
    delivered = [0] * consumers

    def read(i: int) -> None:
        consumer = Consumer(
            {"bootstrap.servers": bootstrap_list[i % len(bootstrap_list)],
             "client.id": f"reader-{i},floe_az={zone}", "group.id": "bench-unused",
             "enable.auto.commit": False, "queued.max.messages.kbytes": 16384}
        )  # fmt: skip
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        seen, deadline = 0, time.monotonic() + 600
        try:
            while seen < records and time.monotonic() < deadline:
                for message in consumer.consume(1000, 0.5):
                    if not message.error():
                        seen += 1
                        delivered[i] += len(message.value())
        finally:
            consumer.close()
        if seen < records:
            raise RuntimeError(f"reader {i} got {seen} of {records} records")

    started = time.perf_counter()
    threads = [threading.Thread(target=read, args=(i,)) for i in range(consumers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - started
    return {"seconds": round(seconds, 2), "delivered_bytes": sum(delivered)}


def zone_numbers(agents: list[Agent], topic_bytes: int, delivered: int) -> dict:
    requests = sum(a.metric("floe_object_store_get_requests_total") for a in agents)
    get_bytes = sum(a.metric("floe_object_store_get_bytes_total") for a in agents)
    return {
        "agents": len(agents),
        "get_requests": int(requests),
        "get_mib": round(get_bytes / MIB, 2),
        "get_requests_per_topic_mib": round(requests / (topic_bytes / MIB), 3),
        "get_bytes_per_topic_byte": round(get_bytes / topic_bytes, 3),
        "get_requests_per_delivered_mib": round(requests / (delivered / MIB), 4),
        "get_bytes_per_delivered_byte": round(get_bytes / delivered, 4),
        "peer_served_mib": round(
            sum(a.metric("floe_peer_served_bytes_total") for a in agents) / MIB, 2
        ),
        "cross_zone_bytes": int(
            sum(a.metric("floe_fetch_bytes_total", cross_zone="true") for a in agents)
        ),
    }


def run_bucket(url: str, key: str, bucket_url: str, logs: Path, args) -> dict:
    """Writer + zones a and b (2 agents each): GETs per MiB and cross-zone bytes."""
    started: list[Agent] = []

    def start(zone: str, *extra: str) -> Agent:
        agent = Agent(url, key, bucket_url, zone, logs / f"agent-{len(started)}.log", extra)
        started.append(agent)
        return agent

    try:
        writer = start("w")
        zones = {z: [start(z), start(z)] for z in ("a", "b")}
        if args.baseline:
            zones["a-no-zone-cache"] = [start("c", "--zone-cache", "false") for _ in range(2)]
        wait_for_zones(started)
        records = produce(writer.bootstrap, args.mib)
        topic_bytes = records * VALUE_BYTES
        result: dict = {"bucket": bucket_url.split("?")[0], "topic_mib": args.mib, "zones": {}}
        runs = {}
        threads = []
        for name, agents in zones.items():
            zone = agents[0].zone

            def one(name=name, agents=agents, zone=zone):
                runs[name] = read_everything(
                    [a.bootstrap for a in agents], zone, args.consumers, records
                )

            threads.append(threading.Thread(target=one))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for name, agents in zones.items():
            delivered = runs[name]["delivered_bytes"]
            result["zones"][name] = {
                "consumers": args.consumers,
                "delivered_mib": round(delivered / MIB, 1),
                **zone_numbers(agents, topic_bytes, delivered),
            }
        return result
    finally:
        for agent in started:
            agent.stop()


def run_catch_up(url: str, key: str, bucket_url: str, logs: Path, args) -> dict:
    """Catch-up MiB/s with 1, 2 and 4 fresh agents in one zone."""
    out = {}
    writer = Agent(url, key, bucket_url, "w", logs / "catchup-writer.log")
    try:
        wait_for_zones([writer])
        records = produce(writer.bootstrap, args.mib)
    finally:
        writer.stop()
    for count in (1, 2, 4):
        agents = [
            Agent(url, key, bucket_url, f"c{count}", logs / f"catchup-{count}-{i}.log")
            for i in range(count)
        ]
        try:
            wait_for_zones(agents)
            run = read_everything(
                [a.bootstrap for a in agents], f"c{count}", args.consumers, records
            )
            out[f"{count}_agents"] = {
                "mib_per_s": round(run["delivered_bytes"] / MIB / run["seconds"], 1),
                **run,
                "get_mib": round(
                    sum(a.metric("floe_object_store_get_bytes_total") for a in agents) / MIB, 2
                ),
            }
        finally:
            for agent in agents:
                agent.stop()
    return out


@contextlib.contextmanager
def moto_bucket():
    sys.path.insert(0, str(ROOT))
    from tests.fixtures_s3 import REGION, create_bucket, moto_s3_server

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto logs every request
    with moto_s3_server() as endpoint:
        yield f"s3://{create_bucket(endpoint)}?endpoint={endpoint}&region={REGION}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=64, help="size of the topic")
    parser.add_argument("--consumers", type=int, default=8, help="consumers per zone")
    parser.add_argument("--buckets", default="file,s3")
    parser.add_argument("--baseline", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--catch-up", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="floe-bench-zones-"))
    env = bench_env(data_dir, database="floe_bench_zones")
    django_setup(env)
    from tests.factories import make_cluster

    results: dict = {"value_bytes": VALUE_BYTES, "partitions": PARTITIONS, "runs": []}
    with control_plane(env) as url:
        for kind in args.buckets.split(","):
            _, key = make_cluster(f"bench-zones-{kind}", max_flush_age_ms=250)
            if kind == "file":
                folder = data_dir / f"bucket-{kind}"
                folder.mkdir()
                results["runs"].append(run_bucket(url, key, folder.as_uri(), data_dir, args))
            else:
                with moto_bucket() as bucket_url:
                    results["runs"].append(run_bucket(url, key, bucket_url, data_dir, args))
            print(json.dumps(results["runs"][-1]), file=sys.stderr, flush=True)
        if args.catch_up:
            _, key = make_cluster("bench-zones-catch-up", max_flush_age_ms=250)
            folder = data_dir / "bucket-catch-up"
            folder.mkdir()
            results["catch_up_file"] = run_catch_up(url, key, folder.as_uri(), data_dir, args)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
