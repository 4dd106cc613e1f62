"""The cluster's consumer groups page in a real browser, wide and narrow, with a KIP-848
group beside a classic one (issue 32)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from metadata_store.topics import topic_create
from tests.controlplane.browser.conftest import log_in
from tests.factories import make_cluster, make_org
from virtualclusters.groups.services import group_report_apply

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _member(member_id: str, epoch: int, owned: list[int], target: list[int]) -> dict:
    return {
        "member_id": member_id,
        "group_instance_id": None,
        "client_id": "rdkafka",
        "client_host": "/127.0.0.1",
        "member_epoch": epoch,
        "assignment": [{"topic": "orders", "partitions": owned}] if owned else [],
        "target_assignment": [{"topic": "orders", "partitions": target}],
    }


def test_the_groups_page_shows_each_protocol_with_epochs_and_partitions(page, screenshots):
    user, org = make_org("Readers")
    cluster, _ = make_cluster("orders", org=org)
    topic_create(cluster=cluster, name="orders", num_partitions=6)
    group_report_apply(
        cluster=cluster,
        agent_id="agt-1",
        groups=[
            {
                "group_id": "billing",
                "group_type": "consumer",
                "state": "Reconciling",
                "protocol_type": "consumer",
                "protocol": "uniform",
                "generation": 7,
                "assignment_epoch": 7,
                "members": [
                    _member("m-one", 7, [0, 1], [0, 1]),
                    _member("m-two", 6, [2, 3, 4], [2, 3]),
                    _member("m-three", 7, [], [4, 5]),
                ],
            },
            {
                "group_id": "audit",
                "state": "Stable",
                "protocol_type": "consumer",
                "protocol": "range",
                "generation": 3,
                "leader": "c-one",
                "members": [
                    {
                        "member_id": "c-one",
                        "client_id": "kafka-python",
                        "client_host": "/127.0.0.1",
                        "assignment": [{"topic": "orders", "partitions": [0, 1, 2, 3, 4, 5]}],
                    }
                ],
            },
        ],
    )
    log_in(page, user)
    page.goto(f"/clusters/{cluster.public_id}/groups/")
    expect(page.locator("body")).to_contain_text("consumer protocol (KIP-848)")
    expect(page.locator("body")).to_contain_text("classic protocol")
    expect(page.locator(".assignment-epoch").first).to_have_text("7")
    expect(page.locator("tr", has_text="m-two").locator(".target")).to_contain_text("orders: 2, 3")
    for width in (1366, 375):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=screenshots / f"groups-page-{width}.png", full_page=True)
