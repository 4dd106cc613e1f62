"""Small helpers that drive real Kafka clients against an agent, bounded in time."""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

JS_DIR = Path(__file__).resolve().parents[1] / "js"


@dataclass(frozen=True)
class Endpoint:
    """One agent listener as every client of the matrix connects to it: a bootstrap
    address and, for a SASL listener, the login (SASL_PLAINTEXT, SCRAM-SHA-512)."""

    bootstrap: str
    user: str | None = None
    password: str | None = None

    @property
    def kind(self) -> str:
        return "sasl" if self.user else "plaintext"

    def confluent(self, **extra) -> dict:
        """librdkafka (confluent-kafka) settings."""
        config: dict = {"bootstrap.servers": self.bootstrap, **extra}
        if self.user:
            config.update(
                {
                    "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "SCRAM-SHA-512",
                    "sasl.username": self.user,
                    "sasl.password": self.password,
                }
            )
        return config

    def python(self) -> dict:
        """kafka-python and aiokafka keyword arguments (they share the names)."""
        config: dict = {"bootstrap_servers": self.bootstrap}
        if self.user:
            config.update(
                {
                    "security_protocol": "SASL_PLAINTEXT",
                    "sasl_mechanism": "SCRAM-SHA-512",
                    "sasl_plain_username": self.user,
                    "sasl_plain_password": self.password,
                }
            )
        return config

    def kcat(self) -> list[str]:
        """kcat's broker and security arguments."""
        args = ["-b", self.bootstrap]
        if self.user:
            args += [
                "-X",
                "security.protocol=SASL_PLAINTEXT",
                "-X",
                "sasl.mechanisms=SCRAM-SHA-512",
                "-X",
                f"sasl.username={self.user}",
                "-X",
                f"sasl.password={self.password}",
            ]
        return args

    def kafkajs_env(self) -> dict:
        """Environment for a kafkajs script that builds its client with `KAFKAJS_CLIENT`."""
        env = {"BOOTSTRAP": self.bootstrap}
        if self.user:
            env.update({"SASL_USER": self.user, "SASL_PASSWORD": self.password or ""})
        return env


# A kafkajs client for `Endpoint.kafkajs_env()`: SCRAM-SHA-512 when SASL_USER is set.
KAFKAJS_CLIENT = """
const { Kafka, logLevel } = require('kafkajs');
const sasl = process.env.SASL_USER ? { mechanism: 'scram-sha-512',
  username: process.env.SASL_USER, password: process.env.SASL_PASSWORD } : undefined;
const kafka = new Kafka({ clientId: 'js', brokers: [process.env.BOOTSTRAP], sasl,
  logLevel: logLevel.NOTHING });
"""


def _confluent_base(endpoint: str | Endpoint) -> dict:
    return (
        endpoint.confluent() if isinstance(endpoint, Endpoint) else {"bootstrap.servers": endpoint}
    )


def confluent_produce(
    endpoint: str | Endpoint, topic: str, messages, *, partition=None, **config
) -> list:
    """Produce (key, value, headers) tuples with librdkafka; returns delivered offsets.
    `endpoint`: a bootstrap address or an `Endpoint`."""
    from confluent_kafka import Producer

    producer = Producer(
        {**_confluent_base(endpoint), "linger.ms": 5, "message.timeout.ms": 30000, **config}
    )
    results: list = []
    for key, value, headers in messages:
        kwargs = {"key": key, "value": value, "headers": headers or None}
        if partition is not None:
            kwargs["partition"] = partition
        producer.produce(
            topic,
            on_delivery=lambda err, msg: results.append(err or (msg.partition(), msg.offset())),
            **kwargs,
        )
        producer.poll(0)
    assert producer.flush(60) == 0
    errors = [r for r in results if not isinstance(r, tuple)]
    assert not errors, errors[:3]
    return results


def confluent_consume(
    endpoint: str | Endpoint,
    topic: str,
    partitions: list[int],
    count: int,
    *,
    timeout: float = 30.0,
):
    """Read ``count`` messages from the start of the partitions with manual assignment."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            **_confluent_base(endpoint),
            "group.id": "reader",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    out = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert not message.error(), message.error()
            out.append(message)
    finally:
        consumer.close()
    return out


def create_topic(endpoint: str | Endpoint, name: str, partitions: int, **configs: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(_confluent_base(endpoint))
    topic = NewTopic(name, num_partitions=partitions, replication_factor=3, config=configs)
    for future in admin.create_topics([topic], operation_timeout=10).values():
        future.result(15)


def consume_all(
    endpoint: str | Endpoint, topic: str, partitions: int, count: int, timeout_s: float = 20
):
    """Every message of the topic from offset 0 (manual assignment, no group)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

    consumer = Consumer(
        {
            **_confluent_base(endpoint),
            "group.id": "unused",  # librdkafka wants one; assign() never joins it
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    messages = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(messages) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            messages.append(msg)
    finally:
        consumer.close()
    return messages


def produce(endpoint: str | Endpoint, messages: list[dict], **config) -> list:
    """Produce message dicts (`Producer.produce` keywords); (error, partition, offset) each."""
    from confluent_kafka import Producer

    producer = Producer({**_confluent_base(endpoint), "linger.ms": 5, **config})
    reports = []

    def on_delivery(err, msg):
        reports.append((err, msg.partition(), msg.offset()))

    for message in messages:
        producer.produce(on_delivery=on_delivery, **message)
        producer.poll(0)
    assert producer.flush(20) == 0
    return reports


def kafkajs(script: str, env: dict, timeout: float = 60.0) -> dict:
    """Run a kafkajs script (in tests/js) and parse the JSON it prints last."""
    done = subprocess.run(
        ["node", "-e", script], cwd=JS_DIR, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def raw_produce(bootstrap: str, topic: str, partition: int, value: bytes) -> tuple[int, str | None]:
    """One record produced with Produce v8 (aiokafka's low-level client, which librdkafka
    does not do: it keeps the broker's error message to itself); (error code, message)."""
    import asyncio

    from aiokafka.client import AIOKafkaClient
    from aiokafka.protocol.api import Request
    from aiokafka.protocol.produce import ProduceRequest, ProduceRequest_v8, ProduceResponse_v8
    from aiokafka.record.default_records import DefaultRecordBatchBuilder
    from aiokafka.structs import TopicPartition

    class ProduceV8(Request[ProduceRequest_v8]):  # aiokafka's ProduceRequest stops at v7
        API_KEY = 0
        build = ProduceRequest.build
        __init__ = ProduceRequest.__init__

    async def run() -> tuple[int, str | None]:
        client = AIOKafkaClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
        await client.bootstrap()
        try:
            await client._metadata_update(client.cluster, [topic])
            leader = client.cluster.leader_for_partition(TopicPartition(topic, partition))
            builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 100)
            builder.append(0, int(time.time() * 1000), b"k", value, [])
            request = ProduceV8(
                transactional_id=None,
                required_acks=-1,
                timeout=10_000,
                topics=[(topic, [(partition, bytes(builder.build()))])],
            )
            response = await client.send(leader, request)
            assert isinstance(response, ProduceResponse_v8), type(response)
            (_, parts) = response.topics[0]
            return parts[0][1], parts[0][-1]
        finally:
            await client.close()

    return asyncio.run(asyncio.wait_for(run(), 30))


def committed_offsets(
    bootstrap: str, group: str, topic: str, partitions: int, timeout_s: float = 15
) -> dict[int, int]:
    """The group's committed offsets of `topic` (OffsetFetch, without joining the group),
    by partition; a partition without one answers a negative offset."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        answer = consumer.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=timeout_s
        )
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in answer}


def fetch_watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    """Each partition's (log start offset, high watermark) as a Fetch (v5+) answers them —
    not ListOffsets, whose "latest" Tansu 0.6 answers with a lower offset than its Fetch's
    high watermark. Raises if a partition answers an error."""
    import asyncio

    from aiokafka.client import AIOKafkaClient
    from aiokafka.protocol.fetch import FetchRequest
    from aiokafka.structs import TopicPartition

    from agents.migration_copier import response_dict

    async def run() -> dict[int, tuple[int, int]]:
        client = AIOKafkaClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
        await client.bootstrap()
        try:
            await client._metadata_update(client.cluster, [topic])
            out: dict[int, tuple[int, int]] = {}
            for p in range(partitions):
                leader = client.cluster.leader_for_partition(TopicPartition(topic, p))
                # (Tansu 0.6 answers a Fetch with no wait with no topics at all.)
                request = FetchRequest(100, 0, 1, 0, [(topic, [(p, 0, 1)])])
                response = response_dict(await client.send(leader, request))
                answer = response["topics"][0]["partitions"][0]
                if answer["error_code"] not in (0, 1):  # 1: offset 0 below the log start
                    raise RuntimeError(f"{topic}-{p}: error {answer['error_code']}")
                out[p] = (answer["log_start_offset"], answer["highwater_offset"])
            return out
        finally:
            await client.close()

    return asyncio.run(asyncio.wait_for(run(), 30))
