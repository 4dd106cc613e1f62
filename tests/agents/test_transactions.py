"""Transactions and exactly-once (KIP-98) with real clients against real agents."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from tests.agents.test_confluent_kafka import create_topic

pytestmark = [pytest.mark.kafka, pytest.mark.django_db(transaction=True)]


def read(bootstrap: str, topic: str, isolation: str, *, partitions: int = 1, settle_s=1.5):
    """Values of the topic from offset 0 under `isolation`, polled until quiet."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "reader",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "fetch.wait.max.ms": 50,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    values, quiet_since = [], time.monotonic()
    while time.monotonic() - quiet_since < settle_s:
        msg = consumer.poll(0.1)
        if msg is None:
            continue
        if msg.error():
            raise KafkaException(msg.error())
        values.append(msg.value().decode())
        quiet_since = time.monotonic()
    consumer.close()
    return values


def txn_producer(bootstrap: str, transactional_id: str, **config) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "linger.ms": 5,
            **config,
        }
    )
    producer.init_transactions(20)
    return producer


def test_read_committed_sees_commits_whole_and_never_aborts_or_open_transactions(agent, cluster):
    a = agent(cluster.key)
    create_topic(a.bootstrap, "ledger", partitions=2)
    producer = txn_producer(a.bootstrap, "ledger-writer")

    producer.begin_transaction()
    for i in range(10):
        producer.produce("ledger", f"committed-{i}".encode(), partition=i % 2)
    producer.commit_transaction(20)

    producer.begin_transaction()
    for i in range(5):
        producer.produce("ledger", f"aborted-{i}".encode(), partition=i % 2)
    producer.flush(20)
    producer.abort_transaction(20)

    producer.begin_transaction()
    producer.produce("ledger", b"open", partition=0)
    producer.flush(20)
    # The open transaction holds the LSO: read_committed stops before it.
    committed = read(a.bootstrap, "ledger", "read_committed", partitions=2)
    assert sorted(committed) == sorted(f"committed-{i}" for i in range(10))
    everything = read(a.bootstrap, "ledger", "read_uncommitted", partitions=2)
    assert sorted(everything) == sorted(
        [f"committed-{i}" for i in range(10)] + [f"aborted-{i}" for i in range(5)] + ["open"]
    )
    producer.commit_transaction(20)
    assert "open" in read(a.bootstrap, "ledger", "read_committed", partitions=2, settle_s=1)


def test_consume_transform_produce_commits_outputs_and_offsets_atomically(agent, cluster):
    a = agent(cluster.key)
    create_topic(a.bootstrap, "in", partitions=1)
    create_topic(a.bootstrap, "out", partitions=1)
    source = Producer({"bootstrap.servers": a.bootstrap})
    for i in range(20):
        source.produce("in", str(i).encode())
    assert source.flush(20) == 0

    def consumer() -> Consumer:
        c = Consumer(
            {
                "bootstrap.servers": a.bootstrap,
                "group.id": "doubler",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            }
        )
        c.subscribe(["in"])
        return c

    def step(c: Consumer, producer: Producer, count: int, commit: bool) -> None:
        got = []
        deadline = time.monotonic() + 20
        while len(got) < count and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and not msg.error():
                got.append(msg)
        assert len(got) == count
        producer.begin_transaction()
        for msg in got:
            producer.produce("out", str(int(msg.value()) * 2).encode())
        producer.send_offsets_to_transaction(
            c.position(c.assignment()), c.consumer_group_metadata(), 20
        )
        if commit:
            producer.commit_transaction(20)
        else:
            producer.abort_transaction(20)

    producer = txn_producer(a.bootstrap, "doubler-1")
    c = consumer()
    step(c, producer, 10, commit=True)
    step(c, producer, 10, commit=False)  # the group's offsets stay at 10
    c.close()

    c = consumer()  # a restart resumes from the committed offset
    step(c, producer, 10, commit=True)
    c.close()
    out = read(a.bootstrap, "out", "read_committed")
    assert out == [str(i * 2) for i in range(20)]
    check = Consumer({"bootstrap.servers": a.bootstrap, "group.id": "doubler"})
    assert check.committed([TopicPartition("in", 0)], 10)[0].offset == 20
    check.close()


def test_a_restarted_producer_fences_its_zombie(agent, cluster):
    a = agent(cluster.key)
    create_topic(a.bootstrap, "fenced", partitions=1)
    zombie = txn_producer(a.bootstrap, "singleton")
    zombie.begin_transaction()
    zombie.produce("fenced", b"zombie")
    zombie.flush(20)

    fresh = txn_producer(a.bootstrap, "singleton")  # aborts the zombie's transaction
    fresh.begin_transaction()
    fresh.produce("fenced", b"fresh")
    fresh.commit_transaction(20)

    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(10)
    assert raised.value.args[0].fatal() or "fenced" in str(raised.value).lower()
    assert read(a.bootstrap, "fenced", "read_committed") == ["fresh"]
