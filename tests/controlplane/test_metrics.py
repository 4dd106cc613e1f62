"""The control plane's own Prometheus metrics: web requests by view, agent-API calls with
their latency, Celery task runs, the build."""

from __future__ import annotations

import pytest

from tests.metadata_store.conftest import AgentApi
from virtualclusters.throughput.tasks import throughput_sample_all

pytestmark = pytest.mark.django_db


def test_metrics_count_requests_agent_calls_tasks_and_the_build(client, alice):
    client.get("/healthz")
    AgentApi(alice["agent_key"])("heartbeat", {"agent_id": "a1", "host": "h", "port": 9092})
    throughput_sample_all.apply()
    response = client.get("/metrics")
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
