"""The Pipelines pages in a real browser at 1366 and 375 px, with a live agent: create a
pipeline in the editor, Validate (a problem marked at its line), Dry run on the newest
records of its input topic (read by the agent over the browse channel: outputs, a
filtered record, an error), save, start, pause, a new version and its diff, delete."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from playwright.sync_api import expect

from team.models import AuditEvent
from tests.agents.conftest import agent, bucket_url  # noqa: F401 - fixtures
from tests.factories import PASSWORD, make_cluster, make_org
from tests.metadata_store.conftest import AgentApi
from virtualclusters.pipelines.models import Pipeline

pytestmark = [pytest.mark.browser, pytest.mark.kafka, pytest.mark.django_db(transaction=True)]

WIDTHS = (1366, 375)
# Line 3 names a topic the cluster does not have.
BROKEN = """\
input:
  kafka:
    topics: [ordres]
processors:
  - parse_json: {}
  - filter: 'value.amount > 0'
outputs:
  default: {kafka: {topic: orders-clean}}
errors:
  dead_letter: {topic: orders-dlq}
"""
FIXED = BROKEN.replace("ordres", "orders")


def _log_in(page, user) -> None:
    page.goto("/login")
    page.get_by_label("Email").fill(user.email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()


def _fits(page) -> None:
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    wide = page.evaluate(
        """[...document.querySelectorAll('body *')]
            .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
            .slice(0, 5).map(e => e.tagName + '#' + e.id + '.' + e.className)"""
    )
    assert overflow <= 0, f"{page.url} is {overflow}px wider than the screen: {wide}"


def _shots(page, screenshots, name: str) -> None:
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=screenshots / f"pcontrol-{name}-{width}.png", full_page=True)
        _fits(page)
    page.set_viewport_size({"width": WIDTHS[0], "height": 900})


def test_create_validate_dry_run_start_and_pause_a_pipeline(
    page,
    live_server,
    agent,  # noqa: F811
    screenshots,
):
    user, org = make_org("Pipelines co")
    cluster, key = make_cluster("streams", org=org)
    admin = AgentApi(key)
    for name in ("orders", "orders-clean", "orders-dlq"):
        admin.create_topic(name)
    running = agent(key)
    producer = Producer({"bootstrap.servers": running.bootstrap, "linger.ms": 5})
    for value in (b'{"amount": 7, "id": 1}', b'{"amount": 0, "id": 2}', b"not json"):
        producer.produce("orders", key=b"k", value=value)
    assert producer.flush(30) == 0
    del producer  # no reconnecting to the agent once it stops

    _log_in(page, user)
    page.goto(f"/clusters/{cluster.public_id}/")
    page.get_by_role("link", name="Pipelines", exact=True).click()
    expect(page.locator("#pipelines")).to_contain_text("No pipelines yet")
    page.locator("#pipeline-new").click()

    # Validate: the unknown topic is marked at its line, and listed with its column.
    page.locator("#pipeline-name").fill("orders-router")
    page.locator("#config").fill(BROKEN)
    page.locator("#validate").click()
    marked = page.locator(".editor-line-problem")
    expect(marked).to_have_count(1)
    expect(marked).to_have_attribute("data-line", "3")
    expect(marked).to_have_attribute(
        "title", "column 14: the cluster has no topic 'ordres': create it first"
    )
    expect(page.locator("#problems")).to_contain_text("Line 3, column 14")
    expect(page.locator("#config")).to_have_value(BROKEN)  # the text is kept as typed
    _shots(page, screenshots, "validate")

    # Dry run on the newest records of the input topic, read by the live agent.
    page.locator("#config").fill(FIXED)
    page.locator("#dry-run-button").click()
    expect(page.locator("#valid")).to_be_visible()
    rows = page.locator("tr.dry-run-record")
    expect(rows).to_have_count(3)
    results = [rows.nth(n).get_attribute("data-result") for n in range(3)]
    assert results == ["outputs", "filtered", "error"], results
    expect(rows.nth(0).locator(".dry-run-value")).to_contain_text('"id"')
    expect(rows.nth(2)).to_contain_text("Error in processor 0")
    _shots(page, screenshots, "dry-run")

    # Save: created paused; start; pause.
    page.locator("#save").click()
    expect(page.locator("h1")).to_have_text("orders-router")
    expect(page.locator("#pipeline-state")).to_contain_text("Paused")
    page.locator("#pipeline-start").click()
    expect(page.locator("#pipeline-state")).to_contain_text("Running")
    assert Pipeline.objects.get(name="orders-router").state == "running"
    _shots(page, screenshots, "running")
    page.locator("#pipeline-pause").click()
    expect(page.locator("#pipeline-state")).to_contain_text("Paused")
    assert Pipeline.objects.get(name="orders-router").state == "paused"

    # A second version, and its diff from the first.
    page.locator("#pipeline-edit").click()
    page.locator("#config").fill(FIXED.replace("> 0", "> 5"))
    page.locator("#save").click()
    expect(page.locator("#pipeline-diff")).to_contain_text("Version 1 → 2")
    expect(page.locator("#diff .diff-add")).to_contain_text("value.amount > 5")
    expect(page.locator("#diff .diff-del")).to_contain_text("value.amount > 0")
    _shots(page, screenshots, "versions")

    # The list shows it; delete asks first.
    page.goto(f"/clusters/{cluster.public_id}/pipelines/")
    expect(page.locator("tr[data-pipeline='orders-router']")).to_contain_text("v2")
    _shots(page, screenshots, "list")
    page.goto(f"/clusters/{cluster.public_id}/pipelines/orders-router/")
    page.locator("#pipeline-delete").click()
    _shots(page, screenshots, "delete")
    page.locator("#confirm-delete").click()
    expect(page.locator("#pipelines")).to_contain_text("No pipelines yet")
    actions = list(
        AuditEvent.objects.filter(target_type="pipeline")
        .order_by("id")
        .values_list("action", "actor_label")
    )
    assert [a for a, _ in actions] == ["created", "started", "paused", "changed", "deleted"]
    assert {who for _, who in actions} == {user.email}
