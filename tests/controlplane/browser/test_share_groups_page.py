"""The cluster's share-groups page (KIP-932) in a real browser, wide and narrow: a group
with a live member beside an empty one whose offsets are reset from the page."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from metadata_store.models import Partition
from metadata_store.share_groups import share_configs_alter, share_fetch, share_heartbeat
from metadata_store.topics import topic_create
from tests.controlplane.browser.conftest import log_in
from tests.factories import make_cluster, make_org

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _reading(cluster, group: str, member: str, *, take: int) -> None:
    """`member` of `group` joins (on agent agt-7) and acquires `take` records of
    partition 0 of `orders`; it leaves again when `take` is 0's group is to be empty."""
    share_configs_alter(
        cluster, group_id=group, incremental=True, validate_only=False,
        ops=[{"name": "share.auto.offset.reset", "op": "set", "value": "earliest"}],
    )  # fmt: skip
    share_heartbeat(cluster, group_id=group, member_id=member, member_epoch=0, topics=["orders"],
                    client_id=f"{member}-client", agent_id="agt-7")  # fmt: skip
    topic_id = str(Partition.objects.get(topic__name="orders", index=0).topic_id)
    share_fetch(cluster, group_id=group, member_id=member, max_records=take,
                partitions=[{"topic_id": topic_id, "partition": 0, "acquire": True}])  # fmt: skip


def test_the_share_groups_page_shows_members_offsets_and_resets_an_empty_group(page, screenshots):
    user, org = make_org("Queues")
    cluster, _ = make_cluster("queues", org=org)
    topic_create(cluster=cluster, name="orders", num_partitions=3)
    Partition.objects.filter(topic__name="orders").update(high_watermark=40)
    _reading(cluster, "invoice-workers", "worker-a", take=12)
    _reading(cluster, "audit-replay", "replayer", take=4)
    share_heartbeat(cluster, group_id="audit-replay", member_id="replayer", member_epoch=-1,
                    topics=None)  # fmt: skip
    page.on("dialog", lambda dialog: dialog.accept())
    log_in(page, user)
    page.goto(f"/clusters/{cluster.public_id}/")
    page.get_by_role("link", name="Share groups").click()
    busy = page.locator('[data-share-group="invoice-workers"]')
    expect(busy.locator(".badge")).to_have_text("Stable")
    expect(busy.locator(".share-members")).to_contain_text("agt-7")
    expect(busy.locator(".share-members")).to_contain_text("orders: 0, 1, 2")
    expect(busy.locator('tr[data-partition="orders-0"] .lag')).to_have_text("40")
    expect(busy.locator(".locked")).to_have_text("12")
    expect(busy.locator("form.share-offsets")).to_have_count(0)
    for width in (1366, 375):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=screenshots / f"share-groups-page-{width}.png", full_page=True)
        # Nothing wider than the screen but the tables, which scroll inside their box.
        assert page.evaluate("document.documentElement.scrollWidth") <= width

    idle = page.locator('[data-share-group="audit-replay"]')
    expect(idle.locator(".badge")).to_have_text("Empty")
    idle.get_by_label("Reset to").select_option("offset")
    idle.get_by_role("textbox", name="Offset").fill("25")
    idle.get_by_role("button", name="Reset offsets").click()
    expect(page.locator("body")).to_contain_text(
        "Share group audit-replay reads orders from offset 25."
    )
    idle = page.locator('[data-share-group="audit-replay"]')
    expect(idle.locator('tr[data-partition="orders-0"] .start-offset')).to_have_text("25")
    expect(idle.locator('tr[data-partition="orders-0"] .lag')).to_have_text("15")
    page.screenshot(path=screenshots / "share-groups-page-reset-375.png", full_page=True)
