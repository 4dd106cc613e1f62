"""The client matrix's checks: each common client (aiokafka, kcat, kafkajs, confluent-kafka,
kafka-python) produces and consumes through one `Endpoint`, plaintext or SASL. Each check
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
    kafkajs,
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


CODECS = ("gzip", "snappy", "lz4", "zstd")

# Every check of the matrix by name, for runs over several endpoints at once.
MATRIX: dict[str, Callable[[Endpoint, str], None]] = {
    "aiokafka": check_aiokafka_round_trip,
    "kcat": check_kcat,
    "kafkajs": check_kafkajs,
    **{f"codec-{c}": functools.partial(check_codec, codec=c) for c in CODECS},
    "one-mebibyte": check_one_mebibyte_messages,
    "sixty-four-partitions": check_sixty_four_partitions,
}
