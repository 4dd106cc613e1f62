"""Invariants 1 and 3 with real clients: nothing half-done is visible, killing an agent
loses no acknowledged message, any agent serves any request."""

from __future__ import annotations

import threading
import time

import pytest

from metadata_store.models import Partition
from tests.agents.clients import confluent_consume, confluent_produce
from tests.agents.faults import FaultyProxy

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka]


def test_a_multi_partition_produce_is_all_or_nothing_when_the_commit_fails(
    agent, cluster, live_server
):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    proxy = FaultyProxy(live_server.url)
    try:
        a = agent(cluster.key, control_plane_url=proxy.url)
        admin = AdminClient({"bootstrap.servers": a.bootstrap})
        admin.create_topics([NewTopic("atomic", 3, 1)])["atomic"].result(30)
        proxy.fail_commits = True
        producer = Producer(
            {
                "bootstrap.servers": a.bootstrap,
                "linger.ms": 50,
                "retries": 0,
                # The agent retries a refused commit for ~21.5 s before failing it.
                "message.timeout.ms": 40000,
                "acks": "all",
            }
        )
        outcomes = []
        for p in range(3):  # one ProduceRequest spanning three partitions
            producer.produce(
                "atomic",
                value=b"doomed-%d" % p,
                partition=p,
                on_delivery=lambda err, msg: outcomes.append(err),
            )
        producer.flush(45)
        assert proxy.refused >= 1
        assert len(outcomes) == 3 and all(err is not None for err in outcomes), outcomes
        from core.kafka.errors import ErrorCode

        codes = {ErrorCode(err.code()) for err in outcomes}
        assert codes == {ErrorCode.KAFKA_STORAGE_ERROR} and all(c.retriable for c in codes), codes
        assert list(
            Partition.objects.filter(topic__name="atomic").values_list("high_watermark", flat=True)
        ) == [0, 0, 0]
        proxy.fail_commits = False
        for p in range(3):
            assert confluent_produce(
                a.bootstrap, "atomic", [(None, b"ok-%d" % p, None)], partition=p
            ) == [(p, 0)]
        got = confluent_consume(a.bootstrap, "atomic", [0, 1, 2], 3)
        assert sorted(m.value() for m in got) == [b"ok-0", b"ok-1", b"ok-2"]
        assert all(m.offset() == 0 for m in got), "the failed request left nothing behind"
    finally:
        proxy.close()


def test_produce_through_one_agent_consume_through_another(agent, cluster):
    first, second = agent(cluster.key), agent(cluster.key)
    confluent_produce(
        first.bootstrap, "shared", [(None, b"m%d" % i, None) for i in range(40)], partition=0
    )
    got = confluent_consume(second.bootstrap, "shared", [0], 40)
    assert [m.value() for m in got] == [b"m%d" % i for i in range(40)]


def test_killing_an_agent_mid_run_loses_no_acknowledged_message(agent, cluster):
    """An idempotent librdkafka producer writes through two agents; one is SIGKILLed."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    first, second = agent(cluster.key), agent(cluster.key)
    admin = AdminClient({"bootstrap.servers": second.bootstrap})
    admin.create_topics([NewTopic("survive", 4, 1)])["survive"].result(30)
    producer = Producer(
        {
            "bootstrap.servers": f"{first.bootstrap},{second.bootstrap}",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 60000,
            "topic.metadata.refresh.interval.ms": 1000,
            "reconnect.backoff.max.ms": 500,
        }
    )
    acked: list[bytes] = []
    failed: list = []

    def on_delivery(err, msg):
        (failed if err else acked).append(err or msg.value())

    killer = threading.Timer(1.0, first.kill)
    killer.start()
    sent = 0
    deadline = time.monotonic() + 6
    while time.monotonic() < deadline:
        producer.produce("survive", value=b"msg-%06d" % sent, on_delivery=on_delivery)
        sent += 1
        producer.poll(0)
        if sent % 200 == 0:
            time.sleep(0.02)
    assert producer.flush(90) == 0
    killer.join()
    assert first.proc.poll() is not None, "the first agent was killed"
    assert len(acked) > 100, (len(acked), failed[:3])
    got = confluent_consume(second.bootstrap, "survive", [0, 1, 2, 3], len(acked), timeout=60)
    values = [m.value() for m in got]
    assert len(values) == len(set(values)), "a message was stored twice"
    assert set(acked) <= set(values), (
        f"{len(set(acked) - set(values))} acknowledged messages were lost"
    )
