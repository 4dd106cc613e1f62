"""The tail feed and tail index (issue 28) with real clients against a real agent and
control plane: consumers at the tail are planned by the agent, not the control plane,
and still get every record once while the partitions change under them."""

from __future__ import annotations

import re
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from metadata_store.models import Agent
from tests.agents.test_confluent_kafka import create_topic

pytestmark = [pytest.mark.kafka, pytest.mark.django_db(transaction=True)]


def plans(agent) -> dict[str, int]:
    """The agent's fetch plans so far, by source."""
    found = re.findall(r'floe_fetch_plans_total\{source="(\w+)"\} ([0-9.e+]+)', agent.metrics())
    return {source: int(float(value)) for source, value in found}


def tailing(bootstrap: str, topic: str, partitions: int, isolation: str = "read_uncommitted"):
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"tail-{isolation}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "fetch.wait.max.ms": 500,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    return consumer


def drain(consumers: list, got: list[list], seconds: float) -> None:
    """Poll every consumer for `seconds`, appending (partition, offset, value)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for consumer, out in zip(consumers, got, strict=True):
            for msg in consumer.consume(500, 0.02):
                if msg.error():
                    raise KafkaException(msg.error())
                out.append((msg.partition(), msg.offset(), msg.value()))


def drain_until(consumers: list, got: list[list], count: int, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while min(len(out) for out in got) < count and time.monotonic() < deadline:
        drain(consumers, got, 0.2)


def test_tailing_consumers_are_planned_by_the_agent_and_get_every_record_once(agent, cluster):
    a = agent(cluster.key)
    create_topic(a.bootstrap, "tail", partitions=3)
    consumers = [tailing(a.bootstrap, "tail", 3, iso) for iso in ("read_uncommitted",) * 3]
    got: list[list] = [[] for _ in consumers]
    drain(consumers, got, 1.0)  # every consumer waits at the (empty) tail
    before = plans(a)
    producer = Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 5})
    sent = []
    for burst in range(20):
        for i in range(15):
            value = f"v{burst}-{i}".encode()
            producer.produce("tail", value, partition=i % 3)
            sent.append(value)
        producer.flush(10)
        drain(consumers, got, 0.1)
    drain_until(consumers, got, len(sent))
    after = plans(a)
    for out in consumers:
        out.close()
    for out in got:
        assert sorted(v for _, _, v in out) == sorted(sent)  # every record, once
        for p in range(3):
            offsets = [o for part, o, _ in out if part == p]
            assert offsets == list(range(len(offsets)))
    from_index = after.get("tail_index", 0) - before.get("tail_index", 0)
    from_control_plane = after.get("control_plane", 0) - before.get("control_plane", 0)
    # At the tail the agent plans; the control plane saw a few plans at most (the first
    # fetches of a partition before the feed brought its first run).
    assert from_index > 50, (from_index, from_control_plane)
    assert from_control_plane <= from_index // 10, (from_index, from_control_plane)
    # The heartbeat carries the counters to the control plane.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        stats = Agent.objects.get(agent_id=a.agent_id).stats or {}
        if stats.get("tail_plans", 0) >= from_index:
            break
        time.sleep(0.5)
    assert stats.get("tail_plans", 0) >= from_index, stats
    assert stats.get("tail_index_partitions", 0) == 3, stats


def test_delete_records_under_tailing_consumers(agent, cluster):
    """DeleteRecords drops the partition from the index: a consumer that comes after
    starts at the new log start, tailing consumers carry on with every new record."""
    a = agent(cluster.key)
    create_topic(a.bootstrap, "trim", partitions=1)
    consumer = tailing(a.bootstrap, "trim", 1)
    got: list[list] = [[]]
    producer = Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 5})
    for i in range(30):
        producer.produce("trim", f"old-{i}".encode(), partition=0)
    producer.flush(10)
    drain_until([consumer], got, 30)
    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    from confluent_kafka import TopicPartition as TP

    for future in admin.delete_records([TP("trim", 0, 20)], request_timeout=10).values():
        future.result(15)
    for i in range(30):
        producer.produce("trim", f"new-{i}".encode(), partition=0)
    producer.flush(10)
    drain_until([consumer], got, 60)
    consumer.close()
    assert [v for _, _, v in got[0]] == [f"old-{i}".encode() for i in range(30)] + [
        f"new-{i}".encode() for i in range(30)
    ]
    late = Consumer(
        {
            "bootstrap.servers": a.bootstrap,
            "group.id": "late",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    late.assign([TopicPartition("trim", 0, 0)])  # below the log start: reset to earliest
    seen: list[list] = [[]]
    drain_until([late], seen, 40)
    late.close()
    assert [o for _, o, _ in seen[0]][:1] == [20]
    assert len(seen[0]) == 40
