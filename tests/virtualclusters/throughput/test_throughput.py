"""Throughput history: samples a minute apart become rates, per cluster and topic;
old samples go; the page and the API show them; another organization gets a 404."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.metadata_store.conftest import AgentApi, batch
from virtualclusters.throughput.models import ThroughputSample, TopicConsumed
from virtualclusters.throughput.services import (
    throughput_prune,
    throughput_sample,
    throughput_series,
)

pytestmark = pytest.mark.django_db


def produce_between_two_samples(tenant: dict) -> None:
    """A sample a minute ago, 60 records (300 bytes) to `orders`, a sample now."""
    agent = AgentApi(tenant["agent_key"])
    tid = agent.create_topic("orders", 2)
    throughput_sample(cluster=tenant["cluster"], at=timezone.now() - timedelta(minutes=1))
    agent(
        "commit",
        {
            "file_key": f"{tenant['cluster'].public_id}/seg/1",
            "size": 300,
            "batches": [batch(tid, 0, 40), batch(tid, 1, 20, pos=100)],
        },
    )
    throughput_sample(cluster=tenant["cluster"])


def test_two_samples_make_a_rate_per_cluster_and_topic(alice, bob):
    produce_between_two_samples(alice)
    series = throughput_series(alice["cluster"], "1h")
    (point,) = series["cluster"]
    assert point["records_per_s"] == pytest.approx(1.0, rel=0.05)  # 60 records in 60 s
    assert point["bytes_per_s"] == pytest.approx(5.0, rel=0.05)  # 300 bytes in 60 s
    assert [p["records_per_s"] for p in series["topics"]["orders"]] == [point["records_per_s"]]
    empty = {"span": "1h", "cluster": [], "topics": {}, "groups": {}}
    assert throughput_series(bob["cluster"], "1h") == empty


def test_samples_past_their_retention_are_pruned(alice, settings):
    settings.FLOE_THROUGHPUT_RETENTION_DAYS = 2
    throughput_sample(cluster=alice["cluster"], at=timezone.now() - timedelta(days=3))
    throughput_sample(cluster=alice["cluster"])
    assert throughput_prune() == 1
    assert ThroughputSample.objects.count() == 1


def test_the_page_draws_the_points_and_the_api_gives_them(client, api, alice, bob):
    produce_between_two_samples(alice)
    client.force_login(alice["user"])
    page = client.get(f"/clusters/{alice['cluster'].public_id}/throughput?range=24h")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'class="point"' in html and "orders" in html and "cdn" not in html.lower()
    body = api(alice["admin"]).get(f"/api/v1/clusters/{alice['cluster'].public_id}/throughput/")
    assert body.status_code == 200 and body.json()["topics"]["orders"][0]["records_per_s"] > 0
    client.force_login(bob["user"])
    assert client.get(f"/clusters/{alice['cluster'].public_id}/throughput").status_code == 404
    other = api(bob["admin"]).get(f"/api/v1/clusters/{alice['cluster'].public_id}/throughput/")
    assert other.status_code == 404


def heartbeat(tenant: dict, agent_id: str, consumed: dict[str, list[int]]) -> None:
    AgentApi(tenant["agent_key"])(
        "heartbeat", {"agent_id": agent_id, "stats": {"consumed_by_topic": consumed}}
    )


def test_the_growth_of_the_agents_consumed_counters_becomes_throughput_out(alice, bob):
    tid = AgentApi(alice["agent_key"]).create_topic("orders")
    secret = AgentApi(bob["agent_key"]).create_topic("secret")
    throughput_sample(cluster=alice["cluster"], at=timezone.now() - timedelta(minutes=1))
    heartbeat(alice, "agt-1", {tid: [1000, 10]})
    heartbeat(alice, "agt-1", {tid: [1000, 10]})  # the same counters again: no growth
    heartbeat(alice, "agt-1", {tid: [3000, 30]})  # +2000 bytes, +20 records
    heartbeat(alice, "agt-2", {tid: [600, 6]})  # another agent adds its own
    heartbeat(alice, "agt-2", {tid: [200, 2]})  # restarted under its id: from zero
    heartbeat(alice, "agt-1", {secret: [10**6, 10**4]})  # bob's topic: not alice's to count
    throughput_sample(cluster=alice["cluster"])
    series = throughput_series(alice["cluster"], "1h")
    (point,) = series["cluster"]
    assert point["records_out_per_s"] == pytest.approx(38 / 60, rel=0.05)
    assert point["bytes_out_per_s"] == pytest.approx(3800 / 60, rel=0.05)
    assert series["topics"]["orders"][0]["records_out_per_s"] == point["records_out_per_s"]
    assert not TopicConsumed.objects.filter(topic__cluster=bob["cluster"]).exists()
