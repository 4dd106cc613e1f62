"""librdkafka (confluent-kafka) against real agents and the real control plane (the
checks in tests/agents/client_matrix.py, which test_listeners.py also runs for SASL)."""

from __future__ import annotations

import pytest

from tests.agents import client_matrix
from tests.agents.clients import Endpoint, consume_all, create_topic, produce

pytestmark = [pytest.mark.kafka, pytest.mark.django_db(transaction=True)]


def test_messages_round_trip_with_keys_headers_and_null_values(agent, cluster):
    client_matrix.check_confluent_round_trip(Endpoint(agent(cluster.key).bootstrap))


def test_an_idempotent_producer_gets_dense_offsets(agent, cluster):
    client_matrix.check_idempotent_producer(Endpoint(agent(cluster.key).bootstrap))


def test_one_agent_serves_what_another_agent_wrote(agent, cluster):
    writer, reader = agent(cluster.key), agent(cluster.key)
    assert writer.agent_id != reader.agent_id
    create_topic(writer.bootstrap, "shared", partitions=3)
    produce(writer.bootstrap, [{"topic": "shared", "value": b"m%d" % i} for i in range(90)])

    received = consume_all(reader.bootstrap, "shared", 3, 90)
    assert sorted(m.value() for m in received) == sorted(b"m%d" % i for i in range(90))


def test_list_offsets_earliest_latest_and_by_timestamp(agent, cluster):
    client_matrix.check_list_offsets(Endpoint(agent(cluster.key).bootstrap))


def test_admin_operations(agent, cluster):
    endpoint = Endpoint(agent(cluster.key).bootstrap)
    assert client_matrix.check_admin_operations(endpoint) == cluster.public_id


def test_producing_to_a_new_topic_auto_creates_it(agent, cluster):
    client_matrix.check_auto_create(Endpoint(agent(cluster.key).bootstrap))
