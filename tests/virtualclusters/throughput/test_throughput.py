"""Throughput history: samples a minute apart become rates, per cluster and topic;
old samples go; the page and the API show them; another organization gets a 404."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.metadata_store.conftest import AgentApi, batch
from virtualclusters.throughput.models import ThroughputSample
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
