"""While the control plane is unreachable, an agent keeps its clients: Metadata comes
from what it last knew, produce requests get retriable errors (never a closed
connection), and everything acknowledged meanwhile or after is there once it is back."""

from __future__ import annotations

import time

import pytest

from core.kafka.errors import ErrorCode
from tests.agents.clients import confluent_consume
from tests.agents.faults import TcpProxy

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka]


def test_with_the_control_plane_down_metadata_answers_and_produce_waits(
    agent, cluster, live_server
):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    proxy = TcpProxy(int(live_server.url.rsplit(":", 1)[1]))
    try:
        a = agent(cluster.key, control_plane_url=proxy.url)
        acked: list = []
        failed: list = []
        producer = Producer(
            {
                "bootstrap.servers": a.bootstrap,
                "enable.idempotence": True,
                "linger.ms": 0,
                "message.timeout.ms": 120000,
            }
        )

        def done(err, msg) -> None:
            (failed if err else acked).append(err or msg.value())

        producer.produce("kept", value=b"before", on_delivery=done)
        producer.flush(30)
        assert acked == [b"before"], failed

        proxy.cut()
        time.sleep(6)  # past the topic cache's freshness
        # A client that never saw this agent bootstraps and learns the topic from it.
        admin = AdminClient({"bootstrap.servers": a.bootstrap})
        listed = admin.list_topics("kept", timeout=20)
        assert listed.topics["kept"].error is None
        assert len(listed.topics["kept"].partitions) == 1
        assert listed.brokers, "the agent lists itself as a broker"
        unknown = admin.list_topics("never-seen", timeout=20).topics["never-seen"]
        assert unknown.error is not None and ErrorCode(unknown.error.code()).retriable

        producer.produce("kept", value=b"during", on_delivery=done)
        producer.poll(3)
        assert b"during" not in acked and not failed, "nothing acked, nothing failed for good"
        proxy.restore()
        restored = time.monotonic()
        producer.produce("kept", value=b"after", on_delivery=done)
        assert producer.flush(60) == 0
        assert not failed, failed
        assert sorted(acked) == [b"after", b"before", b"during"]
        took = time.monotonic() - restored
        got = confluent_consume(a.bootstrap, "kept", [0], 3)
        assert sorted(m.value() for m in got) == [b"after", b"before", b"during"]
        assert a.proc.poll() is None
        print(f"produce acked again {took:.1f}s after the control plane came back")
    finally:
        proxy.close()
