"""librdkafka (confluent-kafka) against real agents and the real control plane."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

pytestmark = [pytest.mark.kafka, pytest.mark.django_db(transaction=True)]


def create_topic(bootstrap: str, name: str, partitions: int, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(name, num_partitions=partitions, replication_factor=3, config=configs)
    for future in admin.create_topics([topic], operation_timeout=10).values():
        future.result(15)


def consume_all(bootstrap: str, topic: str, partitions: int, count: int, timeout_s: float = 20):
    """Every message of the topic from offset 0 (manual assignment, no group)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",  # librdkafka wants one; assign() never joins it
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    messages = []
    deadline = time.monotonic() + timeout_s
    while len(messages) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            raise KafkaException(msg.error())
        messages.append(msg)
    consumer.close()
    return messages


def produce(bootstrap: str, messages: list[dict], **config) -> list:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})
    reports = []

    def on_delivery(err, msg):
        reports.append((err, msg.partition(), msg.offset()))

    for message in messages:
        producer.produce(on_delivery=on_delivery, **message)
        producer.poll(0)
    assert producer.flush(20) == 0
    return reports


def test_messages_round_trip_with_keys_headers_and_null_values(agent, cluster):
    a = agent(cluster.key)
    create_topic(a.bootstrap, "orders", partitions=4)
    sent = [
        {
            "topic": "orders",
            "partition": i % 4,
            "key": None if i % 7 == 0 else f"key-{i}".encode(),
            "value": None if i % 5 == 0 else f"value-{i}".encode() * (1 + i % 3),
            "headers": [("n", str(i).encode()), ("empty", None)] if i % 2 else None,
        }
        for i in range(400)
    ]
    reports = produce(a.bootstrap, sent)
    assert all(err is None for err, _, _ in reports)

    received = consume_all(a.bootstrap, "orders", 4, len(sent))
    assert len(received) == len(sent)
    by_partition: dict[int, list] = {}
    for msg in received:
        by_partition.setdefault(msg.partition(), []).append(msg)
    for partition, messages in by_partition.items():
        expected = [m for m in sent if m["partition"] == partition]
        # Offsets are dense from 0 and the order is the send order.
        assert [m.offset() for m in messages] == list(range(len(expected)))
        for got, want in zip(messages, expected, strict=True):
            assert got.key() == want["key"]
            assert got.value() == want["value"]
            assert (got.headers() or None) == (
                [(k, v) for k, v in want["headers"]] if want["headers"] else None
            )


def test_an_idempotent_producer_gets_dense_offsets(agent, cluster):
    a = agent(cluster.key)
    create_topic(a.bootstrap, "payments", partitions=2)
    messages = [{"topic": "payments", "partition": i % 2, "value": b"%d" % i} for i in range(300)]
    reports = produce(a.bootstrap, messages, **{"enable.idempotence": True, "acks": "all"})
    assert all(err is None for err, _, _ in reports)
    for partition in (0, 1):
        offsets = sorted(o for _, p, o in reports if p == partition)
        assert offsets == list(range(150))


def test_one_agent_serves_what_another_agent_wrote(agent, cluster):
    writer, reader = agent(cluster.key), agent(cluster.key)
    assert writer.agent_id != reader.agent_id
    create_topic(writer.bootstrap, "shared", partitions=3)
    produce(writer.bootstrap, [{"topic": "shared", "value": b"m%d" % i} for i in range(90)])

    received = consume_all(reader.bootstrap, "shared", 3, 90)
    assert sorted(m.value() for m in received) == sorted(b"m%d" % i for i in range(90))


def test_list_offsets_earliest_latest_and_by_timestamp(agent, cluster):
    a = agent(cluster.key)
    create_topic(a.bootstrap, "clock", partitions=1)
    base = 1_700_000_000_000
    produce(
        a.bootstrap,
        [
            {"topic": "clock", "partition": 0, "value": b"x", "timestamp": base + i * 1000}
            for i in range(10)
        ],
        **{"linger.ms": 0, "batch.num.messages": 1},  # one batch per record: exact lookups
    )
    consumer = Consumer(
        {"bootstrap.servers": a.bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    try:
        assert consumer.get_watermark_offsets(TopicPartition("clock", 0), timeout=10) == (0, 10)
        found = consumer.offsets_for_times([TopicPartition("clock", 0, base + 4500)], timeout=10)
        assert found[0].offset == 5
        found = consumer.offsets_for_times([TopicPartition("clock", 0, base)], timeout=10)
        assert found[0].offset == 0
        found = consumer.offsets_for_times([TopicPartition("clock", 0, base + 99_000)], timeout=10)
        assert found[0].offset == -1  # no such record: "end"
    finally:
        consumer.close()


def test_admin_operations(agent, cluster):
    a = agent(cluster.key)
    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    create_topic(a.bootstrap, "admin-t", partitions=1, **{"retention.ms": "3600000"})

    duplicate = admin.create_topics([NewTopic("admin-t", 1, 1)])["admin-t"]
    with pytest.raises(KafkaException) as exc:
        duplicate.result(10)
    assert exc.value.args[0].name() == "TOPIC_ALREADY_EXISTS"

    admin.create_partitions([NewPartitions("admin-t", 3)])["admin-t"].result(10)
    metadata = admin.list_topics(timeout=10)
    assert len(metadata.topics["admin-t"].partitions) == 3
    assert metadata.cluster_id == cluster.public_id
    assert list(metadata.brokers) == [metadata.controller_id]

    resource = ConfigResource("TOPIC", "admin-t")
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["retention.ms"].value == "3600000"

    resource = ConfigResource("TOPIC", "admin-t", set_config={"retention.ms": "7200000"})
    admin.alter_configs([resource])[resource].result(10)
    configs = admin.describe_configs([ConfigResource("TOPIC", "admin-t")])
    assert next(iter(configs.values())).result(10)["retention.ms"].value == "7200000"

    broker = ConfigResource("BROKER", str(metadata.controller_id))
    broker_configs = admin.describe_configs([broker])[broker].result(10)
    assert broker_configs["default.replication.factor"].value == "3"

    admin.delete_topics(["admin-t"])["admin-t"].result(10)
    deadline = time.monotonic() + 10
    while "admin-t" in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "admin-t" not in admin.list_topics(timeout=10).topics


def test_producing_to_a_new_topic_auto_creates_it(agent, cluster):
    a = agent(cluster.key)
    reports = produce(a.bootstrap, [{"topic": "born-on-use", "value": b"hello"}])
    assert reports == [(None, 0, 0)]
