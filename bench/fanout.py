"""Fan-out at the tail: what N tailing consumers cost the control plane (issue 28).

Starts a control plane (uvicorn, database `floe_bench_fanout`) and `--agents` agents
(file:// bucket, 250 ms flushes). For each consumer count (`--consumers`, default
1,10,50,200): that many confluent-kafka consumers, each in its own group, assigned every
partition of a 12-partition topic at its end and spread over the agents, then a paced
producer (`--rate` records/s of 1 KiB, default 500, for `--seconds`, default 15, to the
first agent) whose records carry their send time. Prints one JSON line per count:
agent-API calls by kind during the run (the control plane's `/metrics`), plans from the
agents' tail index and from the control plane (the agents' `/metrics`), end-to-end
latency p50/p99 (send → a consumer's poll), and the fewest and most records a consumer
got (every consumer should get every record once).

`--new-topic` (issue 44): each count gets a topic of its own, created a second before
its consumers assign it — consumers started before the topic's first record —, and
`fetch_plan_calls_since_assign` counts the control plane's fetch plans from the
consumers' start (their first Fetches included), not only while producing.

    .venv/bin/python bench/fanout.py [--consumers 1,10,50,200] [--seconds 15] [--agents 1]
        [--new-topic]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import resource
import struct
import sys
import tempfile
import time
from pathlib import Path

from common import bench_env, control_plane, django_setup, metrics_text, percentile
from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from zones import Agent

PARTITIONS = 12
VALUE_BYTES = 1024
TOPIC = "fanout"
STAMP = struct.Struct(">dq")  # send time (epoch seconds), sequence number


def cpu_seconds(pid: int | None = None) -> float:
    """CPU seconds (user + system) of a process so far: `pid`, or this one (its
    librdkafka threads included)."""
    if pid is None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def api_calls(url: str) -> dict[str, float]:
    """The control plane's agent-API calls so far, by call (every outcome)."""
    text = metrics_text(url)
    calls: dict[str, float] = {}
    for call, value in re.findall(r'floe_agent_api_calls_total\{call="([^"]+)"[^}]*\} (\S+)', text):
        calls[call] = calls.get(call, 0.0) + float(value)
    return calls


def agent_counters(agents: list[Agent]) -> dict[str, float]:
    """The agents' plans by source and long-poll wakes by outcome, summed."""
    counters = {
        source: sum(a.metric("floe_fetch_plans_total", source=source) for a in agents)
        for source in ("tail_index", "control_plane")
    }
    counters["fetches"] = sum(a.metric("floe_requests_total", api="FETCH") for a in agents)
    for outcome in ("records", "empty"):
        counters["wakes_" + outcome] = sum(
            a.metric("floe_fetch_wakes_total", outcome=outcome) for a in agents
        )
    for outcome in ("hit", "kept", "waited"):
        counters["shared_" + outcome] = sum(
            a.metric("floe_fetch_shared_answers_total", outcome=outcome) for a in agents
        )
    return counters


class Tail:
    """One consumer in its own group, at the end of every partition."""

    def __init__(self, bootstrap: str, index: int, topic: str) -> None:
        self.topic = topic
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"fanout-{index}-{time.monotonic_ns()}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 500,
                "queued.max.messages.kbytes": 4096,
            }
        )
        self.consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in range(PARTITIONS)])
        self.seen: set[int] = set()
        self.duplicates = 0
        self.latencies: list[float] = []

    def poll(self, sample: int) -> int:
        got = 0
        for msg in self.consumer.consume(1000, 0):
            if msg.error():
                continue
            sent, seq = STAMP.unpack_from(msg.value())
            if seq in self.seen:
                self.duplicates += 1
                continue
            self.seen.add(seq)
            if seq % sample == 0:
                self.latencies.append(time.time() - sent)
            got += 1
        return got

    def ready(self) -> bool:
        """Every partition has a position (the consumer found the end)."""
        positions = self.consumer.position(
            [TopicPartition(self.topic, p) for p in range(PARTITIONS)]
        )
        return all(tp.offset >= 0 for tp in positions)


def consume(
    topic: str,
    bootstraps: list[str],
    indices: list[int],
    sample: int,
    ready,
    stop,
    progress,
    slot: int,
    results,
    settle_s: float = 0.0,
) -> None:
    """One consumer process (as every service reading a topic is its own): its share of
    the consumers, polled in turn; `progress[slot]` is the fewest records one of them got
    so far; at `stop`, their counts and latencies go to `results`. They are ready once
    each has a position, or, `settle_s` > 0 (a topic with no record yet: no position to
    have), after polling that long."""
    tails = [Tail(bootstraps[i % len(bootstraps)], i, topic) for i in indices]
    sample_every = max(1, sample)
    deadline = time.monotonic() + (settle_s or 60)
    waiting = list(tails)
    while waiting and time.monotonic() < deadline:
        for t in tails:
            t.poll(sample_every)
        if not settle_s:
            waiting = [t for t in waiting if not t.ready()]
        time.sleep(0.05)
    ready.release()
    while not stop.is_set():
        if not sum(t.poll(sample_every) for t in tails):
            time.sleep(0.005)
        progress[slot] = min(len(t.seen) for t in tails)
    results.put(
        (
            [len(t.seen) for t in tails],
            sum(t.duplicates for t in tails),
            [x for t in tails for x in t.latencies],
        )
    )
    for t in tails:
        t.consumer.close()


def create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(name, num_partitions=PARTITIONS, replication_factor=3)
    for future in admin.create_topics([topic], operation_timeout=10).values():
        future.result(15)


def run(url: str, agents: list[Agent], consumers: int, args) -> dict:
    topic = TOPIC
    if args.new_topic:
        topic = f"{TOPIC}-{consumers}-{time.time_ns()}"
        create_topic(agents[0].bootstrap, topic)
        time.sleep(1)  # consumers assign a topic created a second earlier
    calls_at_assign = api_calls(url)
    processes = max(1, min(args.client_processes, consumers))
    sample = max(1, consumers // 10)  # latency of ~10 consumers' worth of records
    mp = multiprocessing.get_context("spawn")  # no fork of a process with librdkafka threads
    ready, stop, results = mp.Semaphore(0), mp.Event(), mp.Queue()
    progress = mp.Array("q", processes)
    bootstraps = [a.bootstrap for a in agents]
    workers = [
        mp.Process(
            target=consume,
            args=(
                topic,
                bootstraps,
                list(range(i, consumers, processes)),
                sample,
                ready,
                stop,
                progress,
                i,
                results,
                2.0 if args.new_topic else 0.0,
            ),
        )
        for i in range(processes)
    ]
    for worker in workers:
        worker.start()
    for _ in workers:
        if not ready.acquire(timeout=120):
            raise SystemExit("fanout: the consumers did not reach the tail in 120 s")
    time.sleep(2)  # every consumer waits at the tail
    calls_before = api_calls(url)
    plans_before = agent_counters(agents)

    def client_cpu() -> float:
        return cpu_seconds() + sum(cpu_seconds(w.pid) for w in workers)

    cpu_before = [cpu_seconds(a.proc.pid) for a in agents], client_cpu()
    wall = time.monotonic()
    producer = Producer({"bootstrap.servers": agents[0].bootstrap, "linger.ms": 5})
    padding = b"x" * (VALUE_BYTES - STAMP.size)
    total = int(args.rate * args.seconds)
    started = time.monotonic()
    for seq in range(total):
        due = started + seq / args.rate
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        producer.produce(topic, STAMP.pack(time.time(), seq) + padding, partition=seq % PARTITIONS)
        producer.poll(0)
    producer.flush(30)
    deadline = time.monotonic() + 30
    while min(progress[:]) < total and time.monotonic() < deadline:
        time.sleep(0.1)
    wall = time.monotonic() - wall
    cpu_after = [cpu_seconds(a.proc.pid) for a in agents], client_cpu()
    calls_after = api_calls(url)
    plans_after = agent_counters(agents)
    stop.set()
    seen: list[int] = []
    duplicates = 0
    latencies: list[float] = []
    for _ in workers:
        counts, dups, lats = results.get(timeout=60)
        seen += counts
        duplicates += dups
        latencies += lats
    for worker in workers:
        worker.join(30)
    calls = {k: int(calls_after.get(k, 0) - calls_before.get(k, 0)) for k in calls_after}
    fetches = plans_after["fetches"] - plans_before["fetches"]
    return {
        "consumers": consumers,
        "agents": len(agents),
        "records_sent": total,
        "records_per_consumer_min": min(seen),
        "records_per_consumer_max": max(seen),
        "duplicates": duplicates,
        "fetch_plan_calls": calls.get("fetch_plan", 0),
        "fetch_plan_calls_since_assign": int(
            calls_after.get("fetch_plan", 0) - calls_at_assign.get("fetch_plan", 0)
        ),
        "commit_calls": calls.get("commit", 0),
        "agent_api_calls": {k: v for k, v in sorted(calls.items()) if v},
        "plans_from_tail_index": int(plans_after["tail_index"] - plans_before["tail_index"]),
        "plans_from_control_plane": int(
            plans_after["control_plane"] - plans_before["control_plane"]
        ),
        "e2e_p50_ms": round(percentile(latencies, 50) * 1000, 1),
        "e2e_p99_ms": round(percentile(latencies, 99) * 1000, 1),
        # Cores busy on average while producing and draining: each agent process, and
        # the clients' (the consumer processes — librdkafka threads and polling — and the
        # producer in this one).
        "agent_cores": [
            round((after - before) / wall, 2)
            for before, after in zip(cpu_before[0], cpu_after[0], strict=True)
        ],
        "client_cores": round((cpu_after[1] - cpu_before[1]) / wall, 2),
        # The agents' CPU per Fetch answered: what the read path costs, load or not.
        "fetches": int(fetches),
        "agent_cpu_us_per_fetch": round(
            (sum(cpu_after[0]) - sum(cpu_before[0])) / max(fetches, 1) * 1e6
        ),
        # Long polls woken by a commit or the feed: re-plans that found records, or none.
        "wakes_with_records": int(plans_after["wakes_records"] - plans_before["wakes_records"]),
        "wakes_empty": int(plans_after["wakes_empty"] - plans_before["wakes_empty"]),
        # Answers encoded once and sent to every identical Fetch at the same tail.
        "shared_answers_kept": int(plans_after["shared_kept"] - plans_before["shared_kept"]),
        "shared_answers_hits": int(plans_after["shared_hit"] - plans_before["shared_hit"]),
        # Fetches that waited for an identical one's answer being built, then took it.
        "shared_answers_waited": int(plans_after["shared_waited"] - plans_before["shared_waited"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--consumers", default="1,10,50,200")
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--rate", type=float, default=500.0, help="records/s of 1 KiB")
    parser.add_argument("--agents", type=int, default=1)
    parser.add_argument(
        "--new-topic",
        action="store_true",
        help="a new topic for each count, created a second before its consumers assign it",
    )
    parser.add_argument(
        "--client-processes",
        type=int,
        default=4,
        help="processes the consumers are spread over (each polls its share in turn)",
    )
    args = parser.parse_args()
    data_dir = Path(tempfile.mkdtemp(prefix="floe-bench-fanout-"))
    env = bench_env(data_dir, database=os.environ.get("FLOE_BENCH_DATABASE", "floe_bench_fanout"))
    django_setup(env)
    from tests.factories import make_cluster

    with control_plane(env) as url:
        _, key = make_cluster("bench-fanout", max_flush_age_ms=250)
        bucket = data_dir / "bucket"
        bucket.mkdir()
        agents = [
            Agent(url, key, bucket.as_uri(), "z", data_dir / f"agent-{i}.log")
            for i in range(args.agents)
        ]
        try:
            if not args.new_topic:
                create_topic(agents[0].bootstrap, TOPIC)
            for count in [int(c) for c in args.consumers.split(",")]:
                print(json.dumps(run(url, agents, count, args)), flush=True)
        finally:
            for agent in agents:
                agent.stop()
    print(f"logs in {data_dir}", file=sys.stderr)


if __name__ == "__main__":
    main()
