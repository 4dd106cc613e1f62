"""Every common client produces and consumes through an agent; codecs cross clients.
The checks live in tests/agents/client_matrix.py; test_listeners.py runs them all for a
plaintext and a SASL client at the same time."""

from __future__ import annotations

import pytest

from tests.agents import client_matrix
from tests.agents.clients import Endpoint

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka]


@pytest.fixture
def endpoint(agent, cluster) -> Endpoint:
    """A plaintext agent of a fresh cluster."""
    return Endpoint(agent(cluster.key).bootstrap)


def test_aiokafka_round_trip_with_keys_headers_and_nulls(endpoint):
    client_matrix.check_aiokafka_round_trip(endpoint)


def test_kcat_produces_and_consumes(endpoint):
    client_matrix.check_kcat(endpoint)


def test_kafkajs_produces_and_consumes(endpoint):
    client_matrix.check_kafkajs(endpoint)


@pytest.mark.parametrize("codec", client_matrix.CODECS)
def test_each_codec_written_by_librdkafka_is_read_by_kafka_python_and_back(endpoint, codec):
    client_matrix.check_codec(endpoint, codec=codec)


def test_one_mebibyte_messages(endpoint):
    client_matrix.check_one_mebibyte_messages(endpoint)


def test_sixty_four_partitions(endpoint):
    client_matrix.check_sixty_four_partitions(endpoint)
