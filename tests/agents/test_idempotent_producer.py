"""The idempotent producer against real agents: its batches are written in the order it
sent them, each once, whatever a request waits for before it is appended, and with
several of its requests in flight at once."""

from __future__ import annotations

import json
import threading
import time

import pytest

from tests.agents.clients import confluent_consume
from tests.agents.faults import FaultyProxy

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka]


def _idempotent_producer(bootstrap: str, errors: list, **config):
    """An idempotent confluent-kafka producer whose client-level errors go to `errors`."""
    from confluent_kafka import Producer

    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "message.timeout.ms": 60000,
            "error_cb": lambda err: errors.append(err),
            **config,
        }
    )


def test_a_request_that_waits_before_it_is_appended_keeps_its_place(agent, cluster, live_server):
    """A produce request that waits for its topic (the agent's cache dropped it — this
    agent changed the topic's configs — and the by-name lookup is slow; an entry that
    merely expired no longer waits: agents/topics.py answers it stale) while a later request of the same connection finds the topic
    fresh (a full listing came back meanwhile) is still appended first: otherwise the later
    batch is committed first, is refused OUT_OF_ORDER_SEQUENCE_NUMBER, and librdkafka,
    which has just had the earlier one acknowledged, stops for good ("sequence
    desynchronization with broker")."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    slow_names = threading.Event()

    def hold(path: str, body: bytes) -> float:
        if slow_names.is_set() and path.endswith("/topics/list"):
            return 3.0 if json.loads(body).get("names") else 0.0
        return 0.0

    proxy = FaultyProxy(live_server.url, hold=hold)
    try:
        a = agent(cluster.key, control_plane_url=proxy.url)
        delivered: list = []
        errors: list = []
        producer = _idempotent_producer(a.bootstrap, errors, **{"linger.ms": 0})

        delivered_at: dict = {}

        def done(err, msg) -> None:
            delivered.append(err or msg.value())
            delivered_at[msg.value()] = time.monotonic()

        producer.produce("in-order", value=b"0", partition=0, on_delivery=done)
        assert producer.flush(30) == 0 and delivered == [b"0"], delivered
        # This agent changes the topic: it forgets its entry, so the next lookup waits.
        admin = AdminClient({"bootstrap.servers": a.bootstrap})
        change = ConfigResource(ConfigResource.Type.TOPIC, "in-order")
        change.set_config("retention.ms", "86400000")
        for future in admin.alter_configs([change]).values():
            future.result(30)

        slow_names.set()
        sent_1 = time.monotonic()
        producer.produce("in-order", value=b"1", partition=0, on_delivery=done)
        producer.poll(0.3)  # sent; the agent is looking its topic up by name (3 s)
        # Another client lists every topic: the agent's cache is fresh again at once.
        listed = AdminClient({"bootstrap.servers": a.bootstrap}).list_topics(timeout=10)
        assert "in-order" in listed.topics
        producer.produce("in-order", value=b"2", partition=0, on_delivery=done)
        producer.flush(30)
        slow_names.clear()

        assert not [e for e in errors if e.fatal()], errors
        assert delivered == [b"0", b"1", b"2"], delivered
        # The first request did wait for its topic (else this proves nothing).
        assert delivered_at[b"1"] - sent_1 >= 2.5, delivered_at[b"1"] - sent_1
        got = confluent_consume(a.bootstrap, "in-order", [0], 3)
        assert [m.value() for m in got] == [b"0", b"1", b"2"]
    finally:
        proxy.close()


def test_pipelined_small_batches_over_several_partitions_are_written_once_in_order(agent, cluster):
    """librdkafka keeps up to five requests of a partition in flight while fewer than five
    of its records are: with batches of one or two records it pipelines. Every record is
    then stored once, in the order sent, in each partition — the agent appends and commits
    a connection's requests in order and the store takes each batch right after the one
    before."""
    from confluent_kafka.admin import AdminClient, NewTopic

    a = agent(cluster.key)
    topic, partitions, per_partition = "pipelined", 4, 300
    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    most_in_flight = [0]  # records of a partition in flight, at most
    errors: list = []
    delivered: list = []

    def stats(text: str) -> None:
        # Records in flight per partition: more than a batch holds is several requests.
        for p in json.loads(text)["topics"].get(topic, {}).get("partitions", {}).values():
            most_in_flight[0] = max(most_in_flight[0], p["msgs_inflight"])

    producer = _idempotent_producer(
        a.bootstrap,
        errors,
        **{"linger.ms": 1, "batch.num.messages": 2, "statistics.interval.ms": 100},
        stats_cb=stats,
    )
    for n in range(per_partition):
        for p in range(partitions):
            producer.produce(
                topic,
                value=b"%d:%d" % (p, n),
                partition=p,
                on_delivery=lambda err, msg: delivered.append(err or msg.value()),
            )
        producer.poll(0)
        if n % 25 == 0:
            producer.poll(0.02)  # a little at a time: small batches, several in flight
    assert producer.flush(60) == 0
    assert not errors, errors[:3]
    assert len(delivered) == partitions * per_partition
    assert all(isinstance(d, bytes) for d in delivered), [
        d for d in delivered if not isinstance(d, bytes)
    ][:3]
    assert most_in_flight[0] > 2, "librdkafka never had two requests of a partition in flight"

    got = confluent_consume(a.bootstrap, topic, list(range(partitions)), partitions * per_partition)
    for p in range(partitions):
        values = [m.value() for m in got if m.partition() == p]
        assert values == [b"%d:%d" % (p, n) for n in range(per_partition)], p
