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
"""

from __future__ import annotations

import argparse
import gc
import json
import tempfile
import threading
import time
from pathlib import Path

from common import bench_env, control_plane, django_setup, percentile
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="duration of each run")
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--commit-interval", type=float, default=5.0)
    parser.add_argument("--committers", type=int, default=8)
    args = parser.parse_args()
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
