"""Kafka clients need nothing but a zone in client.id: confluent-kafka, kafka-python,
aiokafka and kafkajs consume in a group through their zone's agents, even when the
group's coordinator runs in another zone (its zone's front relays); members of one
group in two zones share its partitions."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from agents.groups.ring import GROUP_KEY, score
from tests.agents.clients import confluent_produce, kafkajs
from tests.agents.zone_cluster import metric, start_zones

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka]

RECORDS = 40


@pytest.fixture
def two_zones(agent, cluster):
    """Zones a and b with two agents each, and topic `zc` (4 partitions, 40 records)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    zones = start_zones(agent, cluster.key, {"a": 2, "b": 2})
    bootstrap = zones["a"][0].bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("zc", 4)])["zc"].result(30)
    confluent_produce(
        bootstrap,
        "zc",
        [(f"k{i}".encode(), f"v{i}".encode(), None) for i in range(RECORDS)],
        **{"client.id": "producer,floe_az=a"},
    )
    return zones


def group_coordinated_in(zones, zone: str, prefix: str) -> str:
    """A group id whose coordinator is an agent of `zone`."""
    agents = {a.agent_id: z for z, members in zones.items() for a in members}
    for n in range(1000):
        group = f"{prefix}-{n}"
        owner = max(agents, key=lambda agent_id: score(GROUP_KEY, group, agent_id))
        if agents[owner] == zone:
            return group
    raise AssertionError("no such group id")


def assert_zone_a_only(zones) -> None:
    """Zone b's agents sent zone-a clients no data; zone a relayed group requests."""
    assert all(metric(b, "floe_fetch_bytes_total", client_zone="a") == 0 for b in zones["b"])
    assert sum(metric(a, "floe_fetch_bytes_total", client_zone="a") for a in zones["a"]) > 0
    relayed = sum(metric(a, "floe_group_relays_total", outcome="ok") for a in zones["a"])
    assert relayed > 0
    assert sum(metric(a, "floe_group_relays_total", outcome="failed") for a in zones["a"]) == 0


def test_confluent_kafka_consumes_in_a_group_coordinated_in_another_zone(two_zones):
    from confluent_kafka import Consumer

    group = group_coordinated_in(two_zones, "b", "rdk")
    consumer = Consumer(
        {
            "bootstrap.servers": two_zones["a"][1].bootstrap,
            "client.id": "rdk,floe_az=a",
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe(["zc"])
    got = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                got.append(message.value())
        consumer.commit(asynchronous=False)
        committed = consumer.committed(consumer.assignment(), timeout=10)
    finally:
        consumer.close()
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(RECORDS))
    assert sum(tp.offset for tp in committed) == RECORDS
    assert_zone_a_only(two_zones)


def test_kafka_python_consumes_in_a_group_coordinated_in_another_zone(two_zones):
    from kafka import KafkaConsumer

    group = group_coordinated_in(two_zones, "b", "kp")
    consumer = KafkaConsumer(
        "zc",
        bootstrap_servers=two_zones["a"][0].bootstrap,
        client_id="kp,floe_az=a",
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=2000,
    )
    got = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < RECORDS and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(r.value for r in records)
        consumer.commit()
    finally:
        consumer.close()
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(RECORDS))
    assert_zone_a_only(two_zones)


def test_aiokafka_consumes_in_a_group_coordinated_in_another_zone(two_zones):
    from aiokafka import AIOKafkaConsumer

    group = group_coordinated_in(two_zones, "b", "aio")

    async def run():
        consumer = AIOKafkaConsumer(
            "zc",
            bootstrap_servers=two_zones["a"][0].bootstrap,
            client_id="aio,ws_az=a",
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        got = []
        try:
            deadline = time.monotonic() + 60
            while len(got) < RECORDS and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    got.extend(r.value for r in records)
            await consumer.commit()
        finally:
            await consumer.stop()
        return got

    got = asyncio.run(asyncio.wait_for(run(), 90))
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(RECORDS))
    assert_zone_a_only(two_zones)


def test_kafkajs_consumes_in_a_group_coordinated_in_another_zone(two_zones):
    group = group_coordinated_in(two_zones, "b", "js")
    script = """
const { Kafka, logLevel } = require('kafkajs');
(async () => {
  const kafka = new Kafka({ clientId: 'js,floe_az=a', brokers: [process.env.BOOTSTRAP],
                            logLevel: logLevel.NOTHING });
  const consumer = kafka.consumer({ groupId: process.env.GROUP });
  const got = [];
  await consumer.connect();
  await consumer.subscribe({ topic: 'zc', fromBeginning: true });
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('timed out with ' + got.length)), 60000);
    consumer.run({ eachMessage: async ({ message }) => {
      got.push(message.value.toString());
      if (got.length === Number(process.env.RECORDS)) { clearTimeout(timer); resolve(); }
    } });
  });
  await consumer.disconnect();
  console.log(JSON.stringify({ got }));
})().catch(e => { console.error(e); process.exit(1); });
"""
    env = {
        **os.environ,
        "BOOTSTRAP": two_zones["a"][1].bootstrap,
        "GROUP": group,
        "RECORDS": str(RECORDS),
    }
    result = kafkajs(script, env, timeout=120)
    assert sorted(result["got"]) == sorted(f"v{i}" for i in range(RECORDS))
    assert_zone_a_only(two_zones)


def test_members_of_one_group_in_two_zones_share_its_partitions(two_zones):
    from confluent_kafka import Consumer

    group = group_coordinated_in(two_zones, "b", "split")
    consumers = {
        zone: Consumer(
            {
                "bootstrap.servers": two_zones[zone][0].bootstrap,
                "client.id": f"member,floe_az={zone}",
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "partition.assignment.strategy": "range",
            }
        )
        for zone in ("a", "b")
    }
    got: dict[str, list] = {"a": [], "b": []}
    try:
        for consumer in consumers.values():
            consumer.subscribe(["zc"])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for zone, consumer in consumers.items():
                message = consumer.poll(0.2)
                if message is not None and not message.error():
                    got[zone].append((message.partition(), message.offset()))
            assigned = {z: {tp.partition for tp in c.assignment()} for z, c in consumers.items()}
            both = assigned["a"] and assigned["b"]
            if both and len(got["a"]) + len(got["b"]) >= RECORDS:
                break
    finally:
        for consumer in consumers.values():
            consumer.close()
    # One group, not two: disjoint assignments covering every partition, each record once.
    assert assigned["a"] and assigned["b"] and not assigned["a"] & assigned["b"]
    assert assigned["a"] | assigned["b"] == {0, 1, 2, 3}
    every = got["a"] + got["b"]
    assert len(every) == len(set(every)) == RECORDS
