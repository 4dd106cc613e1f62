"""Consumer groups in the metadata store — the agent API calls and the REST API — with
no agent running: reports, listing, deletion, lag, and tenant isolation."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from metadata_store.models import GroupOffset
from tests.virtualclusters.groups.reports import commit_offsets, member, report
from virtualclusters.groups.models import GroupReport

pytestmark = pytest.mark.django_db


# --- agent API ------------------------------------------------------------------------


def test_a_report_names_live_groups_and_forgets_empty_ones_without_offsets(agent_api, orders):
    commit_offsets(agent_api, "kept", "orders", {0: 1})
    answer = agent_api(
        "groups/report",
        {
            "agent_id": "agt-1",
            "groups": [
                report("live", members=[member("a-1", 0, 1)]),
                report("kept", "Empty"),
                report("ghost", "Empty"),
            ],
        },
    )
    assert answer == {"forget": ["ghost"]}
    listed = {g["group_id"]: g for g in agent_api("groups/list", {"group_ids": None})["groups"]}
    assert set(listed) == {"live", "kept"}
    assert (listed["live"]["state"], listed["live"]["agent_id"]) == ("Stable", "agt-1")
    assert (listed["kept"]["state"], listed["kept"]["has_offsets"]) == ("Empty", True)

    # The next report no longer has them: the agent let go (moved, emptied, deleted).
    agent_api("groups/report", {"agent_id": "agt-1", "groups": []})
    listed = {g["group_id"]: g for g in agent_api("groups/list", {"group_ids": None})["groups"]}
    assert set(listed) == {"kept"}
    assert GroupReport.objects.get(group_id="kept").members == []


def test_a_report_older_than_the_liveness_window_counts_as_empty(agent_api, orders):
    commit_offsets(agent_api, "stale", "orders", {0: 1})
    agent_api(
        "groups/report",
        {
            "agent_id": "agt-1",
            "groups": [
                report("stale", members=[member("a-1", 0)]),
                report("gone", members=[member("b-1", 1)]),
            ],
        },
    )
    GroupReport.objects.update(reported_at=timezone.now() - timedelta(minutes=5))
    listed = agent_api("groups/list", {"group_ids": ["stale", "gone"]})["groups"]
    assert [(g["group_id"], g["state"], g["agent_id"]) for g in listed] == [
        ("stale", "Empty", None)
    ]


def test_groups_and_offsets_are_deleted(agent_api, orders):
    commit_offsets(agent_api, "g", "orders", {0: 4, 1: 2})
    deleted = agent_api(
        "offsets/delete",
        {
            "group_id": "g",
            "partitions": [{"topic": "orders", "partition": 0}, {"topic": "nope", "partition": 0}],
        },
    )
    assert deleted == {
        "group_exists": True,
        "partitions": [
            {"topic": "orders", "partition": 0, "error_code": 0},
            {"topic": "nope", "partition": 0, "error_code": 3},
        ],
    }
    assert list(GroupOffset.objects.values_list("partition__index", flat=True)) == [1]
    answer = agent_api("groups/delete", {"group_ids": ["g", "unknown"]})
    assert answer == {
        "groups": [{"group_id": "g", "error_code": 0}, {"group_id": "unknown", "error_code": 69}]
    }
    assert not GroupOffset.objects.exists()
    absent = agent_api("offsets/delete", {"group_id": "g", "partitions": []})
    assert absent["group_exists"] is False


def test_the_agent_api_rejects_malformed_group_calls(agent_api):
    assert agent_api.raw("groups/report", {"groups": []}).status_code == 400
    assert agent_api.raw("groups/report", {"agent_id": "a", "groups": [{}]}).status_code == 400
    assert agent_api.raw("groups/delete", {"group_ids": "g"}).status_code == 400
    assert agent_api.raw("offsets/delete", {"group_id": "g"}).status_code == 400


def test_another_clusters_agent_sees_and_deletes_nothing_of_alices(
    agent_api, bob_agent_api, orders
):
    commit_offsets(agent_api, "shared-name", "orders", {0: 4})
    agent_api(
        "groups/report",
        {"agent_id": "agt-a", "groups": [report("shared-name", members=[member("a-1", 0)])]},
    )
    assert bob_agent_api("groups/list", {"group_ids": None}) == {"groups": []}
    assert bob_agent_api("groups/delete", {"group_ids": ["shared-name"]})["groups"] == [
        {"group_id": "shared-name", "error_code": 69}
    ]
    bob_agent_api("groups/report", {"agent_id": "agt-b", "groups": []})
    fetched = bob_agent_api("offsets/fetch", {"group_id": "shared-name", "partitions": None})
    assert fetched == {"offsets": []}
    assert GroupOffset.objects.count() == 1
    assert GroupReport.objects.get().members[0]["member_id"] == "a-1"


# --- REST API -------------------------------------------------------------------------


def test_it_describes_groups_with_members_assignments_and_lag(
    api, alice, agent_api, orders, django_assert_max_num_queries
):
    commit_offsets(agent_api, "billing", "orders", {0: 10, 1: 5})
    commit_offsets(agent_api, "audit", "orders", {0: 20})
    agent_api(
        "groups/report",
        {"agent_id": "agt-1", "groups": [report("billing", members=[member("rdk-1", 0, 1)])]},
    )
    url = f"/api/v1/clusters/{alice['cluster'].public_id}/groups/"
    with django_assert_max_num_queries(12):
        response = api(alice["reader"]).get(url)
    assert response.status_code == 200
    audit, billing = response.json()
    assert (billing["group_id"], billing["state"], billing["coordinator"]) == (
        "billing",
        "Stable",
        "agt-1",
    )
    assert billing["protocol"] == "range" and billing["generation"] == 3
    assert billing["members"][0]["assignment"] == [{"topic": "orders", "partitions": [0, 1]}]
    p0, p1 = billing["partitions"]
    assert (p0["committed_offset"], p0["high_watermark"], p0["lag"]) == (10, 20, 10)
    # The next record to read sits in the batch written 30 s ago.
    assert 29 <= p0["lag_seconds"] < 40
    assert (p1["lag"], p1["lag_seconds"], p1["member_id"]) == (0, 0.0, "rdk-1")
    assert billing["total_lag"] == 10 and billing["max_lag_seconds"] == p0["lag_seconds"]
    # A group known only by its offsets: Empty, no members.
    assert (audit["state"], audit["members"], audit["total_lag"]) == ("Empty", [], 0)

    one = api(alice["reader"]).get(url + "billing/")
    assert one.status_code == 200
    assert [p["lag"] for p in one.json()["partitions"]] == [10, 0]
    assert one.json()["members"] == billing["members"]


def test_partitions_held_but_never_committed_have_no_lag_yet(api, alice, agent_api, orders):
    agent_api(
        "groups/report",
        {"agent_id": "agt-1", "groups": [report("fresh", members=[member("m-1", 1)])]},
    )
    [group] = (
        api(alice["admin"]).get(f"/api/v1/clusters/{alice['cluster'].public_id}/groups/").json()
    )
    assert group["partitions"] == [
        {
            "topic": "orders",
            "partition": 1,
            "committed_offset": None,
            "high_watermark": 5,
            "lag": None,
            "lag_seconds": None,
            "committed_at": None,
            "member_id": "m-1",
            "client_id": "m",
        }
    ]


def test_it_deletes_a_group_only_without_live_members(api, alice, agent_api, orders):
    commit_offsets(agent_api, "busy", "orders", {0: 1})
    commit_offsets(agent_api, "idle", "orders", {0: 1})
    agent_api(
        "groups/report",
        {
            "agent_id": "agt-1",
            "groups": [report("busy", members=[member("m-1", 0)]), report("idle", "Empty")],
        },
    )
    url = f"/api/v1/clusters/{alice['cluster'].public_id}/groups/"
    refused = api(alice["admin"]).delete(url + "busy/")
    assert refused.status_code == 409 and "active members" in refused.json()["error"]
    assert api(alice["reader"]).delete(url + "idle/").status_code == 403
    assert api(alice["admin"]).delete(url + "idle/").status_code == 204
    assert api(alice["admin"]).delete(url + "idle/").status_code == 404
    assert [g["group_id"] for g in api(alice["admin"]).get(url).json()] == ["busy"]
    # Once the busy group's report is stale (its coordinator died), it may go.
    GroupReport.objects.update(reported_at=timezone.now() - timedelta(minutes=5))
    assert api(alice["admin"]).delete(url + "busy/").status_code == 204


def test_another_organization_cannot_see_or_delete_alices_groups(
    api, alice, bob, agent_api, orders
):
    commit_offsets(agent_api, "private", "orders", {0: 1})
    alice_url = f"/api/v1/clusters/{alice['cluster'].public_id}/groups/"
    assert api(bob["admin"]).get(alice_url).status_code == 404
    assert api(bob["admin"]).get(alice_url + "private/").status_code == 404
    assert api(bob["admin"]).delete(alice_url + "private/").status_code == 404
    bob_url = f"/api/v1/clusters/{bob['cluster'].public_id}/groups/"
    assert api(bob["admin"]).get(bob_url).json() == []
    assert api(bob["admin"]).get(bob_url + "private/").status_code == 404
    assert api().get(alice_url).status_code in (401, 403)
    assert GroupOffset.objects.filter(group_id="private").exists()


def test_a_consumer_protocol_group_shows_epochs_and_targets(api, alice, agent_api, orders, client):
    moving = {
        **member("rdk-1", 0),
        "member_epoch": 4,
        "target_assignment": [{"topic": "orders", "partitions": [0, 1]}],
    }
    agent_api(
        "groups/report",
        {
            "agent_id": "agt-1",
            "groups": [
                report(
                    "kip848",
                    "Reconciling",
                    members=[moving],
                    group_type="consumer",
                    protocol="uniform",
                    generation=5,
                    assignment_epoch=5,
                ),
                report("old-style", members=[member("c-1", 1)]),
            ],
        },
    )
    url = f"/api/v1/clusters/{alice['cluster'].public_id}/groups/"
    kip848, old_style = api(alice["reader"]).get(url).json()
    assert (kip848["group_type"], kip848["generation"], kip848["assignment_epoch"]) == (
        "consumer",
        5,
        5,
    )
    assert kip848["members"][0]["member_epoch"] == 4
    assert kip848["members"][0]["assignment"] == [{"topic": "orders", "partitions": [0]}]
    assert kip848["members"][0]["target_assignment"] == [{"topic": "orders", "partitions": [0, 1]}]
    assert (old_style["group_type"], old_style["assignment_epoch"]) == ("classic", None)
    client.force_login(alice["user"])
    page = client.get(f"/clusters/{alice['cluster'].public_id}/groups/").content.decode()
    assert "consumer protocol (KIP-848)" in page and "classic protocol" in page
    assert 'target assignment epoch <span class="assignment-epoch">5</span>' in page
    assert '<td class="target">orders: 0, 1</td>' in page
