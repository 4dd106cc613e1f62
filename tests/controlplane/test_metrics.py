"""The control plane's own Prometheus metrics: web requests by view, agent-API calls with
their latency, Celery task runs, the build, and each topic table's lag."""

from __future__ import annotations

import pytest

from metadata_store.clusters import cluster_bucket_claim
from tests.factories import make_cluster
from tests.jobs.segments import SegmentWriter, batch
from tests.metadata_store.conftest import AgentApi
from virtualclusters.tables.models import TopicTable
from virtualclusters.tables.topic_tables import topic_table_enable, topic_table_stop
from virtualclusters.throughput.tasks import throughput_sample_all

pytestmark = pytest.mark.django_db

TOKEN = "scraper-" + "t" * 40


@pytest.fixture(autouse=True)
def metrics_token(settings):
    settings.FLOE_METRICS_TOKEN = TOKEN


def scrape(client, token: str | None = TOKEN):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return client.get("/metrics", headers=headers)


def test_metrics_count_requests_agent_calls_tasks_and_the_build(client, alice):
    client.get("/healthz")
    AgentApi(alice["agent_key"])("heartbeat", {"agent_id": "a1", "host": "h", "port": 9092})
    throughput_sample_all.apply()
    response = scrape(client)
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    text = response.content.decode()
    assert 'floe_web_requests_total{method="GET",status="200",view="healthz"}' in text
    assert 'floe_web_request_seconds_bucket{le="0.005",view="healthz"}' in text
    assert 'floe_agent_api_calls_total{call="heartbeat",outcome="ok"}' in text
    assert 'floe_agent_api_seconds_count{call="heartbeat"}' in text
    task = "virtualclusters.throughput.tasks.throughput_sample_all"
    assert f'floe_celery_task_runs_total{{outcome="success",task="{task}"}}' in text
    assert 'floe_build_info{component="web",version="' in text
    assert "process_cpu_seconds_total" in text  # the process collector


def test_metrics_show_each_topic_tables_lag(client, tmp_path):
    bucket = (tmp_path / "bucket").as_uri()
    (tmp_path / "bucket").mkdir()
    cluster, _ = make_cluster("lagging", auto_create_topics=False)
    cluster_bucket_claim(cluster=cluster, bucket_url=bucket)
    cluster.refresh_from_db()
    writer = SegmentWriter(cluster, bucket)
    topic = writer.topic("orders", partitions=2)
    writer.commit([(topic, 0, batch([(b"k", b"v")] * 10)), (topic, 1, batch([(b"k", b"v")] * 6))])
    topic_table_enable(topic=topic, schema="raw")
    labels = f'{{cluster="{cluster.public_id}",table="topics.orders"}}'
    text = scrape(client).content.decode()
    assert f"floe_table_lag_records{labels} 16.0" in text
    assert f"floe_table_lag_seconds{labels} " in text
    topic_table_stop(topic_table=TopicTable.objects.get(topic=topic))
    assert f"floe_table_lag_records{labels}" not in scrape(client).content.decode()


def test_metrics_name_no_cluster_or_table_to_a_caller_without_the_token(client, tmp_path, settings):
    """The series name every organization's clusters and topics: only the scraper sees them."""
    (tmp_path / "bucket").mkdir()
    cluster, _ = make_cluster("secretive", auto_create_topics=False)
    cluster_bucket_claim(cluster=cluster, bucket_url=(tmp_path / "bucket").as_uri())
    cluster.refresh_from_db()
    writer = SegmentWriter(cluster, (tmp_path / "bucket").as_uri())
    topic = writer.topic("payroll", partitions=1)
    topic_table_enable(topic=topic, schema="raw")
    assert cluster.public_id in scrape(client).content.decode()  # the scraper's view
    for token in (None, "scraper-" + "x" * 40, TOKEN[:-1]):
        response = scrape(client, token)
        body = response.content.decode()
        assert response.status_code == 401, token
        assert response["WWW-Authenticate"].startswith("Bearer")
        assert cluster.public_id not in body and "payroll" not in body
    # A token in another scheme is no token.
    basic = client.get("/metrics", headers={"Authorization": f"Basic {TOKEN}"})
    assert basic.status_code == 401
    # No token set: the endpoint is off for everyone.
    settings.FLOE_METRICS_TOKEN = None
    off = scrape(client)
    assert off.status_code == 404 and "FLOE_METRICS_TOKEN" in off.content.decode()
