"""kafka-python (a pure-Python client with its own protocol code) against a real agent
(the checks in tests/agents/client_matrix.py, which test_listeners.py also runs for SASL)."""

from __future__ import annotations

import pytest

from tests.agents import client_matrix
from tests.agents.clients import Endpoint

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]


def test_messages_round_trip_through_kafka_python(agent, cluster):
    client_matrix.check_kafka_python_round_trip(Endpoint(agent(cluster.key).bootstrap))


def test_kafka_python_sees_offsets_and_end_offsets(agent, cluster):
    client_matrix.check_kafka_python_offsets(Endpoint(agent(cluster.key).bootstrap))
