"""Small helpers that drive real Kafka clients against an agent, bounded in time."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

JS_DIR = Path(__file__).resolve().parents[1] / "js"


def confluent_produce(bootstrap: str, topic: str, messages, *, partition=None, **config) -> list:
    """Produce (key, value, headers) tuples with librdkafka; returns delivered offsets."""
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": 30000, **config}
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
    bootstrap: str, topic: str, partitions: list[int], count: int, *, timeout: float = 30.0
):
    """Read ``count`` messages from the start of the partitions with manual assignment."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
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
