"""Managed pipelines run by real agents with the `pipelines` role, configured through the
control plane's REST API, read and written with confluent-kafka (read_committed).

The exactly-once test: 100,000 records (1 in 50 not JSON; 70,000 before it starts, the
rest once version 2 runs) through a pipeline that parses JSON, drops a field, routes by
a field to two topics and dead-letters what does not parse, on two pipelines-role
agents — one SIGKILLed in the middle, and a second configuration version (which also
stamps `v: 2` on each record) deployed while it runs.
Every output holds exactly the expected records, each once; per input partition the
records of version 1 all come before those of version 2."""

from __future__ import annotations

import json
import re
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from rest_framework.test import APIClient

from tests import factories
from tests.agents.clients import committed_offsets, create_topic

pytestmark = [pytest.mark.kafka, pytest.mark.django_db(transaction=True)]

RECORDS = 100_000
FIRST_PART = 70_000  # produced before the pipeline starts; the rest after version 2 runs
PARTITIONS = 4
BAD_EVERY = 50

ROUTER_V1 = """
input:
  kafka: {topics: [orders], group: orders-router}
processors:
  - parse_json: {}
  - remove: [secret]
  - route:
      cases:
        - {when: 'value.region == "eu"', output: eu}
      default: us
outputs:
  eu: {kafka: {topic: orders-eu}}
  us: {kafka: {topic: orders-us}}
errors:
  dead_letter: {topic: orders-dlq}
"""
# Version 2: the same, and every record it writes says so.
ROUTER_V2 = ROUTER_V1.replace("  - remove: [secret]\n", "  - remove: [secret]\n  - set: {v: '2'}\n")


def _api(cluster) -> APIClient:
    api = APIClient()
    api.credentials(
        HTTP_AUTHORIZATION=f"Bearer {factories.make_api_key(cluster.cluster.organization)}"
    )
    return api


def _pipelines_url(cluster) -> str:
    return f"/api/v1/clusters/{cluster.public_id}/pipelines/"


def _records_in(agents, pipeline: str) -> float:
    """What the live agents' /metrics say they read for `pipeline`."""
    pattern = re.compile(
        rf'floe_pipeline_records_total{{[^}}]*kind="in"[^}}]*pipeline="{pipeline}"[^}}]*}} (\S+)'
        rf'|floe_pipeline_records_total{{[^}}]*pipeline="{pipeline}"[^}}]*kind="in"[^}}]*}} (\S+)'
    )
    total = 0.0
    for a in agents:
        if a.proc.poll() is None:
            for found in pattern.finditer(a.metrics()):
                total += float(found.group(1) or found.group(2))
    return total


def _committed(bootstrap: str, group: str, topic: str) -> int:
    """The offsets `group` committed on `topic`, summed (a partition without one counts 0)."""
    offsets = committed_offsets(bootstrap, group, topic, PARTITIONS, timeout_s=10)
    return sum(max(offset, 0) for offset in offsets.values())


def _wait(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.2)


def _produce_orders(bootstrap: str, first: int, end: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all"})
    for i in range(first, end):
        if i % BAD_EVERY == 7:
            value = b"{not json " + str(i).encode()
        else:
            region = "eu" if i % 3 else "us"
            value = b'{"id":%d,"region":"%s","secret":"s%d"}' % (i, region.encode(), i)
        while True:
            try:
                producer.produce("orders", value, key=str(i).encode(), partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0


def read_committed(
    bootstrap: str | dict, partitions: dict[str, int], expected: int, timeout_s: float
):
    """Every record of the topics (name → partitions; read_committed), by topic, once
    `expected` arrived in all and a second passed without more (so a duplicate would be
    seen), or at `timeout_s`. `bootstrap`: an address, or librdkafka settings (a login)."""
    where = bootstrap if isinstance(bootstrap, dict) else {"bootstrap.servers": bootstrap}
    consumer = Consumer(
        {
            **where,
            "group.id": "check",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 100,
        }
    )
    consumer.assign(
        [TopicPartition(t, p, OFFSET_BEGINNING) for t, n in partitions.items() for p in range(n)]
    )
    found: dict[str, list] = {t: [] for t in partitions}
    count = 0
    deadline = time.monotonic() + timeout_s
    quiet_since = time.monotonic()
    try:
        while time.monotonic() < deadline:
            if count >= expected and time.monotonic() - quiet_since > 1.0:
                break
            for msg in consumer.consume(5000, 0.2):
                if msg.error():
                    raise KafkaException(msg.error())
                found[msg.topic()].append(msg)
                count += 1
                quiet_since = time.monotonic()
    finally:
        consumer.close()
    return found


def test_routes_drop_fields_and_dead_letters_exactly_once_through_a_kill_and_a_new_version(
    agent, cluster
):
    serving = agent(cluster.key)  # every role: serves Kafka, runs pipelines
    runner = agent(cluster.key, extra=["--roles", "pipelines"])
    bootstrap = serving.bootstrap
    create_topic(bootstrap, "orders", PARTITIONS)
    for name in ("orders-eu", "orders-us"):
        create_topic(bootstrap, name, 2)
    create_topic(bootstrap, "orders-dlq", 1)
    started = time.monotonic()
    _produce_orders(bootstrap, 0, FIRST_PART)
    print(f"produced {FIRST_PART} in {time.monotonic() - started:.1f}s")

    api = _api(cluster)
    answer = api.post(
        _pipelines_url(cluster),
        {"name": "orders-router", "config": ROUTER_V1, "state": "running"},
        format="json",
    )
    assert answer.status_code == 201, answer.content
    started = time.monotonic()
    agents = [serving, runner]
    _wait(lambda: _records_in(agents, "orders-router") >= 25_000, 60, "25,000 records read")
    runner.kill()  # in the middle of its transactions
    print(f"killed the second runner at {time.monotonic() - started:.1f}s")
    # The survivor takes the dead runner's partitions over and finishes the first part.
    # (Not a count of records read: the dead runner's count goes with it, and the
    # survivor's own may end anywhere from 35,000 to 70,000 depending on how far each
    # had got — 45,000 timed out in 1 run of 8.)
    _wait(
        lambda: _committed(bootstrap, "orders-router", "orders") == FIRST_PART,
        60,
        f"the pipeline's group to commit all {FIRST_PART} records of the first part",
    )
    answer = api.post(
        _pipelines_url(cluster) + "orders-router/configurations/",
        {"config": ROUTER_V2},
        format="json",
    )
    assert answer.status_code == 201, answer.content
    print(f"version 2 at {time.monotonic() - started:.1f}s")

    def survivor_on_version_2() -> bool:
        described = api.get(_pipelines_url(cluster) + "orders-router/").json()
        return any(
            a["agent_id"] == serving.agent_id and a["version"] == 2 for a in described["agents"]
        )

    # The rest once the survivor runs version 2 (so it surely writes some: a fast run
    # could otherwise finish every record before the switch).
    _wait(survivor_on_version_2, 30, "the survivor to report version 2")
    _produce_orders(bootstrap, FIRST_PART, RECORDS)
    print(f"produced the other {RECORDS - FIRST_PART} at {time.monotonic() - started:.1f}s")

    bad = {i for i in range(RECORDS) if i % BAD_EVERY == 7}
    eu = {i for i in range(RECORDS) if i not in bad and i % 3}
    us = {i for i in range(RECORDS) if i not in bad and not i % 3}
    got = read_committed(bootstrap, {"orders-eu": 2, "orders-us": 2, "orders-dlq": 1}, RECORDS, 90)
    got_eu, got_us, got_dlq = got["orders-eu"], got["orders-us"], got["orders-dlq"]
    print(f"read every output at {time.monotonic() - started:.1f}s")

    versions: dict[int, list[tuple[int, int]]] = {}  # input partition → (id, version) in order
    for messages, region, wanted in ((got_eu, "eu", eu), (got_us, "us", us)):
        ids = []
        for msg in messages:
            value = json.loads(msg.value())
            assert value["region"] == region and "secret" not in value, value
            assert msg.key() == str(value["id"]).encode()
            ids.append(value["id"])
            versions.setdefault(value["id"] % PARTITIONS, []).append(
                (value["id"], int(value.get("v", 1)))
            )
        assert len(ids) == len(set(ids)), f"{region}: {len(ids) - len(set(ids))} doubled"
        assert set(ids) == wanted, f"{region}: {len(wanted - set(ids))} missing"
    dead = [int(m.key()) for m in got_dlq]
    assert sorted(dead) == sorted(bad)
    headers = dict(got_dlq[0].headers())
    assert headers["floe.source.topic"] == b"orders" and b"not JSON" in headers["floe.error"]

    # The switch: version 2 wrote records, and in each input partition (read in order
    # by one owner at a time) no version-1 record follows a version-2 one.
    assert any(v == 2 for seq in versions.values() for _, v in seq), "version 2 never ran"
    for partition, seq in versions.items():
        ordered = [v for _, v in sorted(seq)]
        assert ordered == sorted(ordered), f"partition {partition}: v1 after v2"

    # The survivor reports version 2 running, and the dead letters it wrote.
    described = api.get(_pipelines_url(cluster) + "orders-router/").json()
    assert described["version"] == 2
    (survivor,) = [a for a in described["agents"] if a["agent_id"] == serving.agent_id]
    assert survivor["version"] == 2 and survivor["state"] == "running", survivor
    assert 0 < survivor["records_dead_lettered"] <= len(bad)
