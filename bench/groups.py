"""What consumer groups cost the metadata store (issue 24), through the real HTTP API.

1,000 groups × 3 members over 3 agents in steady state, as the agents drive the agent
API: each agent renews its groups' leases in one `groups/leases` call a second, reports
its groups every 3 s (`groups/report`), and forwards its members' offset commits — each
member commits its two partitions every `--commit-interval` seconds (5 s: the clients'
auto-commit default) as an `offsets/commit` checked against the lease's epoch and the
saved generation. No heartbeat reaches the store (the coordinator answers them from
memory) and no `groups/save` happens in steady state (one per rebalance step).

Prints the group traffic's calls/s and p50/p99 per call, then `bench/metadata_commit.py`'s
commit figure (100-batch commits at `--committers`) alone and with the groups running
beside it. One JSON object at the end.

    .venv/bin/python bench/groups.py [--seconds 15] [--groups 1000] [--committers 8]

`--heartbeats` measures instead what a member in steady state costs with each group
protocol, with real parts: one agent, `--members` confluent-kafka consumers of one group on
an idle 6-partition topic, first with the classic protocol (heartbeat.interval.ms 3 s,
librdkafka's default), then with KIP-848's `group.protocol=consumer` (the cluster's
consumer_heartbeat_interval_ms, 5 s: Kafka's default). Over `--seconds` of steady state it
counts the agent-API calls the web server answered (its /metrics, by call) and the group
requests the agent answered (the agent's /metrics), less an idle window with no members,
per member per second.

    .venv/bin/python bench/groups.py --heartbeats [--members 6] [--seconds 20]
"""

from __future__ import annotations

import argparse
import gc
import json
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import bench_env, control_plane, django_setup, metrics_text, percentile
from metadata_commit import Client, run_commits

AGENTS, MEMBERS, PARTITIONS = 3, 3, 6


class Calls:
    """Latencies by call, shared by the threads of the group load."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seconds: dict[str, list[float]] = {}

    def timed(self, client: Client, name: str, body: dict) -> dict:
        started = time.perf_counter()
        answer = client.call(name, json.dumps(body).encode())
        took = time.perf_counter() - started
        with self.lock:
            self.seconds.setdefault(name, []).append(took)
        return answer

    def summary(self, elapsed: float) -> dict:
        out = {}
        for name, took in sorted(self.seconds.items()):
            out[name] = {
                "calls_per_s": round(len(took) / elapsed, 1),
                "p50_ms": round(percentile(took, 50) * 1000, 2),
                "p99_ms": round(percentile(took, 99) * 1000, 2),
            }
        out["total_calls_per_s"] = round(sum(len(t) for t in self.seconds.values()) / elapsed, 1)
        return out


def member(group: str, i: int) -> dict:
    return {
        "member_id": f"{group}-m{i}",
        "group_instance_id": None,
        "client_id": f"consumer-{i}",
        "client_host": "/10.0.0.1",
        "session_timeout_ms": 45000,
        "rebalance_timeout_ms": 300000,
        "protocols": [{"name": "range", "metadata": "AAAAAAABAAZvcmRlcnP/////"}],
        "assignment": "AAAAAAABAAZvcmRlcnMAAAACAAAAAAAAAAH/////",
    }


class Agent:
    """One agent's group traffic: its groups' leases, reports and members' commits."""

    def __init__(self, url, key, name, groups, calls, commit_interval_s, stop) -> None:
        self.url, self.key, self.name, self.groups = url, key, name, groups
        self.calls, self.commit_interval_s, self.stop = calls, commit_interval_s, stop
        self.epochs: dict[str, int] = {}

    def setup(self) -> None:
        client = Client(self.url, self.key)
        got = self.calls.timed(
            client, "groups/leases", {"agent_id": self.name, "acquire": self.groups}
        )
        self.epochs = {x["group_id"]: x["epoch"] for x in got["leases"]}
        assert len(self.epochs) == len(self.groups), "every lease taken"
        for group in self.groups:
            members = [member(group, i) for i in range(MEMBERS)]
            saved = self.calls.timed(
                client,
                "groups/save",
                {
                    "agent_id": self.name,
                    "group_id": group,
                    "epoch": self.epochs[group],
                    "generation": 1,
                    "protocol_type": "consumer",
                    "protocol_name": "range",
                    "leader": members[0]["member_id"],
                    "members": members,
                },
            )
            assert saved["error_code"] == 0

    def take_again(self) -> None:
        """Setup outlasts the ttl: take the leases anew (the same agent: the next epoch,
        the saved state kept) just before the load starts renewing them."""
        got = self.calls.timed(
            Client(self.url, self.key),
            "groups/leases",
            {"agent_id": self.name, "acquire": self.groups},
        )
        self.epochs = {x["group_id"]: x["epoch"] for x in got["leases"]}

    def renew_loop(self) -> None:
        client = Client(self.url, self.key)
        renew = [{"group_id": g, "epoch": e} for g, e in self.epochs.items()]
        while not self.stop.wait(1.0):
            answer = self.calls.timed(
                client, "groups/leases", {"agent_id": self.name, "renew": renew}
            )
            assert not answer["lost"], answer["lost"][:3]

    def report_loop(self) -> None:
        client = Client(self.url, self.key)
        reports = [
            {
                "group_id": g,
                "state": "Stable",
                "protocol_type": "consumer",
                "protocol": "range",
                "generation": 1,
                "leader": f"{g}-m0",
                "members": [
                    {
                        "member_id": f"{g}-m{i}",
                        "client_id": f"consumer-{i}",
                        "assignment": [{"topic": "orders", "partitions": [2 * i, 2 * i + 1]}],
                    }
                    for i in range(MEMBERS)
                ],
            }
            for g in self.groups
        ]
        while not self.stop.wait(3.0):
            self.calls.timed(client, "groups/report", {"agent_id": self.name, "groups": reports})

    def commit_loop(self, thread: int, threads: int) -> None:
        """Open loop: this thread's share of the members, each committing every interval."""
        client = Client(self.url, self.key)
        members = [(g, i) for g in self.groups for i in range(MEMBERS)][thread::threads]
        gap = self.commit_interval_s / max(len(members), 1)
        next_at, n = time.monotonic(), 0
        while not self.stop.is_set():
            group, i = members[n % len(members)]
            n += 1
            body = {
                "group_id": group,
                "agent_id": self.name,
                "epoch": self.epochs[group],
                "generation": 1,
                "member_id": f"{group}-m{i}",
                "offsets": [
                    {"topic": "orders", "partition": p, "offset": n} for p in (2 * i, 2 * i + 1)
                ],
            }
            answer = self.calls.timed(client, "offsets/commit", body)
            assert all(o["error_code"] == 0 for o in answer["offsets"]), answer
            next_at += gap
            time.sleep(max(0.0, next_at - time.monotonic()))

    def threads(self, commit_threads: int) -> list[threading.Thread]:
        return [
            threading.Thread(target=self.renew_loop),
            threading.Thread(target=self.report_loop),
            *(
                threading.Thread(target=self.commit_loop, args=(t, commit_threads))
                for t in range(commit_threads)
            ),
        ]


GROUP_REQUESTS = ("HEARTBEAT", "CONSUMER_GROUP_HEARTBEAT", "JOIN_GROUP", "SYNC_GROUP")
_SAMPLE = re.compile(r"^(\w+)\{([^}]*)\} ([0-9.e+]+)$")


def counters(url: str, name: str, label: str) -> dict[str, float]:
    """A counter's value by one of its labels, summed over the others, from /metrics."""
    text = metrics_text(url)
    out: dict[str, float] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match and match.group(1) == name:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2)))
            key = labels.get(label, "")
            out[key] = out.get(key, 0.0) + float(match.group(3))
    return out


def window(cp_url: str, agent_url: str, seconds: float) -> dict[str, dict[str, float]]:
    """Agent-API calls (by call) and the agent's group requests (by API), per second."""
    before = counters(cp_url, "floe_agent_api_calls_total", "call")
    requests = counters(agent_url, "floe_requests_total", "api")
    time.sleep(seconds)
    after = counters(cp_url, "floe_agent_api_calls_total", "call")
    requests_after = counters(agent_url, "floe_requests_total", "api")
    return {
        "agent_api": {k: (v - before.get(k, 0.0)) / seconds for k, v in after.items()},
        "kafka": {
            k: (requests_after.get(k, 0.0) - requests.get(k, 0.0)) / seconds for k in GROUP_REQUESTS
        },
    }


def heartbeat_cost(members: int, seconds: float) -> dict:
    """Steady-state cost per member of the classic and the KIP-848 group protocol."""
    from confluent_kafka import Consumer
    from produce import create_topic, start_agent

    data_dir = Path(tempfile.mkdtemp(prefix="floe-bench-"))
    env = bench_env(data_dir, database="floe_bench_groups")
    django_setup(env)
    from tests.factories import make_cluster

    cluster, key = make_cluster("bench")
    bucket = data_dir / "bucket"
    bucket.mkdir()
    results: dict = {"members": members, "seconds": seconds}
    with control_plane(env) as url:
        agent, bootstrap = start_agent(url, key, bucket, 20)
        try:
            log = (data_dir / "agent-20.log").read_text()
            port = re.search(r"metrics and health on http://[^:]+:(\d+)/", log)
            assert port, "the agent's metrics port is not in its log"
            agent_url = f"http://127.0.0.1:{port.group(1)}"
            create_topic(bootstrap, "idle", PARTITIONS)
            time.sleep(3)
            idle = window(url, agent_url, seconds)
            results["idle"] = idle
            for protocol in ("classic", "consumer"):
                stop = threading.Event()
                held = [0] * members  # each member's partition count, as its thread saw

                def member(i: int, protocol=protocol, stop=stop, held=held) -> None:
                    # One thread owns each consumer (poll, assignment, close): closing
                    # together, each serves its own rebalance.
                    consumer = Consumer(
                        {
                            "bootstrap.servers": bootstrap,
                            "group.id": f"hb-{protocol}",
                            "group.protocol": protocol,
                            "client.id": f"{protocol}-{i}",
                            "enable.auto.commit": False,
                        }
                    )
                    consumer.subscribe(["idle"])
                    while not stop.is_set():
                        consumer.poll(0.2)
                        held[i] = len(consumer.assignment())
                    consumer.close()

                threads = [threading.Thread(target=member, args=(i,)) for i in range(members)]
                for t in threads:
                    t.start()
                print(f"{protocol}: {members} members joining", file=sys.stderr, flush=True)
                deadline = time.monotonic() + 60
                while sum(held) != PARTITIONS:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{protocol}: the group did not settle: {held}")
                    time.sleep(0.2)
                time.sleep(6)  # past the first reports and saves
                steady = window(url, agent_url, seconds)
                stop.set()
                for t in threads:
                    t.join(60)
                per_member = {
                    k: round((v - idle["agent_api"].get(k, 0.0)) / members, 4)
                    for k, v in steady["agent_api"].items()
                }
                groupish = {
                    k: v for k, v in per_member.items() if k.startswith(("groups_", "offsets_"))
                }
                results[protocol] = {
                    # The groups' own calls (leases are one renewal a second per agent,
                    # whatever its groups; saves and commits would show here).
                    "group_calls_per_member_s": {k: v for k, v in groupish.items() if v},
                    "group_calls_total_per_member_s": round(sum(groupish.values()), 4),
                    # Everything else the agent asked meanwhile (its consumers' fetch
                    # plans, metadata), less the idle window: not the group protocol's.
                    "other_calls_per_member_s": {
                        k: v for k, v in per_member.items() if v and k not in groupish
                    },
                    "group_requests_per_member_s": {
                        k: round(v / members, 3) for k, v in steady["kafka"].items() if v
                    },
                }
                print(json.dumps({protocol: results[protocol]}), flush=True)
                time.sleep(3)
        finally:
            agent.terminate()
            agent.wait(15)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="duration of each run")
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--commit-interval", type=float, default=5.0)
    parser.add_argument("--committers", type=int, default=8)
    parser.add_argument("--heartbeats", action="store_true", help="per-member cost instead")
    parser.add_argument("--members", type=int, default=6)
    args = parser.parse_args()
    if args.heartbeats:
        print(json.dumps(heartbeat_cost(args.members, args.seconds), indent=2))
        return
    data_dir = Path(tempfile.mkdtemp(prefix="floe-bench-"))
    env = bench_env(data_dir, database="floe_bench_groups")
    django_setup(env)
    from django.utils import timezone

    from metadata_store.models import Agent as AgentRow
    from metadata_store.topics import topic_create
    from tests.factories import make_cluster

    cluster, key = make_cluster("bench")
    topic_create(cluster=cluster, name="orders", num_partitions=PARTITIONS)
    commit_topic = topic_create(cluster=cluster, name="bench", num_partitions=256)
    names = [f"agent-{a}" for a in range(AGENTS)]
    for name in names:
        AgentRow.objects.create(
            cluster=cluster, agent_id=name, host="127.0.0.1", port=9092,
            last_heartbeat=timezone.now(),
        )  # fmt: skip
    gc.collect()
    gc.freeze()
    results: dict = {"groups": args.groups, "members": args.groups * MEMBERS, "agents": AGENTS}
    with control_plane(env) as url:
        alone = run_commits(
            url, key, cluster.public_id, str(commit_topic.id), args.committers, args.seconds,
            per_batch=False,
        )  # fmt: skip
        results["commit_alone"] = alone
        print(json.dumps({"commit_alone": alone}), flush=True)

        calls, stop = Calls(), threading.Event()
        groups = [f"group-{g}" for g in range(args.groups)]
        agents = [
            Agent(url, key, name, groups[a::AGENTS], calls, args.commit_interval, stop)
            for a, name in enumerate(names)
        ]
        for agent in agents:
            agent.setup()
        for agent in agents:
            agent.take_again()
        calls.seconds.clear()
        threads = [t for agent in agents for t in agent.threads(commit_threads=4)]
        began = time.monotonic()
        for t in threads:
            t.start()
        time.sleep(args.seconds)
        results["group_traffic"] = calls.summary(time.monotonic() - began)
        print(json.dumps({"group_traffic": results["group_traffic"]}), flush=True)
        calls.seconds.clear()
        beside = run_commits(
            url, key, cluster.public_id, str(commit_topic.id), args.committers, args.seconds,
            per_batch=False,
        )  # fmt: skip
        results["group_traffic_beside_commits"] = calls.summary(args.seconds)
        results["commit_with_groups"] = beside
        stop.set()
        for t in threads:
            t.join()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
