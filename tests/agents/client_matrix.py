"""The Kafka-compatibility checks (the client matrix): each common client (confluent-kafka,
kafka-python, aiokafka, kcat, kafkajs) produces, consumes and administers through one
`Endpoint`, plaintext or SASL — tests/agents/test_confluent_kafka.py, test_kafka_python.py
and test_client_matrix.py run them against a plaintext agent. Each check
takes a `tag` that prefixes its topic names, so the checks of several endpoints can run
against one cluster at the same time (tests/agents/security/test_listeners.py)."""

from __future__ import annotations

import asyncio
import functools
import os
import subprocess
import time
from collections.abc import Callable

from tests.agents.clients import (
    KAFKAJS_CLIENT,
    Endpoint,
    confluent_consume,
    confluent_produce,
    consume_all,
    create_topic,
    kafkajs,
    produce,
)


def check_aiokafka_round_trip(endpoint: Endpoint, tag: str = "") -> None:
    """Keys, headers (one with a null value) and null values, produced and read back."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    topic = f"{tag}aio"

    async def run():
        producer = AIOKafkaProducer(**endpoint.python(), acks="all", request_timeout_ms=10000)
        await producer.start()
        try:
            sent = [
                await producer.send_and_wait(
                    topic,
                    value=f"v{i}".encode() if i % 3 else None,
                    key=f"k{i}".encode(),
                    headers=[("h", b"x"), ("n", None)] if i % 2 else [],
                )
                for i in range(30)
            ]
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            **endpoint.python(), enable_auto_commit=False, auto_offset_reset="earliest"
        )
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, 0)])
            got = []
            deadline = time.monotonic() + 30
            while len(got) < 30 and time.monotonic() < deadline:
                batch = await consumer.getmany(timeout_ms=500)
                for records in batch.values():
                    got.extend(records)
        finally:
            await consumer.stop()
        return sent, got

    sent, got = asyncio.run(asyncio.wait_for(run(), 90))
    assert [m.offset for m in sent] == list(range(30))
    assert [r.offset for r in got] == list(range(30))
    assert [r.value for r in got] == [f"v{i}".encode() if i % 3 else None for i in range(30)]
    assert [r.key for r in got] == [f"k{i}".encode() for i in range(30)]
    assert list(got[1].headers) == [("h", b"x"), ("n", None)]


def check_kcat(endpoint: Endpoint, tag: str = "") -> None:
    """kcat produces keyed lines and reads them back with their offsets."""
    topic = f"{tag}kcat-topic"
    lines = "\n".join(f"key{i}:value{i}" for i in range(25)) + "\n"
    subprocess.run(
        ["kcat", *endpoint.kcat(), "-t", topic, "-P", "-K:", "-p", "0"],
        input=lines,
        text=True,
        check=True,
        timeout=60,
    )
    done = subprocess.run(
        ["kcat", *endpoint.kcat(), "-t", topic, "-C", "-e", "-o", "beginning"]
        + ["-f", "%k=%s@%o\n"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert done.stdout.split() == [f"key{i}=value{i}@{i}" for i in range(25)]


_KAFKAJS_ROUND_TRIP = """
(async () => {
  const topic = process.env.TOPIC;
  const admin = kafka.admin(); await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 2 }] });
  await admin.disconnect();
  const producer = kafka.producer(); await producer.connect();
  const sent = await producer.send({ topic, acks: -1, messages:
    Array.from({ length: 20 }, (_, i) => ({ key: 'k' + i, value: 'v' + i, partition: i % 2, headers: { h: 'x' } })) });
  await producer.disconnect();
  const consumer = kafka.consumer({ groupId: topic + '-reader-' + Date.now() });
  const got = [];
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('timed out with ' + got.length)), 45000);
    consumer.run({ eachMessage: async ({ partition, message }) => {
      got.push([partition, Number(message.offset), message.value.toString(), message.headers.h.toString()]);
      if (got.length === 20) { clearTimeout(timer); resolve(); }
    } });
  });
  await consumer.disconnect();
  console.log(JSON.stringify({ sent, got }));
})().catch(e => { console.error(e); process.exit(1); });
"""


def check_kafkajs(endpoint: Endpoint, tag: str = "") -> None:
    """kafkajs creates a topic, produces with headers and consumes it in a consumer group."""
    env = {**os.environ, **endpoint.kafkajs_env(), "TOPIC": f"{tag}js-topic"}
    result = kafkajs(KAFKAJS_CLIENT + _KAFKAJS_ROUND_TRIP, env, timeout=90)
    got = sorted(result["got"])
    assert got == sorted([[i % 2, i // 2, f"v{i}", "x"] for i in range(20)])


def check_codec(endpoint: Endpoint, tag: str = "", *, codec: str) -> None:
    """A codec written by librdkafka is read by kafka-python, and kafka-python's by librdkafka."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = f"{tag}codec-{codec}"
    confluent_produce(
        endpoint,
        topic,
        [(b"k%d" % i, b"librdkafka-%d" % i * 20, None) for i in range(50)],
        partition=0,
        **{"compression.type": codec},
    )
    producer = None
    try:
        producer = KafkaProducer(**endpoint.python(), compression_type=codec, acks="all")
        for i in range(50):
            producer.send(topic, key=b"p%d" % i, value=b"kafka-python-%d" % i * 20, partition=0)
        producer.flush(30)
    except Exception as exc:  # kafka-python lacks some codec libraries; say which
        raise AssertionError(f"kafka-python cannot produce {codec}: {exc!r}") from exc
    finally:
        if producer:
            producer.close()
    consumer = KafkaConsumer(
        **endpoint.python(), enable_auto_commit=False, consumer_timeout_ms=10000
    )
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        values = [m.value for _, m in zip(range(100), consumer)]
    finally:
        consumer.close()
    assert values[:50] == [b"librdkafka-%d" % i * 20 for i in range(50)]
    assert values[50:] == [b"kafka-python-%d" % i * 20 for i in range(50)]
    back = confluent_consume(endpoint, topic, [0], 100)
    assert [m.value() for m in back][50:] == [b"kafka-python-%d" % i * 20 for i in range(50)]


def check_one_mebibyte_messages(endpoint: Endpoint, tag: str = "") -> None:
    big = [os.urandom(1024 * 1000) for _ in range(3)]
    confluent_produce(
        endpoint,
        f"{tag}big",
        [(None, v, None) for v in big],
        partition=0,
        **{"message.max.bytes": 2 * 1024 * 1024},
    )
    got = confluent_consume(endpoint, f"{tag}big", [0], 3)
    assert [m.value() for m in got] == big


def check_sixty_four_partitions(endpoint: Endpoint, tag: str = "") -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"{tag}wide"
    admin = AdminClient(endpoint.confluent())
    admin.create_topics([NewTopic(topic, 64, 1)])[topic].result(30)
    delivered = confluent_produce(
        endpoint, topic, [(f"k{i}".encode(), f"v{i}".encode(), None) for i in range(640)]
    )
    assert len({p for p, _ in delivered}) > 32
    got = confluent_consume(endpoint, topic, list(range(64)), 640)
    assert sorted(m.value() for m in got) == sorted(f"v{i}".encode() for i in range(640))
    for p in range(64):  # dense from 0 in every partition
        offsets = [m.offset() for m in got if m.partition() == p]
        assert offsets == list(range(len(offsets)))


# --- confluent-kafka (librdkafka) ----------------------------------------------------------


def check_confluent_round_trip(endpoint: Endpoint, tag: str = "") -> None:
    """Keys, headers and null values over four partitions, dense offsets in send order."""
    topic = f"{tag}orders"
    create_topic(endpoint, topic, partitions=4)
    sent = [
        {
            "topic": topic,
            "partition": i % 4,
            "key": None if i % 7 == 0 else f"key-{i}".encode(),
            "value": None if i % 5 == 0 else f"value-{i}".encode() * (1 + i % 3),
            "headers": [("n", str(i).encode()), ("empty", None)] if i % 2 else None,
        }
        for i in range(400)
    ]
    reports = produce(endpoint, sent)
    assert all(err is None for err, _, _ in reports)

    received = consume_all(endpoint, topic, 4, len(sent))
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


def check_idempotent_producer(endpoint: Endpoint, tag: str = "") -> None:
    topic = f"{tag}payments"
    create_topic(endpoint, topic, partitions=2)
    messages = [{"topic": topic, "partition": i % 2, "value": b"%d" % i} for i in range(300)]
    reports = produce(endpoint, messages, **{"enable.idempotence": True, "acks": "all"})
    assert all(err is None for err, _, _ in reports)
    for partition in (0, 1):
        offsets = sorted(o for _, p, o in reports if p == partition)
        assert offsets == list(range(150))


def check_list_offsets(endpoint: Endpoint, tag: str = "") -> None:
    """Earliest, latest and by timestamp (ListOffsets), through librdkafka."""
    from confluent_kafka import Consumer, TopicPartition

    topic = f"{tag}clock"
    create_topic(endpoint, topic, partitions=1)
    base = 1_700_000_000_000
    produce(
        endpoint,
        [
            {"topic": topic, "partition": 0, "value": b"x", "timestamp": base + i * 1000}
            for i in range(10)
        ],
        **{"linger.ms": 0, "batch.num.messages": 1},  # one batch per record: exact lookups
    )
    consumer = Consumer(endpoint.confluent(**{"group.id": "unused", "enable.auto.commit": False}))
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 10)
        found = consumer.offsets_for_times([TopicPartition(topic, 0, base + 4500)], timeout=10)
        assert found[0].offset == 5
        found = consumer.offsets_for_times([TopicPartition(topic, 0, base)], timeout=10)
        assert found[0].offset == 0
        found = consumer.offsets_for_times([TopicPartition(topic, 0, base + 99_000)], timeout=10)
        assert found[0].offset == -1  # no such record: "end"
    finally:
        consumer.close()


def check_admin_operations(endpoint: Endpoint, tag: str = "") -> str:
    """Create (and a duplicate), add partitions, describe and alter configs (a topic's
    and the broker's), delete; returns the cluster id Metadata answered."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

    topic = f"{tag}admin-t"
    admin = AdminClient(endpoint.confluent())
    create_topic(endpoint, topic, partitions=1, **{"retention.ms": "3600000"})

    duplicate = admin.create_topics([NewTopic(topic, 1, 1)])[topic]
    try:
        duplicate.result(10)
        raise AssertionError("a duplicate topic was created")
    except KafkaException as exc:
        assert exc.args[0].name() == "TOPIC_ALREADY_EXISTS"

    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(10)
    metadata = admin.list_topics(timeout=10)
    assert len(metadata.topics[topic].partitions) == 3
    assert list(metadata.brokers) == [metadata.controller_id]

    resource = ConfigResource("TOPIC", topic)
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["retention.ms"].value == "3600000"

    resource = ConfigResource("TOPIC", topic, set_config={"retention.ms": "7200000"})
    admin.alter_configs([resource])[resource].result(10)
    configs = admin.describe_configs([ConfigResource("TOPIC", topic)])
    assert next(iter(configs.values())).result(10)["retention.ms"].value == "7200000"

    broker = ConfigResource("BROKER", str(metadata.controller_id))
    broker_configs = admin.describe_configs([broker])[broker].result(10)
    assert broker_configs["default.replication.factor"].value == "3"

    admin.delete_topics([topic])[topic].result(10)
    deadline = time.monotonic() + 10
    while topic in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.2)
    assert topic not in admin.list_topics(timeout=10).topics
    return metadata.cluster_id


def check_auto_create(endpoint: Endpoint, tag: str = "") -> None:
    reports = produce(endpoint, [{"topic": f"{tag}born-on-use", "value": b"hello"}])
    assert reports == [(None, 0, 0)]


# --- kafka-python --------------------------------------------------------------------------


def check_kafka_python_round_trip(endpoint: Endpoint, tag: str = "") -> None:
    """kafka-python's admin creates a topic; keys, headers and null values round-trip."""
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

    topic = f"{tag}events"
    admin = KafkaAdminClient(**endpoint.python(), request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
    finally:
        admin.close()

    producer = KafkaProducer(**endpoint.python(), linger_ms=5, acks="all")
    sent = [
        {
            "partition": i % 3,
            "key": None if i % 4 == 0 else b"k%d" % i,
            "value": None if i % 9 == 0 and i % 4 else b"v%d" % i,
            "headers": [("trace", b"t%d" % i)] if i % 2 else [],
        }
        for i in range(150)
    ]
    try:
        futures = [producer.send(topic, **message) for message in sent]
        producer.flush(20)
        metadata = [f.get(10) for f in futures]
    finally:
        producer.close()
    for partition in range(3):
        offsets = [m.offset for m in metadata if m.partition == partition]
        assert offsets == list(range(50))

    consumer = KafkaConsumer(**endpoint.python(), enable_auto_commit=False, fetch_max_wait_ms=100)
    received = []
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(3)])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + 20
        while len(received) < len(sent) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                received.extend(records)
    finally:
        consumer.close()

    assert len(received) == len(sent)
    for partition in range(3):
        got = [r for r in received if r.partition == partition]
        want = [m for m in sent if m["partition"] == partition]
        assert [r.offset for r in got] == list(range(len(want)))
        assert [(r.key, r.value, list(r.headers)) for r in got] == [
            (m["key"], m["value"], m["headers"]) for m in want
        ]


def check_kafka_python_offsets(endpoint: Endpoint, tag: str = "") -> None:
    """Beginning and end offsets of an auto-created topic, through kafka-python."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = f"{tag}auto-made"
    producer = KafkaProducer(**endpoint.python())
    try:
        for i in range(7):
            producer.send(topic, value=b"%d" % i, partition=0)
        producer.flush(20)
    finally:
        producer.close()
    consumer = KafkaConsumer(**endpoint.python(), enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 7}
    finally:
        consumer.close()


CODECS = ("gzip", "snappy", "lz4", "zstd")

# Every check of the matrix by name, for runs over several endpoints at once.
MATRIX: dict[str, Callable[[Endpoint, str], object]] = {
    "confluent-round-trip": check_confluent_round_trip,
    "confluent-idempotent": check_idempotent_producer,
    "confluent-list-offsets": check_list_offsets,
    "confluent-admin": check_admin_operations,
    "confluent-auto-create": check_auto_create,
    "kafka-python-round-trip": check_kafka_python_round_trip,
    "kafka-python-offsets": check_kafka_python_offsets,
    "aiokafka": check_aiokafka_round_trip,
    "kcat": check_kcat,
    "kafkajs": check_kafkajs,
    **{f"codec-{c}": functools.partial(check_codec, codec=c) for c in CODECS},
    "one-mebibyte": check_one_mebibyte_messages,
    "sixty-four-partitions": check_sixty_four_partitions,
}
