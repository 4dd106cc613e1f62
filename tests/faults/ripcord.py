"""What the ripcord fault tests share (tests/faults/test_ripcord.py,
test_ripcord_agent_killed.py): their topic, ack latencies from the probe, the agents'
journal drain and metrics, and the figures each adds to the suite's table."""

from __future__ import annotations

import re
import time
import urllib.request

from tests.faults.probe import FAULT_ROW, Outcome, Probe
from tests.faults.world import World

PARTITIONS = 12


def create_topic(world: World, topic: str) -> None:
    """The topic, once every agent lists it and every agent knows the other (a group's
    members bootstrap to either)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": world.bootstrap, "log_level": 0})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    for agent in world.agents:
        one = AdminClient({"bootstrap.servers": agent.bootstrap, "log_level": 0})
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            listed = one.list_topics(topic, timeout=10)
            known = listed.topics[topic].error is None
            if known and len(listed.brokers) == len(world.agents):
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"{agent.bootstrap} does not list {topic} and every agent")


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else 0.0


def ack_latencies(probe: Probe, since: float, until: float = float("inf")) -> list[float]:
    """Ack latencies of the records sent in [since, until)."""
    with probe._lock:
        sent, acked = dict(probe.sent_at), dict(probe.acked_at)
    return [acked[s] - t for s, t in sent.items() if since <= t < until and s in acked]


def longest_ack(probe: Probe, since: float) -> tuple[float, float]:
    """The longest ack latency of the records sent from `since` on, and when (seconds
    after `since`) that record was sent."""
    with probe._lock:
        sent, acked = dict(probe.sent_at), dict(probe.acked_at)
    waits = [(acked[s] - t, t - since) for s, t in sent.items() if t >= since and s in acked]
    return max(waits, default=(0.0, 0.0))


def journals_drained(world: World, timeout_s: float = 180) -> float | None:
    """Seconds until no live agent holds journaled records it has not sequenced (read back
    before that, a record not yet sequenced would count as lost), or None."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        alive = [a for a in world.agents if a.proc.poll() is None]
        if all(agent_metric(a, "floe_journal_unsequenced_bytes") == 0 for a in alive):
            return time.monotonic() - started
        time.sleep(0.5)
    return None


def agent_metric(agent, name: str) -> float:
    with urllib.request.urlopen(agent.http_url + "/metrics", timeout=5) as response:
        text = response.read().decode()
    found = re.search(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def figures_record(request, outcome: Outcome, figures: str) -> None:
    request.node.user_properties.append((FAULT_ROW, outcome.row() + "\n    " + figures))
    print(outcome.row())
    print(figures)
