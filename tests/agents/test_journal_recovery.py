"""The journal with real agent processes: an agent killed (SIGKILL) while it holds
acknowledged, unsequenced journal entries has them sequenced by another agent, each once
and in order; with Ripcord a standard topic's produce is acknowledged while commits fail."""

from __future__ import annotations

import time

import pytest

from metadata_store.models import SegmentFile
from tests.agents.clients import confluent_consume
from tests.agents.faults import FaultyProxy
from tests.agents.test_lightning import _create

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka]


def _produce(bootstrap: str, topic: str, values: list[bytes], **config) -> list:
    from confluent_kafka import Producer

    reports: list = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 20000,
            **config,
        }
    )
    for value in values:
        producer.produce(
            topic, value, partition=0, on_delivery=lambda e, m: reports.append(e or m.offset())
        )
        producer.poll(0)
    assert producer.flush(20) == 0
    return reports


def _until(predicate, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def test_another_agent_sequences_what_a_killed_agent_acknowledged(agent, cluster, live_server):
    """Agent A's commits fail (503) and its journal lease call never answers, so its
    acknowledged lightning records exist only in its journal; A is SIGKILLed. Agent B
    finds A's journal, takes its lease and sequences it: every record readable once, in
    the order produced."""
    held = 30.0
    proxy = FaultyProxy(
        live_server.url, hold=lambda path, body: held if path.endswith("/journal/lease") else 0
    )
    try:
        a = agent(cluster.key, control_plane_url=proxy.url)
        _create(a.bootstrap, "kept", 1, {"floe.topic.type": "lightning"})
        proxy.fail_commits = True
        values = [f"r{n}".encode() for n in range(60)]
        reports = _produce(a.bootstrap, "kept", values)
        assert len(reports) == 60 and all(r is None or isinstance(r, int) for r in reports)
        # The commits follow the acks: wait for one to be refused.
        assert _until(lambda: proxy.refused > 0, 10) and SegmentFile.objects.count() == 0
        a.kill()
        b = agent(cluster.key)
        assert _until(lambda: SegmentFile.objects.count() > 0, 20)
        read = confluent_consume(b.bootstrap, "kept", [0], 60, timeout=20)
        assert [m.value() for m in read] == values
        assert [m.offset() for m in read] == list(range(60))
        assert "sequenced" in b.logs()
    finally:
        held = 0.0
        proxy.close()


def test_ripcord_acknowledges_a_standard_topic_while_commits_fail(agent, cluster, live_server):
    """With --ripcord, a standard topic's produce is acknowledged (offset unknown) while
    the control plane answers every commit with a 503, and the records are readable once
    commits go through again."""
    proxy = FaultyProxy(live_server.url)
    try:
        a = agent(cluster.key, control_plane_url=proxy.url, extra=["--ripcord"])
        _create(a.bootstrap, "plain", 1, {})
        proxy.fail_commits = True
        values = [f"s{n}".encode() for n in range(30)]
        started = time.monotonic()
        reports = _produce(a.bootstrap, "plain", values, **{"batch.num.messages": 1})
        took = time.monotonic() - started
        assert reports == [None] * 30 and took < 10, (reports[:3], took)
        assert SegmentFile.objects.count() == 0
        proxy.fail_commits = False
        read = confluent_consume(a.bootstrap, "plain", [0], 30, timeout=20)
        assert [m.value() for m in read] == values
    finally:
        proxy.close()
