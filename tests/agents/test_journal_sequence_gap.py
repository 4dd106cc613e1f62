"""A producer that moves between agents while its earlier batch waits, acknowledged, in
the first agent's journal (issue 40's sequence gap after an outage): its next batch,
committed by the second agent first, is refused by the metadata store for a gap. That
is the journal path's to resolve — the batch is held and committed again after its
predecessor — never the producer's: librdkafka ends an idempotent producer on
OUT_OF_ORDER_SEQUENCE_NUMBER, and an acknowledged batch given up is a lost one.

Two real agents with --ripcord, the real control plane and store; the producer is a
low-level Kafka client so that each batch goes to the agent the test names (partition
leaders follow the agents' load, which is what moves producers in the fault suite)."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.agents.clients import confluent_consume, fetch_watermarks
from tests.agents.faults import FaultyProxy
from tests.agents.test_lightning import _create

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka]

HELD_S = 6.0  # agent A's commits wait this long: its journal entry stays unsequenced


async def _produce_in_turn(a, b, topic: str, steps) -> list[tuple[str, int, int]]:
    """InitProducerId, then one single-record batch per (agent, sequence) of `steps`,
    each sent to that agent and answered before the next; (agent, sequence, error)."""
    from aiokafka.client import AIOKafkaClient
    from aiokafka.protocol.produce import ProduceRequest
    from aiokafka.protocol.transaction import InitProducerIdRequest
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    client = AIOKafkaClient(
        bootstrap_servers=f"{a.bootstrap},{b.bootstrap}", request_timeout_ms=15_000
    )
    await client.bootstrap()
    try:
        node: dict[str, int] = {}
        deadline = time.monotonic() + 30
        while set(node) != {"a", "b"}:  # until each agent lists the other as live
            assert time.monotonic() < deadline, client.cluster.brokers()
            await asyncio.sleep(0.5)
            await client.force_metadata_update()
            for broker in client.cluster.brokers():
                for name, agent in (("a", a), ("b", b)):
                    if agent.bootstrap.endswith(f":{broker.port}"):
                        node[name] = broker.nodeId
        init = await client.send(node["b"], InitProducerIdRequest(None, 60_000))
        assert init.error_code == 0, init
        pid, epoch = init.producer_id, init.producer_epoch
        answers = []
        for name, seq, before in steps:
            before()
            builder = DefaultRecordBatchBuilder(2, 0, False, pid, epoch, seq, 1000)
            builder.append(0, int(time.time() * 1000), None, b"seq-%d" % seq, [])
            request = ProduceRequest(
                transactional_id=None,
                required_acks=-1,
                timeout=10_000,
                topics=[(topic, [(0, bytes(builder.build()))])],
            )
            response = await client.send(node[name], request)
            (_, parts) = response.topics[0]
            answers.append((name, seq, parts[0][1]))
        return answers
    finally:
        await client.close()


def test_a_batch_committed_before_its_predecessor_in_another_journal_waits_for_it(
    agent, cluster, live_server
):
    """Sequence 0 through B (committed), 1 through A (acknowledged from A's journal
    while A's commits are held), 2 and 3 through B: B's commit of 2 finds the gap. Every
    batch is acknowledged without error and the partition reads 0, 1, 2, 3 once each."""
    release_at = [0.0]

    def hold(path: str, body: bytes) -> float:
        if path.startswith("/agent/v1/commit"):
            return max(0.0, release_at[0] - time.monotonic())
        return 0.0

    proxy = FaultyProxy(live_server.url, hold=hold)
    try:
        a = agent(cluster.key, control_plane_url=proxy.url, extra=["--ripcord"])
        b = agent(cluster.key, extra=["--ripcord"])
        _create(b.bootstrap, "moved", 1, {})

        def hold_a() -> None:
            release_at[0] = time.monotonic() + HELD_S

        def nothing() -> None:
            pass

        started = time.monotonic()
        answers = asyncio.run(
            asyncio.wait_for(
                _produce_in_turn(
                    a,
                    b,
                    "moved",
                    [("b", 0, nothing), ("a", 1, hold_a), ("b", 2, nothing), ("b", 3, nothing)],
                ),
                40,
            )
        )
        answered_s = time.monotonic() - started
        assert answers == [("b", 0, 0), ("a", 1, 0), ("b", 2, 0), ("b", 3, 0)], answers
        # Acknowledged from the journals, not after A's held commit.
        assert answered_s < HELD_S, answered_s
        read = confluent_consume(b.bootstrap, "moved", [0], 4, timeout=30)
        assert [m.value() for m in read] == [b"seq-0", b"seq-1", b"seq-2", b"seq-3"]
        assert [m.offset() for m in read] == [0, 1, 2, 3]
        assert fetch_watermarks(b.bootstrap, "moved", 1) == {0: (0, 4)}  # each once
        assert "refused after it was acknowledged" not in b.logs()
    finally:
        release_at[0] = 0.0
        proxy.close()
