"""A share group reading a lightning topic while producers write it (librdkafka's 0174,
small): every record a producer had acknowledged is delivered, first at delivery count 1 —
once its journal entry is sequenced, which on a lightning topic comes after the
acknowledgement (docs/ARCHITECTURE.md "Share groups and lightning topics")."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer, TopicPartition

from tests.agents.share.conftest import share_topic

pytestmark = pytest.mark.django_db(transaction=True)

PARTITIONS = 4
PRODUCERS = 2
PER_PRODUCER = 400


def _producer(bootstrap: str, n: int, acked: list[bytes], failed: list[str]) -> None:
    """As 0174's producer threads: idempotent, one record a partition, then a flush."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})

    def report(err, msg) -> None:
        (failed.append(str(err)) if err else acked.append(msg.value()))

    sent = 0
    while sent < PER_PRODUCER:
        for p in range(PARTITIONS):
            producer.produce("q", value=b"p%d-%d" % (n, sent), partition=p, on_delivery=report)
            sent += 1
        producer.flush(1)
    producer.flush(20)


def _member(bootstrap: str, seen: list, stop: threading.Event) -> None:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "sg"})
    consumer.subscribe(["q"])
    try:
        while not stop.is_set():
            for m in consumer.poll(0.5):
                if m.error() is None:
                    seen.append((m.value(), m.partition(), m.offset(), m.delivery_count()))
    finally:
        consumer.close()


def _in_topic(bootstrap: str) -> dict[bytes, tuple[int, int]]:
    """Every record the topic holds (a classic consumer reading it whole)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition("q", p), 10)[1]
                for p in range(PARTITIONS)}  # fmt: skip
        consumer.assign([TopicPartition("q", p, 0) for p in range(PARTITIONS)])
        out: dict[bytes, tuple[int, int]] = {}
        deadline = time.monotonic() + 20
        while sum(ends.values()) > len(out) and time.monotonic() < deadline:
            for m in consumer.consume(500, 0.5):
                if m.error() is None:
                    out[m.value()] = (m.partition(), m.offset())
        return out
    finally:
        consumer.close()


def test_every_acknowledged_record_of_a_lightning_topic_is_delivered_first_at_count_one(
    agent, cluster
):
    a = agent(cluster.key, batch_timeout_ms=10)
    share_topic(a.bootstrap, "q", PARTITIONS, config={"floe.topic.type": "lightning"})
    seen: list = []
    stop = threading.Event()
    member = threading.Thread(target=_member, args=(a.bootstrap, seen, stop), daemon=True)
    member.start()
    acked: list[bytes] = []
    failed: list[str] = []
    producers = [
        threading.Thread(target=_producer, args=(a.bootstrap, n, acked, failed), daemon=True)
        for n in range(PRODUCERS)
    ]
    for t in producers:
        t.start()
    for t in producers:
        t.join(60)
    total = PRODUCERS * PER_PRODUCER
    deadline = time.monotonic() + 20
    while len({v for v, _, _, count in seen if count == 1}) < total and time.monotonic() < deadline:
        time.sleep(0.2)
    stop.set()
    member.join(15)
    assert failed == []
    assert len(acked) == total
    first = {v for v, _, _, count in seen if count == 1}
    missing = sorted(set(acked) - first)
    if missing:
        stored = _in_topic(a.bootstrap)
        where = {v: stored.get(v) for v in missing[:10]}
        later = [s for s in seen if s[0] in set(missing)][:10]
        pytest.fail(f"{len(missing)} records not first-delivered: {where}; seen as {later}")
    assert len(first) == total
