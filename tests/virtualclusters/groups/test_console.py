"""The console's consumer-groups page: groups, members, assignments, a lag chart."""

from __future__ import annotations

import pytest

from metadata_store.models import GroupOffset
from tests.virtualclusters.groups.reports import commit_offsets, member, report

pytestmark = pytest.mark.django_db


def page_url(tenant: dict) -> str:
    return f"/clusters/{tenant['cluster'].public_id}/groups/"


def test_the_page_shows_each_group_with_members_and_a_lag_chart(client, alice, agent_api, orders):
    commit_offsets(agent_api, "billing", "orders", {0: 10, 1: 5})
    agent_api(
        "groups/report",
        {"agent_id": "agt-1", "groups": [report("billing", members=[member("rdk-1", 0, 1)])]},
    )
    client.force_login(alice["user"])
    response = client.get(page_url(alice))
    assert response.status_code == 200
    page = response.content.decode()
    assert 'data-group="billing"' in page and "Stable" in page
    assert 'class="lag-chart' in page and "orders-0" in page and "orders-1" in page
    assert "10 · 30." in page or "10 · 29." in page  # offsets · seconds behind
    assert "rdk-1" in page and "orders: 0, 1" in page
    assert "cdn" not in page.lower()


def test_it_deletes_only_groups_without_live_members(client, alice, agent_api, orders):
    commit_offsets(agent_api, "busy", "orders", {0: 1})
    commit_offsets(agent_api, "idle", "orders", {0: 1})
    agent_api(
        "groups/report",
        {"agent_id": "agt-1", "groups": [report("busy", members=[member("m-1", 0)])]},
    )
    client.force_login(alice["user"])
    refused = client.post(page_url(alice), {"group_id": "busy"}, follow=True)
    assert "active members" in refused.content.decode()
    done = client.post(page_url(alice), {"group_id": "idle"}, follow=True)
    assert "Group idle and its offsets deleted." in done.content.decode()
    assert set(GroupOffset.objects.values_list("group_id", flat=True)) == {"busy"}


def test_another_organization_gets_a_404(client, alice, bob, agent_api, orders):
    commit_offsets(agent_api, "private", "orders", {0: 1})
    client.force_login(bob["user"])
    assert client.get(page_url(alice)).status_code == 404
    assert client.post(page_url(alice), {"group_id": "private"}).status_code == 404
    assert GroupOffset.objects.filter(group_id="private").exists()
    assert "No consumer groups yet" in client.get(page_url(bob)).content.decode()
