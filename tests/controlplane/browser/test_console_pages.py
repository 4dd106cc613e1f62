"""The console's main pages in a real browser, at 1366 px and 375 px wide, with data an
agent reported: nothing overflows the screen, the navigation stays reachable, and the lag
chart stays readable on a phone."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tests.controlplane.browser.conftest import log_in
from tests.factories import make_cluster, make_org
from tests.metadata_store.conftest import AgentApi, batch
from tests.virtualclusters.groups.reports import commit_offsets, member, report
from virtualclusters.throughput.services import throughput_sample

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = (1366, 375)


def _cluster_with_a_lagging_group():
    user, org = make_org("Pages")
    cluster, key = make_cluster("orders-prod", org=org)
    agent = AgentApi(key)
    agent("heartbeat", {"agent_id": "agt-a1", "host": "10.0.1.2", "port": 9092, "zone": "eu-1a"})
    tid = agent.create_topic("orders", 2)
    throughput_sample(cluster=cluster, at=timezone.now() - timedelta(minutes=1))
    now_ms = int(time.time() * 1000)
    agent(
        "commit",
        {
            "file_key": f"{cluster.public_id}/seg/1",
            "size": 300,
            "batches": [
                batch(tid, 0, 10, max_ts=now_ms - 60_000),
                batch(tid, 0, 10, pos=100, max_ts=now_ms - 30_000),
                batch(tid, 1, 5, pos=200, max_ts=now_ms - 10_000),
            ],
        },
    )
    commit_offsets(agent, "billing", "orders", {0: 10, 1: 5})
    agent(
        "groups/report",
        {"agent_id": "agt-a1", "groups": [report("billing", members=[member("rdk-1", 0, 1)])]},
    )
    throughput_sample(cluster=cluster)
    return user, cluster


def _fits_the_screen(page) -> None:
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"{page.url} is {overflow}px wider than the screen"
    nav = page.locator("nav.nav")
    if nav.count():  # every link shown whole: the navigation neither clips nor scrolls
        assert nav.evaluate("n => n.scrollWidth <= n.clientWidth"), f"{page.url}: nav clips"
        for link in nav.locator("a").all():
            box = link.bounding_box()
            assert box and 0 <= box["x"] and box["x"] + box["width"] <= page.viewport_size["width"]


def shots_wide_and_narrow(page, screenshots, name: str) -> None:
    """The whole page at 1366 and 375 px, each checked to fit the screen, saved as
    `<name>-<width>.png`; the viewport back to the fixture's 1280 px after."""
    for width in (1366, 375):
        page.set_viewport_size({"width": width, "height": 900})
        _fits_the_screen(page)
        page.evaluate("window.scrollTo(0, 0)")  # the sticky bar stays at the top
        page.screenshot(path=screenshots / f"{name}-{width}.png", full_page=True)
    page.set_viewport_size({"width": 1280, "height": 800})


def test_the_main_pages_fit_a_phone_and_a_laptop(page, live_server, screenshots, settings):
    # The page loop takes 15–30 s on a loaded machine, past the 15 s an agent's heartbeat
    # counts as live: the one heartbeat below must still count when the cluster page is
    # checked for its bootstrap line (this test is about layout, not liveness).
    settings.FLOE_AGENT_LIVENESS_S = 600
    user, cluster = _cluster_with_a_lagging_group()
    log_in(page, user)
    base = f"/clusters/{cluster.public_id}/"
    pages = {
        "dashboard": "/",
        "cluster": base,
        "agents": base + "agents/",
        "throughput": base.rstrip("/") + "/throughput",
        "groups": base + "groups/",
        "jobs": base.rstrip("/") + "/jobs",
        "security": base.rstrip("/") + "/security",
        "api-keys": "/api-keys",
    }
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 800})
        for name, url in pages.items():
            page.goto(url)
            page.screenshot(path=screenshots / f"{name}-{width}.png", full_page=True)
            _fits_the_screen(page)
    expect(page.locator("#bootstrap")).to_have_count(0)  # the api-keys page has none
    page.goto(base)
    expect(page.locator("#bootstrap")).to_have_text("10.0.1.2:9092")
    page.get_by_role("link", name="Throughput").click()
    expect(page.locator("#chart-records circle.point")).to_have_count(1)  # a chart with points
    expect(page.locator("#chart-topics")).to_contain_text("orders")
    expect(page.locator("#chart-lag circle.point")).to_have_count(1)  # lag over time
    expect(page.locator("#chart-lag")).to_contain_text("billing now 10")


def test_the_lag_chart_stays_readable_on_a_phone(page, live_server):
    user, cluster = _cluster_with_a_lagging_group()
    log_in(page, user)
    page.set_viewport_size({"width": 375, "height": 800})
    page.goto(f"/clusters/{cluster.public_id}/groups/")
    chart = page.locator(".lag-chart").first
    expect(chart).to_be_visible()
    labels = chart.get_by_text("orders-0")
    expect(labels).to_be_visible()
    # Text rendered at least 12 px tall on screen (an SVG scaled down to fit is not).
    height = labels.first.bounding_box()["height"]
    assert height >= 12, f"chart labels are {height:.1f}px tall"
    expect(chart).to_contain_text("10 · ")
