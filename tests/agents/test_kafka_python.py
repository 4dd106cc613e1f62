"""kafka-python (a pure-Python client with its own protocol code) against a real agent."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]


def test_messages_round_trip_through_kafka_python(agent, cluster):
    a = agent(cluster.key)
    admin = KafkaAdminClient(bootstrap_servers=a.bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic("events", num_partitions=3, replication_factor=1)])
    finally:
        admin.close()

    producer = KafkaProducer(bootstrap_servers=a.bootstrap, linger_ms=5, acks="all")
    sent = [
        {
            "partition": i % 3,
            "key": None if i % 4 == 0 else b"k%d" % i,
            "value": None if i % 9 == 0 and i % 4 else b"v%d" % i,
            "headers": [("trace", b"t%d" % i)] if i % 2 else [],
        }
        for i in range(150)
    ]
    futures = [producer.send("events", **message) for message in sent]
    producer.flush(20)
    metadata = [f.get(10) for f in futures]
    producer.close()
    for partition in range(3):
        offsets = [m.offset for m in metadata if m.partition == partition]
        assert offsets == list(range(50))

    consumer = KafkaConsumer(
        bootstrap_servers=a.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100
    )
    consumer.assign([TopicPartition("events", p) for p in range(3)])
    consumer.seek_to_beginning()
    received = []
    deadline = time.monotonic() + 20
    while len(received) < len(sent) and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            received.extend(records)
    consumer.close()

    assert len(received) == len(sent)
    for partition in range(3):
        got = [r for r in received if r.partition == partition]
        want = [m for m in sent if m["partition"] == partition]
        assert [r.offset for r in got] == list(range(len(want)))
        assert [(r.key, r.value, list(r.headers)) for r in got] == [
            (m["key"], m["value"], m["headers"]) for m in want
        ]


def test_kafka_python_sees_offsets_and_end_offsets(agent, cluster):
    a = agent(cluster.key)
    producer = KafkaProducer(bootstrap_servers=a.bootstrap)
    for i in range(7):
        producer.send("auto-made", value=b"%d" % i, partition=0)
    producer.flush(20)
    producer.close()

    consumer = KafkaConsumer(bootstrap_servers=a.bootstrap, enable_auto_commit=False)
    tp = TopicPartition("auto-made", 0)
    assert consumer.beginning_offsets([tp]) == {tp: 0}
    assert consumer.end_offsets([tp]) == {tp: 7}
    consumer.close()
