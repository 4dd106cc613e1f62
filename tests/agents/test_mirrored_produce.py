"""Produce to a topic a migration mirrors (issue 30): refused with POLICY_VIOLATION and a
message naming the migration, nothing written; after the cutover accepted at the next
offset."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, Producer

from metadata_store import mirroring
from metadata_store.models import Partition, Topic
from tests.agents.clients import confluent_produce, raw_produce

pytestmark = pytest.mark.django_db(transaction=True)


def _produce_once(bootstrap: str, topic: str) -> KafkaError | tuple[int, int]:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "message.timeout.ms": 10_000, "retries": 0}
    )
    outcome: list = []
    producer.produce(
        topic,
        b"v",
        key=b"k",
        on_delivery=lambda e, m: outcome.append(e or (m.partition(), m.offset())),
    )
    assert producer.flush(15) == 0
    return outcome[0]


def _until(produce, done, timeout_s: float = 20.0):
    """`produce()` again until `done(outcome)`: the agents' topic cache lives 5 s."""
    deadline = time.monotonic() + timeout_s
    outcome = produce()
    while not done(outcome) and time.monotonic() < deadline:
        time.sleep(0.5)
        outcome = produce()
    return outcome


def test_produce_to_a_mirrored_topic_is_refused_until_the_cutover(agent, cluster):
    a = agent(cluster.key)
    b = agent(cluster.key)
    confluent_produce(a.bootstrap, "moved", [(b"k", b"v", None)] * 3)
    topic = Topic.objects.get(cluster=cluster.cluster, name="moved")
    mirroring.topic_mirroring_set(topic=topic, migration_id="mig_test42")
    # At once, whatever the agents' topic metadata says: refused (by the metadata store
    # when an agent's cache is stale), nothing stored.
    error = _produce_once(b.bootstrap, "moved")
    assert isinstance(error, KafkaError) and error.code() == KafkaError.POLICY_VIOLATION, error
    # Once the agents know: refused before anything is written, the migration named in
    # the error message (Produce v8+).
    code, message = _until(
        lambda: raw_produce(b.bootstrap, "moved", 0, b"v"), lambda o: o[1] is not None
    )
    assert code == KafkaError.POLICY_VIOLATION
    assert (
        message == "topic 'moved' is mirrored by migration mig_test42: read-only until its cutover"
    )
    assert Partition.objects.get(topic=topic).high_watermark == 3

    mirroring.topic_mirroring_set(topic=topic, migration_id="")
    outcome = _until(lambda: _produce_once(b.bootstrap, "moved"), lambda o: isinstance(o, tuple))
    assert outcome == (0, 3)
