"""The topic page's message browser in a real browser, reading through a live agent over
the channel the agent opens: a record produced by confluent-kafka shows with its key,
headers and JSON value — also when the control plane cannot reach the agent's HTTP port."""

from __future__ import annotations

import base64
import json
import socket
import time
from datetime import UTC, datetime, timedelta

import pytest
from confluent_kafka import Producer
from playwright.sync_api import expect
from rest_framework.test import APIClient

from metadata_store.models import Topic
from tests.agents.conftest import agent, bucket_url  # noqa: F401 - fixtures
from tests.controlplane.browser.conftest import log_in
from tests.factories import make_api_key, make_cluster, make_org
from virtualclusters.tables.topic_tables import topic_table_enable
from virtualclusters.throughput.services import throughput_sample

pytestmark = [pytest.mark.browser, pytest.mark.kafka, pytest.mark.django_db(transaction=True)]


class Firewall:
    """Connections from this process — the live control plane's — to the blocked ports
    are refused, as by a firewall in front of a network that lets connections out and
    none in; every attempt is recorded."""

    def __init__(self) -> None:
        self.blocked: set[int] = set()
        self.attempts: list[tuple] = []


@pytest.fixture
def firewall(monkeypatch) -> Firewall:
    wall = Firewall()
    connect = socket.socket.connect

    def guarded(sock, address):
        if isinstance(address, tuple) and len(address) >= 2 and address[1] in wall.blocked:
            wall.attempts.append(address)
            raise ConnectionRefusedError(f"firewalled: {address}")
        return connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    return wall


def test_the_message_browser_reads_through_an_agent_the_control_plane_cannot_reach(
    page,
    live_server,
    agent,  # noqa: F811
    firewall,
):
    user, org = make_org("Private network")
    cluster, key = make_cluster("private", org=org, auto_create_topics=True)
    running = agent(key)
    firewall.blocked.add(running.http_port)  # the agent's HTTP port, as it reported it
    producer = Producer({"bootstrap.servers": running.bootstrap, "linger.ms": 5})
    for n in range(2):
        producer.produce("inside", key=f"k-{n}".encode(), value=f"v-{n}".encode())
    assert producer.flush(30) == 0

    log_in(page, user)
    page.goto(f"/clusters/{cluster.public_id}/topics/inside/")
    records = page.locator("li.record")
    expect(records).to_have_count(2)
    expect(records.first.locator(".record-key")).to_have_text("k-1")
    expect(page.locator("#messages")).to_contain_text(running.agent_id)
    assert firewall.attempts == []  # nothing even tried to reach the agent


def test_the_message_browser_says_when_no_agent_is_connected(page, screenshots):
    from tests.metadata_store.conftest import AgentApi

    user, org = make_org("No agents")
    cluster, key = make_cluster("idle", org=org)
    AgentApi(key).create_topic("quiet")
    log_in(page, user)
    page.goto(f"/clusters/{cluster.public_id}/topics/quiet/")
    expect(page.locator("#browse-problem")).to_contain_text(
        "No live agent of this cluster is connected"
    )
    for width in (1366, 375):
        page.set_viewport_size({"width": width, "height": 800})
        page.screenshot(path=screenshots / f"topic-no-agent-{width}.png", full_page=True)
        _fits(page)
    # Kept as an Iceberg table: its state and a query to copy, on a phone too.
    cluster.bucket_url = "file:///tmp/quiet-bucket"  # nothing is written there
    cluster.save(update_fields=["bucket_url"])
    topic_table_enable(topic=Topic.objects.get(cluster=cluster, name="quiet"), schema="raw")
    page.reload()
    expect(page.locator("#table-state")).to_contain_text("topics.quiet · active · 0 rows")
    expect(page.locator("#table-query")).to_contain_text(f"/iceberg/{cluster.public_id}")
    for width in (1366, 375):
        page.set_viewport_size({"width": width, "height": 800})
        page.screenshot(path=screenshots / f"topic-table-{width}.png", full_page=True)
        _fits(page)


def _fits(page) -> None:
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"{page.url} is {overflow}px wider than the screen"


def test_the_message_browser_shows_a_produced_record_with_key_and_headers(
    page,
    live_server,
    agent,  # noqa: F811
    screenshots,
):
    user, org = make_org("Browsing")
    cluster, key = make_cluster("events", org=org, auto_create_topics=True)
    running = agent(key)
    producer = Producer({"bootstrap.servers": running.bootstrap, "linger.ms": 5})
    for n in range(3):
        producer.produce(
            "orders",
            key=f"order-{n}".encode(),
            value=json.dumps({"id": n, "total": 9.5 + n}).encode(),
            headers=[("source", b"web"), ("trace", f"t-{n}".encode())],
        )
    assert producer.flush(30) == 0

    # REST parity: the same records, through the same agent, for an API key.
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key(org)}")
    url = f"/api/v1/clusters/{cluster.public_id}/topics/orders/records/"
    body = api.get(url, {"limit": 2}).json()
    assert [r["offset"] for r in body["records"]] == [1, 2] and body["high_watermark"] == 3
    assert base64.b64decode(body["records"][-1]["key"]) == b"order-2"
    assert body["records"][-1]["headers"][0] == ["source", base64.b64encode(b"web").decode()]

    log_in(page, user)
    page.goto(f"/clusters/{cluster.public_id}/")
    page.get_by_role("link", name="orders").click()
    expect(page.get_by_role("heading", name="orders", level=1)).to_be_visible()
    expect(page.locator("tr[data-partition='0']")).to_contain_text("3")  # end offset

    records = page.locator("li.record")
    expect(records).to_have_count(3)
    newest = records.first  # newest first
    expect(newest).to_have_attribute("data-offset", "2")
    expect(newest.locator(".record-key")).to_have_text("order-2")
    expect(newest.locator(".record-headers")).to_contain_text("source: web")
    expect(newest.locator(".record-headers")).to_contain_text("trace: t-2")
    expect(newest.locator(".record-value")).to_contain_text('"total": 11.5')
    for width in (1366, 375):
        page.set_viewport_size({"width": width, "height": 800})
        page.screenshot(path=screenshots / f"topic-{width}.png", full_page=True)

    page.get_by_label("From offset").fill("1")
    page.get_by_label("Show as").select_option("hex")
    page.get_by_role("button", name="Show").click()
    expect(records).to_have_count(2)
    expect(records.first).to_have_attribute("data-offset", "1")
    expect(records.first.locator(".record-key")).to_have_text("6f 72 64 65 72 2d 31")  # order-1

    # The other new pages, with this live agent's data: the cluster page names its address,
    # the Agents page lists it live, and Throughput charts what it wrote.
    page.goto(f"/clusters/{cluster.public_id}/")
    expect(page.locator("#bootstrap")).to_have_text(running.bootstrap)
    page.get_by_role("link", name="Agents").click()
    row = page.locator("tr[data-agent]")
    expect(row).to_have_count(1)
    expect(row).to_contain_text(running.bootstrap)
    expect(row).to_contain_text("live")
    now = datetime.now(UTC)
    throughput_sample(cluster=cluster, at=now - timedelta(minutes=2))
    throughput_sample(cluster=cluster, at=now)
    page.goto(f"/clusters/{cluster.public_id}/throughput?range=1h")
    expect(page.locator("#chart-records circle.point")).to_have_count(1)  # a chart with points
    expect(page.locator("#chart-topics")).to_contain_text("orders")


def test_another_organizations_topic_page_is_a_404(client, alice, bob):
    from tests.metadata_store.conftest import AgentApi

    AgentApi(bob["agent_key"]).create_topic("secret")
    client.force_login(alice["user"])
    assert client.get(f"/clusters/{bob['cluster'].public_id}/topics/secret/").status_code == 404


def test_browsing_from_a_time_shows_only_the_records_at_or_after_it(
    page,
    live_server,
    agent,  # noqa: F811
):
    user, org = make_org("Timekeeping")
    cluster, key = make_cluster("clock", org=org, auto_create_topics=True)
    running = agent(key)
    first = (int(time.time()) - 60) * 1000 + 250  # ms; records two seconds apart
    producer = Producer({"bootstrap.servers": running.bootstrap, "linger.ms": 5})
    for n in range(3):
        producer.produce("ticks", key=f"tick-{n}".encode(), value=b"x", timestamp=first + 2000 * n)
    assert producer.flush(30) == 0
    between = first + 1000  # after tick-0, before tick-1

    # REST parity: the agent resolves the time as ListOffsets by time does.
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key(org)}")
    url = f"/api/v1/clusters/{cluster.public_id}/topics/ticks/records/"
    body = api.get(url, {"timestamp": between, "offset": 0}).json()  # the time wins
    assert [r["offset"] for r in body["records"]] == [1, 2] and body["from_offset"] == 1
    exact = api.get(url, {"timestamp": first + 2000}).json()  # at the time counts
    assert [r["offset"] for r in exact["records"]] == [1, 2]
    later = api.get(url, {"timestamp": first + 5000}).json()
    assert later["records"] == [] and later["from_offset"] == -1

    log_in(page, user)
    page.goto(f"/clusters/{cluster.public_id}/topics/ticks/")
    records = page.locator("li.record")
    expect(records).to_have_count(3)
    when = datetime.fromtimestamp(between / 1000, tz=UTC).replace(tzinfo=None)
    page.get_by_label("From time (UTC)").fill(when.isoformat(timespec="milliseconds"))
    page.get_by_role("button", name="Show").click()
    expect(records).to_have_count(2)
    expect(records.first).to_have_attribute("data-offset", "1")  # oldest first, from the time
    expect(records.first.locator(".record-key")).to_have_text("tick-1")
    expect(records.last.locator(".record-key")).to_have_text("tick-2")
    expect(page.get_by_label("From time (UTC)")).to_have_attribute(  # the form keeps it
        "value", when.isoformat(timespec="milliseconds")
    )
