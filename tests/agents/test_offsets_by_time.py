"""ListOffsets by timestamp names the exact record, inside multi-record batches and runs:
the first record at or after the target (KIP-79), and for the largest timestamp the
record that carries it (KIP-734) — asked through librdkafka and kafka-python."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaPythonPartition

from metadata_store.models import Batch
from tests.agents.test_confluent_kafka import create_topic

pytestmark = [pytest.mark.kafka, pytest.mark.django_db(transaction=True)]

BASE = 1_700_000_000_000
# Two batches of four records, offsets 0..7.
STAMPS = [BASE + t for t in (1000, 2000, 2000, 3000, 4000, 6000, 5000, 7000)]


def _produce(bootstrap: str) -> None:
    """Two batches of four records (librdkafka cuts a batch at batch.num.messages)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.num.messages": 4})
    for n, stamp in enumerate(STAMPS):
        producer.produce("clock", value=f"v{n}".encode(), partition=0, timestamp=stamp)
    assert producer.flush(20) == 0


# target → (offset, timestamp) Kafka answers; -1 offset: no such record ("end")
CASES = {
    BASE: (0, STAMPS[0]),  # before the first record
    BASE + 1000: (0, STAMPS[0]),  # equal to the first
    BASE + 1500: (1, STAMPS[1]),  # between records of one batch
    BASE + 2000: (1, STAMPS[1]),  # equal to two records: the first of them
    BASE + 3500: (4, STAMPS[4]),  # between the batches
    BASE + 4500: (5, STAMPS[5]),  # a later record's timestamp is not ordered
    BASE + 5500: (5, STAMPS[5]),
    BASE + 7000: (7, STAMPS[7]),  # equal to the last
    BASE + 9000: (-1, -1),  # after the last
}


def test_librdkafka_offsets_for_times_names_the_exact_record(agent, cluster):
    a = agent(cluster.key, batch_timeout_ms=300)  # both batches share a segment: one run
    create_topic(a.bootstrap, "clock", partitions=1)
    _produce(a.bootstrap)
    assert Batch.objects.get().batch_count == 2
    consumer = Consumer({"bootstrap.servers": a.bootstrap, "group.id": "unused"})
    try:
        for target, (offset, _) in CASES.items():
            (found,) = consumer.offsets_for_times([TopicPartition("clock", 0, target)], timeout=10)
            assert found.offset == offset, (target - BASE, found.offset)
    finally:
        consumer.close()


def test_kafka_python_offsets_for_times_and_the_largest_timestamp(agent, cluster):
    a = agent(cluster.key)
    create_topic(a.bootstrap, "clock", partitions=1)
    _produce(a.bootstrap)
    consumer = KafkaConsumer(bootstrap_servers=a.bootstrap)
    tp = KafkaPythonPartition("clock", 0)
    try:
        for target, (offset, stamp) in CASES.items():
            found = consumer.offsets_for_times({tp: target})[tp]
            if offset < 0:
                assert found is None
            else:
                assert (found.offset, found.timestamp) == (offset, stamp), target - BASE
    finally:
        consumer.close()


def test_the_largest_timestamp_is_the_record_that_carries_it(agent, cluster):
    """ListOffsets -3 (KIP-734): offset 7 carries the largest timestamp."""
    from core.kafka import ApiKey
    from tests.agents.test_wire import Wire

    a = agent(cluster.key)
    create_topic(a.bootstrap, "clock", partitions=1)
    _produce(a.bootstrap)
    wire = Wire(a.bootstrap)
    wire.send(
        ApiKey.LIST_OFFSETS,
        7,
        {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [{"name": "clock", "partitions": [{"partition_index": 0, "timestamp": -3}]}],
        },
    )
    _, answer = wire.receive()
    wire.sock.close()
    (partition,) = answer["topics"][0]["partitions"]
    assert (partition["offset"], partition["timestamp"]) == (7, STAMPS[7])
