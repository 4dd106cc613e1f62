"""confluent-kafka's ShareConsumer (KIP-932) against real agents."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.django_db(transaction=True)


def _topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions)])[name].result(10)


def _produce(bootstrap: str, topic: str, count: int, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, partition=partition)
    assert producer.flush(10) == 0


def _consumer(bootstrap: str, group: str, topic: str, **conf) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **conf})
    consumer.subscribe([topic])
    return consumer


def _poll_until(consumers, want: int, seconds: float = 15.0):
    got = {id(c): [] for c in consumers}
    deadline = time.monotonic() + seconds
    while sum(len(v) for v in got.values()) < want and time.monotonic() < deadline:
        for c in consumers:
            for m in c.poll(0.2):
                assert m.error() is None, m.error()
                got[id(c)].append(m)
    return got


def test_two_members_on_one_partition_share_its_records_once_each(agent, cluster):
    a = agent(cluster.key)
    _topic(a.bootstrap, "work")
    one = _consumer(a.bootstrap, "sg", "work")
    two = _consumer(a.bootstrap, "sg", "work")
    try:
        # Both members join before the records arrive (share.auto.offset.reset=latest).
        _poll_until([one, two], 1, 3.0)
        _produce(a.bootstrap, "work", 200)
        got = _poll_until([one, two], 200)
        offsets = [m.offset() for ms in got.values() for m in ms]
        assert sorted(offsets) == list(range(200))
        assert all(m.delivery_count() == 1 for ms in got.values() for m in ms)
    finally:
        one.close()
        two.close()


def test_release_redelivers_at_count_two_and_reject_never(agent, cluster):
    a = agent(cluster.key)
    _topic(a.bootstrap, "work")
    c = _consumer(a.bootstrap, "sg", "work", **{"share.acknowledgement.mode": "explicit"})
    try:
        _poll_until([c], 1, 3.0)
        _produce(a.bootstrap, "work", 4)
        first = _poll_until([c], 4)[id(c)]
        assert [m.offset() for m in first] == [0, 1, 2, 3]
        kinds = [AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT,
                 AcknowledgeType.ACCEPT]  # fmt: skip
        for m, kind in zip(first, kinds, strict=True):
            c.acknowledge(m, kind)
        c.commit_sync()
        again = _poll_until([c], 1)[id(c)]
        assert [(m.offset(), m.delivery_count()) for m in again] == [(1, 2)]
        c.acknowledge(again[0], AcknowledgeType.ACCEPT)
        c.commit_sync()
        assert _poll_until([c], 1, 2.0)[id(c)] == []
    finally:
        c.close()
