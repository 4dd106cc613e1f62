"""Every common client produces and consumes through an agent; codecs cross clients."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time

import pytest

from tests.agents.clients import confluent_consume, confluent_produce, kafkajs

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka]


def test_aiokafka_round_trip_with_keys_headers_and_nulls(agent, cluster):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    a = agent(cluster.key)

    async def run():
        producer = AIOKafkaProducer(
            bootstrap_servers=a.bootstrap, acks="all", request_timeout_ms=10000
        )
        await producer.start()
        try:
            sent = [
                await producer.send_and_wait(
                    "aio",
                    value=f"v{i}".encode() if i % 3 else None,
                    key=f"k{i}".encode(),
                    headers=[("h", b"x"), ("n", None)] if i % 2 else [],
                )
                for i in range(30)
            ]
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=a.bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
        )
        await consumer.start()
        try:
            consumer.assign([TopicPartition("aio", 0)])
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


def test_kcat_produces_and_consumes(agent, cluster):
    a = agent(cluster.key)
    lines = "\n".join(f"key{i}:value{i}" for i in range(25)) + "\n"
    subprocess.run(
        ["kcat", "-b", a.bootstrap, "-t", "kcat-topic", "-P", "-K:", "-p", "0"],
        input=lines,
        text=True,
        check=True,
        timeout=60,
    )
    done = subprocess.run(
        [
            "kcat",
            "-b",
            a.bootstrap,
            "-t",
            "kcat-topic",
            "-C",
            "-e",
            "-o",
            "beginning",
            "-f",
            "%k=%s@%o\n",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert done.stdout.split() == [f"key{i}=value{i}@{i}" for i in range(25)]


def test_kafkajs_produces_and_consumes(agent, cluster):
    a = agent(cluster.key)
    script = """
const { Kafka, logLevel } = require('kafkajs');
(async () => {
  const kafka = new Kafka({ clientId: 'js', brokers: [process.env.BOOTSTRAP], logLevel: logLevel.NOTHING });
  const admin = kafka.admin(); await admin.connect();
  await admin.createTopics({ topics: [{ topic: 'js-topic', numPartitions: 2 }] });
  await admin.disconnect();
  const producer = kafka.producer(); await producer.connect();
  const sent = await producer.send({ topic: 'js-topic', acks: -1, messages:
    Array.from({ length: 20 }, (_, i) => ({ key: 'k' + i, value: 'v' + i, partition: i % 2, headers: { h: 'x' } })) });
  await producer.disconnect();
  const consumer = kafka.consumer({ groupId: 'js-reader-' + Date.now() });
  const got = [];
  await consumer.connect();
  await consumer.subscribe({ topic: 'js-topic', fromBeginning: true });
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
    result = kafkajs(script, {**os.environ, "BOOTSTRAP": a.bootstrap}, timeout=90)
    got = sorted(result["got"])
    assert got == sorted([[i % 2, i // 2, f"v{i}", "x"] for i in range(20)])


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_each_codec_written_by_librdkafka_is_read_by_kafka_python_and_back(agent, cluster, codec):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    a = agent(cluster.key)
    topic = f"codec-{codec}"
    confluent_produce(
        a.bootstrap,
        topic,
        [(b"k%d" % i, b"librdkafka-%d" % i * 20, None) for i in range(50)],
        partition=0,
        **{"compression.type": codec},
    )
    kp_codec = codec if codec in ("gzip", "snappy", "lz4", "zstd") else None
    producer = None
    try:
        producer = KafkaProducer(
            bootstrap_servers=a.bootstrap, compression_type=kp_codec, acks="all"
        )
        for i in range(50):
            producer.send(topic, key=b"p%d" % i, value=b"kafka-python-%d" % i * 20, partition=0)
        producer.flush(30)
    except Exception as exc:  # kafka-python lacks some codec libraries; say which
        pytest.fail(f"kafka-python cannot produce {codec}: {exc!r}")
    finally:
        if producer:
            producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=a.bootstrap, enable_auto_commit=False, consumer_timeout_ms=10000
    )
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    values = [m.value for _, m in zip(range(100), consumer)]
    consumer.close()
    assert values[:50] == [b"librdkafka-%d" % i * 20 for i in range(50)]
    assert values[50:] == [b"kafka-python-%d" % i * 20 for i in range(50)]
    back = confluent_consume(a.bootstrap, topic, [0], 100)
    assert [m.value() for m in back][50:] == [b"kafka-python-%d" % i * 20 for i in range(50)]


def test_one_mebibyte_messages(agent, cluster):
    a = agent(cluster.key)
    big = [os.urandom(1024 * 1000) for _ in range(3)]
    confluent_produce(
        a.bootstrap,
        "big",
        [(None, v, None) for v in big],
        partition=0,
        **{"message.max.bytes": 2 * 1024 * 1024},
    )
    got = confluent_consume(a.bootstrap, "big", [0], 3)
    assert [m.value() for m in got] == big


def test_sixty_four_partitions(agent, cluster):
    from confluent_kafka.admin import AdminClient, NewTopic

    a = agent(cluster.key)
    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    admin.create_topics([NewTopic("wide", 64, 1)])["wide"].result(30)
    delivered = confluent_produce(
        a.bootstrap, "wide", [(f"k{i}".encode(), f"v{i}".encode(), None) for i in range(640)]
    )
    assert len({p for p, _ in delivered}) > 32
    got = confluent_consume(a.bootstrap, "wide", list(range(64)), 640)
    assert sorted(m.value() for m in got) == sorted(f"v{i}".encode() for i in range(640))
    for p in range(64):  # dense from 0 in every partition
        offsets = [m.offset() for m in got if m.partition() == p]
        assert offsets == list(range(len(offsets)))
