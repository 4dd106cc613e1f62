"""Migrations in a real browser (issue 38), against a real source: Tansu (a Kafka broker
Floe did not write) and a Floe agent with the jobs role whose copier copies. A person
creates the migration with the form (a bad regex first: its error shows by its field),
watches its page reload itself until every partition's mirror reaches the source's end
and the group's offsets are copied, cuts over one topic through the page that asks
first, then stops the migration. Every page fits a phone: screenshots at 1366 and 375 px
(FLOE_SCREENSHOT_DIR keeps them)."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from playwright.sync_api import expect

from metadata_store.models import Topic
from tests.agents.conftest import agent, bucket_url  # noqa: F401 - fixtures
from tests.agents.tansu import Tansu
from tests.controlplane.browser.conftest import log_in
from tests.controlplane.browser.test_console_pages import shots_wide_and_narrow
from tests.factories import make_cluster, make_org
from virtualclusters.mirror.models import Migration

pytestmark = [
    pytest.mark.browser,
    pytest.mark.kafka,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(240),
]

TOPICS = {"orders": 1, "payments": 3}
COPIED_S = 90_000  # ms: the copier takes the lease, creates the topics and catches up


@pytest.fixture
def tansu(tmp_path):
    source = Tansu(tmp_path / "tansu.log").start()
    yield source
    source.stop()


def _source(bootstrap: str) -> dict[tuple[str, int], int]:
    """The topics on the source with records (keys, headers), and group billing-1's
    committed offset on payments/1; each partition's end offset from the delivery
    reports (Tansu's ListOffsets can lag what it holds)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, n, 1) for t, n in TOPICS.items()]).values():
        future.result(15)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    ends: dict[tuple[str, int], int] = {}

    def delivered(err, message) -> None:
        assert err is None, err
        key = (message.topic(), message.partition())
        ends[key] = max(ends.get(key, 0), message.offset() + 1)

    for i in range(400):
        topic = "orders" if i % 4 == 0 else "payments"
        producer.produce(
            topic, key=b"k%d" % i, value=b"value %d" % i, headers=[("n", b"%d" % i)],
            partition=i % TOPICS[topic], on_delivery=delivered,
        )  # fmt: skip
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "billing-1"})
    try:
        consumer.commit(offsets=[TopicPartition("payments", 1, 40)], asynchronous=False)
    finally:
        consumer.close()
    return ends


def test_a_person_creates_watches_and_cuts_over_a_migration_from_tansu(
    page,
    live_server,
    agent,  # noqa: F811
    tansu,
    screenshots,
):
    user, org = make_org("Movers")
    cluster, key = make_cluster("landing", org=org)
    ends = _source(tansu.bootstrap)
    copier = agent(key)  # every role: the copier's (jobs) too

    log_in(page, user.email)
    page.goto(f"/clusters/{cluster.public_id}/")
    page.locator(".cluster-tabs").get_by_role("link", name="Migrations").click()
    expect(page.locator("#migrations")).to_contain_text("No migrations yet")
    page.get_by_role("link", name="New migration").click()
    page.get_by_label("Source bootstrap servers").fill(tansu.bootstrap)
    page.get_by_label("Security protocol").select_option("PLAINTEXT")
    page.get_by_label("Topics (regex)").fill("orders|payments(")
    page.get_by_label("Consumer groups (regex)").fill("billing-.*")
    page.get_by_role("button", name="Start migration").click()
    error = page.locator(".field.has-error")
    expect(error).to_have_count(1)
    expect(error).to_contain_text("Topics (regex)")
    expect(error).to_contain_text("not a regular expression")
    shots_wide_and_narrow(page, screenshots, "migration-form-error")
    assert not Migration.objects.exists()
    page.get_by_label("Topics (regex)").fill("orders|payments")
    page.get_by_role("button", name="Start migration").click()
    expect(page.locator("h1")).to_contain_text("Migration")
    migration = Migration.objects.get()
    assert migration.public_id in page.url

    # The page reloads its own state (never navigated again) until every partition's
    # mirror holds the source's records and the group's offset is copied.
    url = page.url
    for (topic, partition), end in ends.items():
        row = page.locator(f'tr[data-partition="{topic}-{partition}"] td')
        expect(row.nth(5)).to_have_text(str(end), timeout=COPIED_S)  # the mirror's end
        expect(row.nth(6)).to_have_text("0")  # records behind
    expect(page.locator("#migration-behind")).to_have_text("0")
    expect(page.locator("#migration-waiting")).to_contain_text("nothing: copying")
    expect(page.locator("#migration-state")).to_contain_text(copier.agent_id)
    group = page.locator('tr[data-group="billing-1"]')
    expect(group).to_contain_text("copied", timeout=30_000)
    expect(group.locator("td").nth(5)).to_have_text("40")
    assert page.url == url
    shots_wide_and_narrow(page, screenshots, "migration-copied")

    # Cut over one topic: the box, then the page that says what happens.
    page.get_by_label("Cut over orders").check()
    before = page.locator("#migration-live").element_handle()
    page.wait_for_function("e => !e.isConnected", arg=before, timeout=10_000)  # swapped
    expect(page.get_by_label("Cut over orders")).to_be_checked()  # the box kept
    page.get_by_role("button", name="Cut over selected…").click()
    confirm = page.locator("#confirm")
    expect(confirm).to_contain_text("Cut over 1 topic?")
    expect(confirm).to_contain_text("becomes writable in Floe")
    expect(confirm).to_contain_text("cannot be undone")
    expect(confirm.locator("tr[data-topic]")).to_have_count(1)
    shots_wide_and_narrow(page, screenshots, "migration-cutover-confirm")
    assert Topic.objects.get(cluster=cluster, name="orders").mirrored_by == migration.public_id
    page.get_by_role("button", name="Cut over 1 topic").click()
    expect(page.locator(".alert-success")).to_contain_text("Cut over: orders")
    expect(page.locator('tr[data-topic="orders"]')).to_contain_text("Cut over")
    expect(page.locator('tr[data-topic="payments"]')).to_contain_text("Mirroring")
    shots_wide_and_narrow(page, screenshots, "migration-cut-over")
    assert Topic.objects.get(cluster=cluster, name="orders").mirrored_by == ""
    assert Topic.objects.get(cluster=cluster, name="payments").mirrored_by == migration.public_id

    # Stop: the page that asks first names the topic still mirrored.
    page.get_by_role("link", name="Stop migration").click()
    expect(page.locator("#confirm tr[data-topic]")).to_have_count(1)
    expect(page.locator('#confirm tr[data-topic="payments"]')).to_be_visible()
    shots_wide_and_narrow(page, screenshots, "migration-stop-confirm")
    page.get_by_role("button", name="Stop migration").click()
    expect(page.locator("#migration-state")).to_contain_text("Stopped")
    assert Migration.objects.get().state == "stopped"
    page.get_by_role("link", name="Migrations").last.click()
    listed = page.locator("#migrations tbody tr")
    expect(listed).to_have_count(1)
    expect(listed).to_contain_text(migration.public_id)
    expect(listed).to_contain_text("Stopped")
    shots_wide_and_narrow(page, screenshots, "migration-list")

    page.goto("/audit?target_type=migration")
    expect(page.locator('tr[data-event^="migration-"]')).to_have_count(3)
    for action in ("created", "cut over", "stopped"):
        expect(page.locator(f'tr[data-event="migration-{action}"]')).to_contain_text(user.email)
