"""Issue 32's acceptance: confluent-kafka consumers with `group.protocol=consumer`
(KIP-848) against two real agents — the coordinator assigns, rebalances are
incremental, no partition is owned twice (from the members' own callbacks), every
record is read once and the committed offsets are right; a member killed without leaving
loses its partitions after the cluster's session timeout; a classic group reads the same
topic at once; AdminClient lists and describes the group as a consumer-type group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from tests.agents.groups.members import (
    BackgroundProducer,
    ConfluentMember,
    ConsumerProtocolMember,
    Ownership,
    balanced,
    consumed_exactly_once,
    run_group_scenario,
    wait_until,
)
from tests.agents.groups.test_clients import create_topic

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka, pytest.mark.timeout(240)]

SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 500
# How long an admin call may take: an agent answers ListGroups and DescribeGroups after up to
# two metadata-API calls, each bounded at 15 s (agents.control_plane.DEFAULT_TIMEOUT_S), and
# this session's control plane runs in the test process beside the members' threads — on a
# loaded machine a call can take seconds (CI once saw one ListGroups outlast 15 s).
ADMIN_WAIT_S = 60


@pytest.fixture
def two_agents(agent, cluster):
    """Two agents of one cluster whose KIP-848 groups time out members after 6 s."""
    settings = cluster.cluster
    settings.consumer_session_timeout_ms = SESSION_TIMEOUT_MS
    settings.consumer_heartbeat_interval_ms = HEARTBEAT_INTERVAL_MS
    settings.save()
    return agent(cluster.key), agent(cluster.key)


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, p) for p in range(partitions)]
    )
    answer = admin.list_consumer_group_offsets([request])[group].result(15)
    return {tp.partition: tp.offset for tp in answer.topic_partitions}


def ends(produced: set[tuple[int, int]], partitions: int) -> dict[int, int]:
    """The offset after the last produced record of each partition."""
    return {p: max((o for q, o in produced if q == p), default=-1) + 1 for p in range(partitions)}


def test_three_members_on_two_agents_join_leave_and_read_every_record_once(two_agents):
    a, b = two_agents
    create_topic(a.bootstrap, "orders", 6)
    ownership = Ownership()
    made: list[ConsumerProtocolMember] = []

    def make(i: int) -> ConsumerProtocolMember:
        # Members connect through both agents; the group has one coordinator.
        bootstrap = (a, b)[i % 2].bootstrap
        member = ConsumerProtocolMember(
            f"kip848-{i}", bootstrap, "kip848", "orders", ownership=ownership
        )
        made.append(member)
        return member

    result = run_group_scenario(a.bootstrap, "orders", make)
    print(result)
    assert not ownership.violations, ownership.violations[:5]
    produced = {r for m in made for r in m.records}
    assert committed(b.bootstrap, "kip848", "orders", 6) == ends(produced, 6)


def test_a_killed_member_loses_its_partitions_after_the_session_timeout(two_agents, tmp_path):
    a, b = two_agents
    create_topic(a.bootstrap, "ledger", 6)
    ownership = Ownership()
    survivors = [
        ConsumerProtocolMember(f"keep-{i}", (a, b)[i].bootstrap, "k", "ledger", ownership=ownership)
        for i in range(2)
    ]
    script = tmp_path / "member.py"
    script.write_text(KILLED_MEMBER)
    victim = subprocess.Popen(
        [sys.executable, str(script), b.bootstrap],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        for m in survivors:
            m.start()
        held: set[int] = set()

        def follow() -> None:  # the victim's own callbacks, line by line
            for line in victim.stdout:
                word, _, parts = line.strip().partition(" ")
                partitions = {int(p) for p in parts.split(",") if p}
                if word == "assigned":
                    held.update(partitions)
                elif word == "revoked":
                    held.difference_update(partitions)

        threading.Thread(target=follow, daemon=True).start()

        def victim_holds_two() -> bool:
            return len(held) == 2 and sum(len(m.assigned) for m in survivors) == 4

        wait_until(victim_holds_two, 40, "three members hold two partitions each")
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
        killed = time.monotonic()
        took = wait_until(
            lambda: balanced(survivors, 6), SESSION_TIMEOUT_MS / 1000 + 10, "survivors take over"
        )
        # Not before the session timeout: nobody told the coordinator it left.
        assert took >= SESSION_TIMEOUT_MS / 1000 - 1.5, took
        print(f"partitions moved {time.monotonic() - killed:.1f}s after the kill")
        assert not ownership.violations, ownership.violations[:5]
    finally:
        if victim.poll() is None:
            victim.kill()
        for m in survivors:
            if m.is_alive():
                m.stop()
    assert not [e for m in survivors for e in m.errors]


KILLED_MEMBER = """
import sys
from confluent_kafka import Consumer

consumer = Consumer({
    "bootstrap.servers": sys.argv[1], "group.id": "k", "group.protocol": "consumer",
    "client.id": "victim", "auto.offset.reset": "earliest", "enable.auto.commit": False,
})
say = lambda word, tps: print(word, ",".join(str(tp.partition) for tp in tps), flush=True)
consumer.subscribe(
    ["ledger"], on_assign=lambda c, tps: say("assigned", tps),
    on_revoke=lambda c, tps: say("revoked", tps),
)
while True:
    consumer.poll(0.2)
"""


def test_a_classic_and_a_consumer_protocol_group_read_one_topic_at_once(two_agents):
    from confluent_kafka import ConsumerGroupType
    from confluent_kafka.admin import AdminClient, ConfigResource

    a, b = two_agents
    create_topic(a.bootstrap, "events", 4)
    producer = BackgroundProducer(a.bootstrap, "events", 4)
    ownership = Ownership()
    kip848 = [
        ConsumerProtocolMember(
            f"new-{i}", (a, b)[i].bootstrap, "modern", "events", ownership=ownership
        )
        for i in range(2)
    ]
    classic = [
        ConfluentMember(f"old-{i}", (b, a)[i].bootstrap, "classic", "events") for i in range(2)
    ]
    everyone = [*kip848, *classic]
    try:
        producer.start()
        for m in everyone:
            m.start()
        wait_until(lambda: balanced(kip848, 4) and balanced(classic, 4), 40, "both groups share")
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        listed = {g.group_id: g for g in admin.list_consumer_groups().result(ADMIN_WAIT_S).valid}
        assert listed["modern"].type == ConsumerGroupType.CONSUMER
        assert listed["classic"].type == ConsumerGroupType.CLASSIC
        described = admin.describe_consumer_groups(["modern", "classic"])
        modern = described["modern"].result(ADMIN_WAIT_S)
        assert modern.type == ConsumerGroupType.CONSUMER
        assert modern.partition_assignor == "uniform"
        assert sorted(
            tp.partition for m in modern.members for tp in m.assignment.topic_partitions
        ) == [0, 1, 2, 3]
        assert {m.client_id for m in modern.members} == {"new-0", "new-1"}
        assert described["classic"].result(ADMIN_WAIT_S).type == ConsumerGroupType.CLASSIC
        # The cluster's settings, as the broker configs Kafka names them.
        broker = ConfigResource("BROKER", str(admin.list_topics(timeout=10).controller_id))
        configs = admin.describe_configs([broker])[broker].result(ADMIN_WAIT_S)
        assert configs["group.consumer.session.timeout.ms"].value == str(SESSION_TIMEOUT_MS)
        assert configs["group.consumer.heartbeat.interval.ms"].value == str(HEARTBEAT_INTERVAL_MS)
        produced = producer.finish()
        wait_until(
            lambda: all({r for m in g for r in m.records} >= produced for g in (kip848, classic)),
            30,
            "both groups read everything",
        )
    finally:
        producer.stopping.set()
        for m in everyone:
            if m.is_alive():
                m.stop()
    assert not [e for m in everyone for e in m.errors]
    assert not ownership.violations
    consumed_exactly_once(kip848, produced)
    consumed_exactly_once(classic, produced)


def test_the_group_goes_on_when_its_coordinator_agent_is_killed(two_agents):
    """The new coordinator loads the saved group: the members keep their epochs and
    partitions (nobody is revoked), and every record is read once."""
    from tests.agents.groups.test_failover import brokers_seen, coordinator_port, describe

    first, second = two_agents
    both = f"{first.bootstrap},{second.bootstrap}"
    wait_until(
        lambda: brokers_seen(first.bootstrap) == 2 and brokers_seen(second.bootstrap) == 2,
        15,
        "the agents see each other",
    )
    create_topic(both, "payments", 4)
    ownership = Ownership()
    members = [
        ConsumerProtocolMember(f"c{i}", both, "payers", "payments", ownership=ownership)
        for i in range(2)
    ]
    for m in members:
        m.start()
    producer = None
    try:
        wait_until(lambda: balanced(members, 4), 30, "two members share four partitions")
        coordinator = describe(both, "payers").coordinator
        doomed, survivor = (first, second) if coordinator.port == first.port else (second, first)
        producer = BackgroundProducer(survivor.bootstrap, "payments", 4, per_tick=8)
        producer.start()
        wait_until(lambda: all(len(m.records) > 50 for m in members), 20, "consumption runs")
        owners_before, releases_before = dict(ownership.owners), ownership.releases
        doomed.kill()
        wait_until(
            lambda: coordinator_port(survivor.bootstrap, "payers") == survivor.port,
            30,
            "the survivor coordinates the group",
        )
        time.sleep(SESSION_TIMEOUT_MS / 1000)  # members heartbeat the new coordinator
        produced = producer.finish()
        wait_until(
            lambda: {r for m in members for r in m.records} >= produced,
            30,
            "every record consumed after the failover",
        )
        assert ownership.owners == owners_before, "partitions moved during the failover"
        assert ownership.releases == releases_before, "a member was revoked or lost some"
        assert len(describe(survivor.bootstrap, "payers").members) == 2
    finally:
        if producer is not None:
            producer.stopping.set()
        for m in members:
            if m.is_alive():
                m.stop()
    assert not ownership.violations
    assert not [e for m in members for e in m.errors]
    consumed_exactly_once(members, produced)
