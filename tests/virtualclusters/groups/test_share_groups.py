"""Share groups (KIP-932) in the REST API and the console: members with their agent and
partitions, each partition's start offset, records in flight and lag; resetting and
deleting offsets and deleting a group, only without live members; another organization
sees nothing."""

from __future__ import annotations

import pytest

from metadata_store.models import ShareGroup, SharePartition
from metadata_store.share_state import ACCEPT

pytestmark = pytest.mark.django_db


def _share_group(agent_api, topic_id: str) -> None:
    """Group `sg` reading `orders` from the start; member m1 (on agt-1) holds 3..7 of
    partition 0 after accepting 0..2."""
    agent_api(
        "share/configs/alter",
        {"group_id": "sg", "incremental": True,
         "ops": [{"name": "share.auto.offset.reset", "op": "set", "value": "earliest"}]},
    )  # fmt: skip
    joined = agent_api(
        "share/heartbeat",
        {"group_id": "sg", "member_id": "m1", "member_epoch": 0, "topics": ["orders"],
         "client_id": "worker-1", "agent_id": "agt-1"},
    )  # fmt: skip
    assert joined["error_code"] == 0
    part = {"topic_id": topic_id, "partition": 0}
    got = agent_api(
        "share/fetch",
        {"group_id": "sg", "member_id": "m1", "max_records": 8,
         "partitions": [{**part, "acquire": True}]},
    )  # fmt: skip
    assert got["partitions"][0]["acquired"] == [[0, 7, 1]]
    agent_api(
        "share/fetch",
        {"group_id": "sg", "member_id": "m1",
         "partitions": [{**part, "acks": [{"first": 0, "last": 2, "types": [ACCEPT]}]}]},
    )  # fmt: skip


def _leave(agent_api) -> None:
    """m1 leaves and closes its share session (what releases its records, as Kafka's)."""
    agent_api("share/heartbeat", {"group_id": "sg", "member_id": "m1", "member_epoch": -1})
    agent_api(
        "share/fetch", {"group_id": "sg", "member_id": "m1", "partitions": [], "release": True}
    )


def url(tenant, rest: str = "") -> str:
    return f"/api/v1/clusters/{tenant['cluster'].public_id}/share-groups/{rest}"


def test_it_describes_members_start_offsets_records_in_flight_and_lag(
    api, alice, agent_api, orders, django_assert_max_num_queries
):
    _share_group(agent_api, orders)
    with django_assert_max_num_queries(8):
        response = api(alice["reader"]).get(url(alice))
    assert response.status_code == 200
    (group,) = response.json()
    assert (group["group_id"], group["state"], group["total_lag"], group["locked"]) == (
        "sg",
        "Stable",
        17,
        5,
    )
    (member,) = group["members"]
    assert (member["member_id"], member["client_id"], member["agent_id"]) == (
        "m1",
        "worker-1",
        "agt-1",
    )
    assert member["assignment"] == [{"topic": "orders", "partitions": [0, 1]}]
    (p0,) = group["partitions"]  # partition 1 never fetched: no state yet
    assert p0 == {"topic": "orders", "partition": 0, "start_offset": 3, "high_watermark": 20,
                  "in_flight": 5, "locked": 5, "available": 0, "lag": 17}  # fmt: skip
    assert api(alice["reader"]).get(url(alice, "sg/")).json() == group
    assert api(alice["reader"]).get(url(alice, "nope/")).status_code == 404


def test_offsets_are_reset_and_deleted_only_without_live_members(api, alice, agent_api, orders):
    _share_group(agent_api, orders)
    reset = url(alice, "sg/reset-offsets/")
    busy = api(alice["admin"]).post(reset, {"topic": "orders", "to": "latest"}, format="json")
    assert busy.status_code == 409 and "active members" in busy.json()["error"]
    refused = api(alice["reader"]).post(reset, {"topic": "orders", "to": "latest"}, format="json")
    assert refused.status_code == 403
    _leave(agent_api)  # what m1 held is released: in flight, no longer locked
    [p0] = api(alice["reader"]).get(url(alice, "sg/")).json()["partitions"]
    assert (p0["in_flight"], p0["locked"], p0["available"]) == (5, 0, 5)

    done = api(alice["admin"]).post(reset, {"topic": "orders", "to": "latest"}, format="json")
    assert done.status_code == 200
    assert [(p["partition"], p["start_offset"], p["lag"]) for p in done.json()["partitions"]] == [
        (0, 20, 0),
        (1, 5, 0),
    ]
    back = {"topic": "orders", "to": "offset", "offset": 10, "partitions": [0]}
    moved = api(alice["admin"]).post(reset, back, format="json").json()["partitions"]
    assert [(p["start_offset"], p["in_flight"], p["lag"]) for p in moved] == [
        (10, 0, 10),
        (5, 0, 0),
    ]
    past = api(alice["admin"]).post(reset, {**back, "offset": 999}, format="json").json()
    assert past["partitions"][0]["start_offset"] == 20  # kept within the partition's records
    for bad in ({"topic": "orders", "to": "offset"}, {"topic": "missing", "to": "earliest"},
                {"topic": "orders", "to": "earliest", "partitions": [7]}):  # fmt: skip
        assert api(alice["admin"]).post(reset, bad, format="json").status_code == 400, bad
    nobody = url(alice, "nope/reset-offsets/")
    assert api(alice["admin"]).post(nobody, back, format="json").status_code == 404

    forget = url(alice, "sg/delete-offsets/")
    forgotten = api(alice["admin"]).post(forget, {"topic": "orders"}, format="json")
    assert forgotten.status_code == 200 and forgotten.json()["partitions"] == []
    assert api(alice["admin"]).post(forget, {"topic": "orders"}, format="json").status_code == 404
    assert api(alice["admin"]).delete(url(alice, "sg/")).status_code == 204
    assert api(alice["admin"]).delete(url(alice, "sg/")).status_code == 404
    assert not ShareGroup.objects.exists()


def test_another_organization_sees_and_changes_nothing_of_alices(
    api, alice, bob, agent_api, orders
):
    _share_group(agent_api, orders)
    _leave(agent_api)
    assert api(bob["admin"]).get(url(alice)).status_code == 404
    assert api(bob["admin"]).get(url(alice, "sg/")).status_code == 404
    reset = {"topic": "orders", "to": "latest"}
    assert (
        api(bob["admin"]).post(url(alice, "sg/reset-offsets/"), reset, format="json").status_code
        == 404
    )
    assert api(bob["admin"]).delete(url(alice, "sg/")).status_code == 404
    assert api(bob["admin"]).get(url(bob)).json() == []
    assert (
        api(bob["admin"]).post(url(bob, "sg/reset-offsets/"), reset, format="json").status_code
        == 404
    )
    assert SharePartition.objects.get(group_id="sg").start_offset == 3


def console(tenant) -> str:
    return f"/clusters/{tenant['cluster'].public_id}/share-groups/"


def test_the_console_page_shows_the_group_and_changes_its_offsets(
    client, alice, bob, agent_api, orders
):
    _share_group(agent_api, orders)
    client.force_login(alice["user"])
    page = client.get(console(alice)).content.decode()
    assert 'data-share-group="sg"' in page and "Stable" in page
    assert "agt-1" in page and "orders: 0, 1" in page
    assert '<td class="num start-offset">3</td>' in page and '<td class="num lag">17</td>' in page
    assert "once the group's members have left" in page
    refused = client.post(
        console(alice), {"group_id": "sg", "topic": "orders", "to": "latest", "action": "reset"},
        follow=True,
    )  # fmt: skip
    assert "active members" in refused.content.decode()
    _leave(agent_api)
    done = client.post(
        console(alice),
        {"group_id": "sg", "topic": "orders", "to": "offset", "offset": "12", "action": "reset"},
        follow=True,
    )  # fmt: skip
    assert "Share group sg reads orders from offset 12." in done.content.decode()
    assert SharePartition.objects.get(group_id="sg", partition__index=0).start_offset == 12
    gone = client.post(
        console(alice), {"group_id": "sg", "topic": "orders", "action": "forget"}, follow=True
    )
    assert "Offsets of orders deleted from share group sg." in gone.content.decode()
    assert not SharePartition.objects.exists()
    client.post(console(alice), {"group_id": "sg", "action": "delete"})
    assert "No share groups yet" in client.get(console(alice)).content.decode()

    client.force_login(bob["user"])
    assert client.get(console(alice)).status_code == 404
    assert client.post(console(alice), {"group_id": "sg", "action": "delete"}).status_code == 404
