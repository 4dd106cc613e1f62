"""Throughput out from a real consumer: what confluent-kafka fetched through an agent
reaches the control plane in the agent's heartbeat and becomes records and bytes out
per second, for the cluster and the topic, in the API and on the page."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from confluent_kafka import Producer
from django.utils import timezone
from rest_framework.test import APIClient

from metadata_store.models import Agent
from tests.agents.conftest import agent, bucket_url  # noqa: F401 - fixtures
from tests.agents.test_confluent_kafka import consume_all
from tests.factories import make_api_key, make_cluster, make_org
from virtualclusters.throughput.services import throughput_sample

pytestmark = [pytest.mark.kafka, pytest.mark.django_db(transaction=True)]


def test_a_consumer_s_fetches_become_throughput_out(agent, client):  # noqa: F811
    user, org = make_org("Reading")
    cluster, key = make_cluster("reads", org=org, auto_create_topics=True)
    running = agent(key)
    producer = Producer({"bootstrap.servers": running.bootstrap, "linger.ms": 5})
    for n in range(12):
        producer.produce("clicks", value=b"click-%d" % n)
    assert producer.flush(30) == 0
    # Two samples exactly a minute apart, whatever the consumer below takes.
    first = timezone.now() - timedelta(minutes=1)
    throughput_sample(cluster=cluster, at=first)

    assert len(consume_all(running.bootstrap, "clicks", 1, 12)) == 12
    deadline = time.monotonic() + 10  # the next heartbeat (every 3 s) carries the counters
    while time.monotonic() < deadline:
        stats = Agent.objects.get(cluster=cluster, agent_id=running.agent_id).stats
        if any(records for _, records in stats.get("consumed_by_topic", {}).values()):
            break
        time.sleep(0.2)
    throughput_sample(cluster=cluster, at=first + timedelta(minutes=1))

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key(org)}")
    body = api.get(f"/api/v1/clusters/{cluster.public_id}/throughput/").json()
    (point,) = body["cluster"]
    assert point["records_out_per_s"] == pytest.approx(12 / 60, rel=0.05)
    assert point["bytes_out_per_s"] > 0
    assert body["topics"]["clicks"][0]["records_out_per_s"] == point["records_out_per_s"]
    client.force_login(user)
    page = client.get(f"/clusters/{cluster.public_id}/throughput").content.decode()
    assert 'id="chart-records-out"' in page and 'id="chart-topics-out"' in page
    assert 'aria-label="Records out per second"' in page
