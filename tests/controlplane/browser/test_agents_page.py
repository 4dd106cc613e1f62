"""The cluster's Agents page in a real browser, wide and narrow."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.controlplane.browser.conftest import log_in
from tests.factories import make_cluster, make_org
from tests.metadata_store.conftest import AgentApi

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_agents_page_lists_each_agent_with_its_zone(page, live_server, screenshots):
    user, org = make_org("Zoned")
    cluster, key = make_cluster("orders", org=org)
    for n, zone in enumerate(["us-east-1a", "us-east-1a", "us-east-1b", "us-east-1b"]):
        AgentApi(key)(
            "heartbeat",
            {
                "agent_id": f"agt-{zone[-1]}{n}",
                "host": "10.0.1.2",
                "port": 9092 + n,
                "zone": zone,
                "load": 12.5 * n,
                "http_port": 8080,
                "version": "0.1.0",
                "stats": {"get_requests": 16, "get_bytes": 67_108_864, "cache_hits": 90,
                          "cache_misses": 10},
            },
        )  # fmt: skip
    log_in(page, user)
    page.goto(f"/clusters/{cluster.public_id}/")
    page.get_by_role("link", name="Agents").click()
    expect(page.get_by_role("heading", name="Agents")).to_be_visible()
    rows = page.locator("tr[data-agent]")
    expect(rows).to_have_count(4)
    expect(rows.first).to_contain_text("us-east-1a")
    expect(page.locator("#agents")).to_contain_text("64.0")
    expect(page.locator("#agents")).to_contain_text("90%")
    for width in (1366, 375):
        page.set_viewport_size({"width": width, "height": 800})
        page.screenshot(path=screenshots / f"agents-{width}.png", full_page=True)


def test_the_cluster_page_shows_the_journal_backlog_and_the_default_topic_type(
    page, live_server, screenshots
):
    """An agent that reported acknowledged-but-unsequenced journal bytes: the cluster
    page's Unsequenced stat shows them with the oldest entry's age, and the configuration
    form sets the default topic type."""
    user, org = make_org("Journaled")
    cluster, key = make_cluster("fast", org=org)
    AgentApi(key)(
        "heartbeat",
        {
            "agent_id": "agt-j",
            "host": "10.0.1.2",
            "port": 9092,
            "stats": {"journal_unsequenced_bytes": 5 * 1024 * 1024, "journal_oldest_ms": 12_400},
        },
    )
    log_in(page, user)
    page.goto(f"/clusters/{cluster.public_id}/")
    expect(page.locator("#journal-backlog")).to_contain_text("5.0")
    expect(page.locator("#journal-backlog")).to_contain_text("oldest 12 s")
    page.get_by_label("Default topic type").select_option("lightning")
    page.locator("#configuration").get_by_role("button").first.click()
    expect(page.get_by_text("Configuration saved")).to_be_visible()
    cluster.refresh_from_db()
    assert cluster.default_topic_type == "lightning"
    for width in (1366, 375):
        page.set_viewport_size({"width": width, "height": 800})
        page.screenshot(path=screenshots / f"cluster-journal-{width}.png", full_page=True)


def test_agent_groups_and_listeners_on_the_agents_and_cluster_pages(page, live_server, screenshots):
    """Two agent groups, one with a SASL_SSL listener beside the plaintext one: the Agents
    table has Group and Listeners columns, the cluster page a bootstrap address per group
    and listener with its own Copy button; neither page scrolls sideways at 375 px."""
    user, org = make_org("Grouped")
    cluster, key = make_cluster("split", org=org)
    layout = [
        ("agt-east-1", "eu-west-1-vpc-a", [("PLAINTEXT", "PLAINTEXT", "10.1.0.1", 9092),
                                            ("EXTERNAL", "SASL_SSL", "kafka-east.example.com", 19093)]),
        ("agt-east-2", "eu-west-1-vpc-a", [("PLAINTEXT", "PLAINTEXT", "10.1.0.2", 9092),
                                            ("EXTERNAL", "SASL_SSL", "kafka-east.example.com", 19094)]),
        ("agt-west-1", "us-east-1-vpc-b", [("PLAINTEXT", "PLAINTEXT", "10.2.0.1", 9092)]),
    ]  # fmt: skip
    for agent_id, group, listeners in layout:
        AgentApi(key)(
            "heartbeat",
            {
                "agent_id": agent_id,
                "host": listeners[0][2],
                "port": listeners[0][3],
                "agent_group": group,
                "listeners": [
                    {"name": n, "protocol": p, "host": h, "port": port}
                    for n, p, h, port in listeners
                ],
                "version": "0.1.0",
            },
        )
    log_in(page, user)
    page.goto(f"/clusters/{cluster.public_id}/")
    entries = page.locator("#bootstraps dt")
    expect(entries).to_have_count(3)
    expect(entries.nth(0)).to_have_text("eu-west-1-vpc-a · EXTERNAL (SASL_SSL)")
    expect(page.locator("#bootstraps")).to_contain_text(
        "kafka-east.example.com:19093,kafka-east.example.com:19094"
    )
    page.locator("#bootstraps .btn-copy").nth(2).click()
    assert page.evaluate("navigator.clipboard.readText()") == "10.2.0.1:9092"
    for width in (1366, 375):
        page.set_viewport_size({"width": width, "height": 800})
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"cluster page scrolls sideways by {overflow}px at {width}"
        page.screenshot(path=screenshots / f"cluster-groups-{width}.png", full_page=True)
    page.set_viewport_size({"width": 1366, "height": 800})
    page.get_by_role("link", name="Agents").click()
    rows = page.locator("tr[data-agent]")
    expect(rows).to_have_count(3)
    expect(page.locator('tr[data-agent="agt-east-1"] td.group')).to_contain_text("eu-west-1-vpc-a")
    expect(page.locator('tr[data-agent="agt-east-1"] td.listeners')).to_contain_text(
        "EXTERNAL (SASL_SSL) kafka-east.example.com:19093"
    )
    for width in (1366, 375):
        page.set_viewport_size({"width": width, "height": 800})
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"agents page scrolls sideways by {overflow}px at {width}"
        page.screenshot(path=screenshots / f"agents-groups-{width}.png", full_page=True)


def test_long_host_names_leave_every_agents_column_in_view(page, live_server, screenshots):
    """Agents whose listeners advertise long DNS names (a cloud's internal names) and a
    long agent group: at 1366 px the Agents table still fits its card, Heartbeat column
    included — long addresses wrap, each whole in its title — and at 375 px each agent is a
    block of labelled values: neither the page nor the table scrolls sideways."""
    user, org = make_org("Long names")
    cluster, key = make_cluster("far", org=org)
    long_host = "ip-10-120-33-201.eu-central-1.compute.internal.kafka.corp-example.com"
    for n in range(3):
        AgentApi(key)(
            "heartbeat",
            {
                "agent_id": f"agt-long-{n}",
                "host": f"b{n}.{long_host}",
                "port": 9092,
                "agent_group": "eu-central-1-production-vpc-0a1b2c3d4e5f",
                "zone": "eu-central-1a",
                "listeners": [
                    {"name": "INTERNAL", "protocol": "PLAINTEXT", "host": f"b{n}.{long_host}",
                     "port": 9092},
                    {"name": "EXTERNAL", "protocol": "SASL_SSL",
                     "host": f"kafka-{n}.public-endpoint.{long_host}", "port": 19093},
                ],
                "version": "0.1.0",
                "stats": {"get_requests": 16, "get_bytes": 67_108_864, "cache_hits": 90,
                          "cache_misses": 10},
            },
        )  # fmt: skip
    log_in(page, user)
    page.goto(f"/clusters/{cluster.public_id}/agents/")
    expect(page.locator("tr[data-agent]")).to_have_count(3)
    address = page.locator('tr[data-agent="agt-long-0"] td.listeners code').nth(1)
    expect(address).to_have_attribute("title", f"kafka-0.public-endpoint.{long_host}:19093")
    for width in (1366, 375):
        page.set_viewport_size({"width": width, "height": 800})
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"agents page scrolls sideways by {overflow}px at {width}"
        page.screenshot(path=screenshots / f"agents-long-names-{width}.png", full_page=True)
        wrap = page.locator("#agents .table-wrap")
        hidden = wrap.evaluate("w => w.scrollWidth - w.clientWidth")
        assert hidden <= 0, f"the Agents table is cut off by {hidden}px at {width}"
        last_cell = page.locator('tr[data-agent="agt-long-0"] td').last
        expect(last_cell).to_be_visible()
        heartbeat, card = last_cell.bounding_box(), page.locator("#agents").bounding_box()
        assert heartbeat and card
        assert heartbeat["x"] + heartbeat["width"] <= card["x"] + card["width"]
    # At 375 px (the last width) each value carries its column's name.
    label = page.locator('tr[data-agent="agt-long-0"] td.listeners').evaluate(
        "td => getComputedStyle(td, '::before').content"
    )
    assert label == '"Listeners"', label
