"""Agent groups: two groups of two agents in one cluster. A client of a group only ever
learns that group's agents (Metadata, DescribeCluster, FindCoordinator), yet produces
and consumes every topic, those created through the other group too; one consumer group
with a member in each agent group shares its partitions under one coordinator; and
killing every agent of one group leaves the other group's clients working."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from tests.agents.clients import confluent_produce, kafkajs
from tests.agents.zone_cluster import metric

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka]

RECORDS = 20


def broker_ports(bootstrap: str) -> set[int]:
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {b.port for b in metadata.brokers.values()}


def wait_for_views(groups: dict[str, list], timeout_s: float = 30.0) -> None:
    """Until every agent lists exactly its group's agents."""
    deadline = time.monotonic() + timeout_s
    while True:
        seen = {a.port: broker_ports(a.bootstrap) for agents in groups.values() for a in agents}
        if all(
            seen[a.port] == {x.port for x in agents} for agents in groups.values() for a in agents
        ):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"views did not settle: {seen}")
        time.sleep(0.5)


def consume_all(bootstrap: str, topic: str, group: str, count: int) -> list[bytes]:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
        }
    )
    got: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                got.append(message.value())
    finally:
        consumer.close()
    return got


def aiokafka_consume(bootstrap: str, topic: str, group: str) -> tuple[list[bytes], set[int]]:
    """The topic's records through a group of one aiokafka member, and the brokers its
    Metadata named."""
    from aiokafka import AIOKafkaConsumer

    async def run() -> tuple[list[bytes], set[int]]:
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest"
        )
        await consumer.start()
        got: list[bytes] = []
        try:
            deadline = time.monotonic() + 30
            while len(got) < RECORDS and time.monotonic() < deadline:
                for batch in (await consumer.getmany(timeout_ms=500)).values():
                    got.extend(r.value for r in batch)
            brokers = {b.port for b in consumer._client.cluster.brokers()}
        finally:
            await consumer.stop()
        return got, brokers

    return asyncio.run(asyncio.wait_for(run(), 60))


KAFKAJS_SCRIPT = """
const { Kafka, logLevel } = require('kafkajs');
(async () => {
  const kafka = new Kafka({ clientId: 'js', brokers: [process.env.BOOTSTRAP],
                            logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  const ports = (await admin.describeCluster()).brokers.map(b => b.port);
  await admin.disconnect();
  const consumer = kafka.consumer({ groupId: process.env.GROUP });
  const got = [];
  await consumer.connect();
  await consumer.subscribe({ topic: process.env.TOPIC, fromBeginning: true });
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('timed out with ' + got.length)), 40000);
    consumer.run({ eachMessage: async ({ message }) => {
      got.push(message.value.toString());
      if (got.length === Number(process.env.RECORDS)) { clearTimeout(timer); resolve(); }
    } });
  });
  await consumer.disconnect();
  console.log(JSON.stringify({ ports, got }));
})().catch(e => { console.error(e); process.exit(1); });
"""


def records(tag: str) -> list[tuple[bytes, bytes, None]]:
    return [(f"k{i}".encode(), f"{tag}-{i}".encode(), None) for i in range(RECORDS)]


def schema_registries_per_group(cluster, groups: dict[str, list]) -> dict[str, set[str]]:
    """The cluster's Schema Registry URLs per agent group, once every agent's heartbeat
    has reported its registry (the REST cluster's `schema_registries`)."""
    from metadata_store.selectors import schema_registries

    deadline = time.monotonic() + 15
    while True:
        listed = {s.agent_group: set(s.urls) for s in schema_registries(cluster.cluster)}
        if sum(map(len, listed.values())) == sum(map(len, groups.values())):
            return listed
        if time.monotonic() > deadline:
            raise AssertionError(f"registries not all listed: {listed}")
        time.sleep(0.2)


def test_clients_of_a_group_see_only_its_agents_and_reach_every_topic(agent, cluster):
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    groups = {
        name: [agent(cluster.key, extra=["--agent-group", name]) for _ in range(2)]
        for name in ("east", "west")
    }
    wait_for_views(groups)
    east, west = groups["east"], groups["west"]
    east_ports, west_ports = {a.port for a in east}, {a.port for a in west}
    east_admin = AdminClient({"bootstrap.servers": east[0].bootstrap})
    west_admin = AdminClient({"bootstrap.servers": west[1].bootstrap})
    assert {n.port for n in east_admin.describe_cluster().result(15).nodes} == east_ports
    assert {n.port for n in west_admin.describe_cluster().result(15).nodes} == west_ports
    registries = schema_registries_per_group(cluster, groups)
    assert registries == {name: {a.registry_url for a in agents} for name, agents in groups.items()}
    # Each group's Schema Registry clients use its URLs; the subjects are the cluster's.
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    east_registry = SchemaRegistryClient({"url": sorted(registries["east"])[0]})
    west_registry = SchemaRegistryClient({"url": sorted(registries["west"])[0]})
    schema_id = east_registry.register_schema("made-in-east-value", Schema('"string"', "AVRO"))
    assert west_registry.get_latest_version("made-in-east-value").schema_id == schema_id

    # Topics created through one group, written and read through the other.
    east_admin.create_topics([NewTopic("made-in-east", 2)])["made-in-east"].result(30)
    west_admin.create_topics([NewTopic("made-in-west", 2)])["made-in-west"].result(30)
    confluent_produce(west[0].bootstrap, "made-in-east", records("w"))
    confluent_produce(east[1].bootstrap, "made-in-west", records("e"))
    expected_w = sorted(v for _, v, _ in records("w"))
    expected_e = sorted(v for _, v, _ in records("e"))
    assert sorted(consume_all(east[0].bootstrap, "made-in-east", "g-east", RECORDS)) == expected_w
    assert sorted(consume_all(west[1].bootstrap, "made-in-west", "g-west", RECORDS)) == expected_e

    # One consumer group, a member in each agent group: one coordinator, partitions shared.
    members = {
        name: Consumer(
            {
                "bootstrap.servers": agents[0].bootstrap,
                "group.id": "across",
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 100,
                "client.id": name,
            }
        )
        for name, agents in groups.items()
    }
    got: dict[str, list[bytes]] = {"east": [], "west": []}
    try:
        for member in members.values():
            member.subscribe(["made-in-east"])
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            for name, member in members.items():
                message = member.poll(0.2)
                if message is not None and not message.error():
                    got[name].append(message.value())
            shared = all(len(m.assignment()) == 1 for m in members.values())
            if shared and len(got["east"]) + len(got["west"]) >= RECORDS:
                break
        assert all(len(m.assignment()) == 1 for m in members.values())
        assert sorted(got["east"] + got["west"]) == expected_w
        assert got["east"] and got["west"]
        # Each member was told a coordinator of its own agent group (the lease holder,
        # or its group's front relaying to it), and both see the same two members.
        for admin, ports in ((east_admin, east_ports), (west_admin, west_ports)):
            described = admin.describe_consumer_groups(["across"])["across"].result(15)
            assert described.coordinator.port in ports
            assert sorted(m.client_id for m in described.members) == ["east", "west"]
        # The member whose agent group does not hold the lease went through a relay.
        relayed = sum(metric(a, "floe_group_relays_total", outcome="ok") for a in east + west)
        assert relayed > 0
    finally:
        for member in members.values():
            member.close()

    # aiokafka and kafkajs of the west group: only west's agents, every topic.
    got_aio, aio_brokers = aiokafka_consume(west[1].bootstrap, "made-in-east", "aio-west")
    assert sorted(got_aio) == expected_w and aio_brokers == west_ports
    result = kafkajs(
        KAFKAJS_SCRIPT,
        {**os.environ, "BOOTSTRAP": west[0].bootstrap, "TOPIC": "made-in-east",
         "GROUP": "js-west", "RECORDS": str(RECORDS)},
        timeout=90,
    )  # fmt: skip
    assert set(result["ports"]) == west_ports
    assert sorted(result["got"]) == sorted(v.decode() for v in expected_w)

    # Every agent of the west group dies: the east group's clients carry on, every topic.
    for agent_process in west:
        agent_process.kill()
    confluent_produce(east[0].bootstrap, "made-in-west", records("after"))
    after = consume_all(east[1].bootstrap, "made-in-west", "g-after", 2 * RECORDS)
    assert sorted(after) == sorted(expected_e + [v for _, v, _ in records("after")])
    assert broker_ports(east[1].bootstrap) == east_ports


def test_an_agent_of_another_group_cannot_start_with_a_key_limited_to_a_group(agent, cluster):
    from virtualclusters.services import agent_key_create

    _, key = agent_key_create(cluster=cluster.cluster, name="east only", agent_group="east")
    refused = agent(key, extra=["--agent-group", "west"], wait=False)
    assert refused.proc.wait(30) == 1
    assert refused.logs().strip().splitlines()[-1] == (
        "floe-agent: registration refused: register: HTTP 403: this agent key is limited "
        "to agent group 'east'; the agent is in 'west'"
    )
    admitted = agent(key, extra=["--agent-group", "east"])
    assert "agent group east" in admitted.logs()
