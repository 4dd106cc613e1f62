"""The cluster's Diagnostics page and REST answer, from what a real agent reports in its
heartbeats: an agent in a zone that writes a file every few milliseconds (small files),
a producer that sends each record alone (linger.ms 0) naming no zone, and one that
batches and names its zone (no finding). Another organization's key gets a 404.
Screenshots wide and narrow."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from playwright.sync_api import expect
from rest_framework.test import APIClient

from tests.agents.conftest import agent, bucket_url  # noqa: F401 - fixtures
from tests.controlplane.browser.conftest import log_in
from tests.controlplane.browser.test_console_pages import shots_wide_and_narrow
from tests.factories import make_api_key, make_cluster, make_org

pytestmark = [pytest.mark.browser, pytest.mark.kafka, pytest.mark.django_db(transaction=True)]


def _findings(api, url: str, wanted: set[str], timeout_s: float = 30.0) -> dict:
    """The diagnostics once every kind in `wanted` is found (heartbeats every 3 s; small
    files are judged after the agent's first 10 s)."""
    deadline = time.monotonic() + timeout_s
    while True:
        body = api.get(url).json()
        if wanted <= {f["kind"] for f in body["findings"]}:
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.5)


def test_diagnostics_name_small_files_tiny_batches_and_missing_zone_hints(
    page,
    live_server,
    agent,  # noqa: F811
    screenshots,
):
    user, org = make_org("Diag")
    _, other_org = make_org("Elsewhere")
    cluster, key = make_cluster("diag", org=org, auto_create_topics=True)
    running = agent(key, batch_timeout_ms=20, extra=["--zone", "z1"])
    alone = Producer({"bootstrap.servers": running.bootstrap, "linger.ms": 0,
                      "client.id": "one-by-one"})  # fmt: skip
    for n in range(60):
        alone.produce("events", value=f"e-{n}".encode())
        assert alone.flush(10) == 0  # each record its own request and batch
    batched = Producer({"bootstrap.servers": running.bootstrap, "linger.ms": 50,
                        "client.id": "bulk,floe_az=z1"})  # fmt: skip
    for n in range(300):
        batched.produce("events", value=f"b-{n}".encode())
    assert batched.flush(10) == 0

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key(org)}")
    url = f"/api/v1/clusters/{cluster.public_id}/diagnostics/"
    body = _findings(api, url, {"small_files", "tiny_batches", "no_zone_hint"})
    by_kind = {(f["kind"], f["subject"]) for f in body["findings"]}
    assert by_kind == {("small_files", running.agent_id), ("tiny_batches", "one-by-one"),
                       ("no_zone_hint", "one-by-one")}, body["findings"]  # fmt: skip
    (stats,) = body["agents"]
    assert stats["agent_id"] == running.agent_id and stats["zone"] == "z1"
    assert stats["commits_per_min"] > 60 and stats["avg_file_bytes"] < 1024 * 1024
    assert stats["flush_reasons"].get("age", 0) >= 1
    clients = {c["client_id"]: c for c in body["clients"]}
    assert clients["one-by-one"]["records_per_batch"] == 1.0
    assert clients["one-by-one"]["batches"] == 60
    assert clients["bulk,floe_az=z1"]["records"] == 300
    assert clients["bulk,floe_az=z1"]["records_per_batch"] > 2
    advice = {f["kind"]: f["advice"] for f in body["findings"]}
    assert "linger.ms" in advice["tiny_batches"]
    assert "floe_az=z1" in advice["no_zone_hint"]
    assert "--batch-timeout-ms" in advice["small_files"]

    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key(other_org)}")
    assert other.get(url).status_code == 404

    log_in(page, user.email)
    page.goto(f"/clusters/{cluster.public_id}/")
    page.get_by_role("link", name="Diagnostics").click()
    expect(page.locator("li.finding")).to_have_count(3)
    expect(page.locator('li.finding[data-kind="tiny_batches"]')).to_contain_text("linger.ms")
    expect(page.locator(f'tr[data-agent="{running.agent_id}"]')).to_contain_text("age")
    expect(page.locator('tr[data-client="one-by-one"]')).to_contain_text("1.0")
    shots_wide_and_narrow(page, screenshots, "diagnostics")
    alone.flush(1)
    batched.flush(1)
