"""Invariant 3 for consumer groups: killing the coordinator agent loses no committed
offset; the group re-forms on another agent and resumes where it committed."""

from __future__ import annotations

import time

import pytest

from metadata_store.models import GroupOffset
from tests.agents.groups.members import BackgroundProducer, ConfluentMember, balanced, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka, pytest.mark.timeout(150)]


def brokers_seen(bootstrap: str) -> int:
    from confluent_kafka.admin import AdminClient

    return len(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).brokers)


def describe(bootstrap: str, group: str, timeout_s: float = 15):
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.describe_consumer_groups([group], request_timeout=timeout_s)
    return futures[group].result(timeout_s + 1)


def coordinator_port(bootstrap: str, group: str) -> int | None:
    """The port of the group's coordinator, or None when describing it failed or timed out
    (right after a kill the client may still be sent to the dead agent: ask again)."""
    from concurrent.futures import TimeoutError as FutureTimeout

    from confluent_kafka import KafkaException

    try:
        return describe(bootstrap, group, timeout_s=5).coordinator.port
    except (FutureTimeout, KafkaException):
        return None


def test_the_group_survives_its_coordinator_agent_being_killed(agent, cluster):
    from confluent_kafka.admin import AdminClient, NewTopic

    first, second = agent(cluster.key), agent(cluster.key)
    both = f"{first.bootstrap},{second.bootstrap}"
    # Each agent learns of the other from its next heartbeat (every 3 s).
    wait_until(
        lambda: brokers_seen(first.bootstrap) == 2 and brokers_seen(second.bootstrap) == 2,
        15,
        "the agents see each other",
    )
    admin = AdminClient({"bootstrap.servers": both})
    admin.create_topics([NewTopic("payments", 4, 1)])["payments"].result(30)

    members = [ConfluentMember(f"c{i}", both, "payments-group", "payments") for i in range(2)]
    for m in members:
        m.start()
    wait_until(lambda: balanced(members, 4), 30, "two members share four partitions")
    coordinator = describe(both, "payments-group").coordinator
    doomed, survivor = (first, second) if coordinator.port == first.port else (second, first)
    producer = BackgroundProducer(survivor.bootstrap, "payments", 4, per_tick=8)
    producer.start()
    try:
        wait_until(lambda: all(len(m.records) > 50 for m in members), 20, "consumption runs")

        doomed.kill()
        killed_at = [len(m.records) for m in members]
        time.sleep(0.3)  # a commit already on its way to the control plane lands
        committed_before = {
            o.partition.index: o.committed_offset
            for o in GroupOffset.objects.filter(group_id="payments-group").select_related(
                "partition"
            )
        }
        assert committed_before, "the group had committed before the kill"

        recovered_s = wait_until(
            lambda: (
                balanced(members, 4)
                and (d := describe(survivor.bootstrap, "payments-group")).coordinator.port
                == survivor.port
                and len(d.members) == 2
            ),
            30,
            "the group re-forms on the surviving agent",
        )
        time.sleep(1.0)  # keep producing into the re-formed group
        produced = producer.finish()
        wait_until(
            lambda: {r for m in members for r in m.records} >= produced,
            30,
            "every record consumed after the failover",
        )
    finally:
        producer.stopping.set()
        for m in members:
            if m.is_alive():
                m.stop()
    print(f"recovered {recovered_s:.1f}s after the kill")

    # Resumed from the committed offsets: after the kill, each partition is read again
    # from where the group had committed — not from the start, not past what was read.
    # (A member of the loaded generation may commit its position to the new coordinator
    # as it revokes, before the group re-forms: the group then resumes from there.)
    after_kill: dict[int, int] = {}
    read_before: dict[int, int] = {}
    for member, mark in zip(members, killed_at):
        for partition, offset in member.records[mark:]:
            after_kill[partition] = min(offset, after_kill.get(partition, offset))
        for partition, offset in member.records[:mark]:
            read_before[partition] = max(offset + 1, read_before.get(partition, 0))
    for partition, first_offset in after_kill.items():
        committed = committed_before.get(partition, 0)
        assert committed <= first_offset <= read_before.get(partition, 0), (
            partition,
            first_offset,
            committed,
        )
    committed_after = {
        o.partition.index: o.committed_offset
        for o in GroupOffset.objects.filter(group_id="payments-group").select_related("partition")
    }
    assert all(committed_after[p] >= c for p, c in committed_before.items())
