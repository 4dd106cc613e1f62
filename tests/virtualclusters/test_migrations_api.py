"""Migrations from another Kafka (issue 30): the REST API (create, list, detail, cutover,
stop), the sealed source password, the copier's agent-API calls (lease, topic creation,
reports, group offsets) and the other tenant seeing none of it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from core.kafka.errors import ErrorCode
from metadata_store.models import GroupLease, GroupOffset, Lease, Partition, Topic
from tests.metadata_store.conftest import AgentApi
from virtualclusters.mirror.models import Migration

pytestmark = pytest.mark.django_db

BODY = {
    "source_bootstrap": "127.0.0.1:29092",
    "source_security": {
        "protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "username": "mover",
        "password": "s3cret-source-password",
    },
    "topics": "orders|payments",
    "groups": "billing-.*",
}


def _url(cluster, *rest: str) -> str:
    return "/".join(["/api/v1/clusters", cluster.public_id, "migrations", *rest]) + "/"


def _create(api, alice, body=BODY) -> dict:
    response = api(alice["admin"]).post(_url(alice["cluster"]), body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def _leased(alice) -> tuple[AgentApi, dict]:
    agent = AgentApi(alice["agent_key"])
    leased = agent("migrations/lease", {"agent_id": "agt-jobs"})["migration"]
    assert leased is not None
    return agent, leased


def test_it_creates_a_migration_and_never_shows_the_password(api, alice):
    created = _create(api, alice)
    assert created["state"] == "running" and created["id"].startswith("mig_")
    assert created["source_security"] == {
        "protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "username": "mover",
    }
    row = Migration.objects.get(public_id=created["id"])
    assert "s3cret" not in row.source_password_sealed
    listed = api(alice["reader"]).get(_url(alice["cluster"])).json()
    assert [m["id"] for m in listed] == [created["id"]]
    detail = api(alice["reader"]).get(_url(alice["cluster"], created["id"])).content
    assert b"s3cret" not in detail


def test_it_refuses_bad_regexes_protocols_and_readers(api, alice):
    client = api(alice["admin"])
    for bad in (
        {**BODY, "topics": "orders("},
        {**BODY, "groups": "[a-"},
        # Python's `re` reads a lone brace as a literal, ECMA-262 (the schema's `regex`) not.
        {**BODY, "topics": "orders}"},
        {**BODY, "groups": "a{"},
        {**BODY, "source_security": {"protocol": "SASL_SSL", "sasl_mechanism": "GSSAPI"}},
        {**BODY, "source_security": {"protocol": "GOPHER"}},
        {"topics": "x"},
    ):
        response = client.post(_url(alice["cluster"]), bad, format="json")
        assert response.status_code == 400, (bad, response.content)
    response = api(alice["reader"]).post(_url(alice["cluster"]), BODY, format="json")
    assert response.status_code == 403
    quantified = {**BODY, "topics": r"orders-\d{2,}|[{}]x|a\}"}
    assert client.post(_url(alice["cluster"]), quantified, format="json").status_code == 201


def test_it_refuses_a_regex_the_two_dialects_read_apart_and_says_where(api, alice):
    """The schema says ECMA-262 (`format: regex`), the agents match with Python's `re`:
    a pattern only one of them takes, or that they read differently, is refused at its
    place (core/ecma_regex.py); one Python cannot compile is a 400, not a server error."""
    client = api(alice["admin"])
    for field, pattern, where in (
        ("topics", "(?P<name>orders)", "at position 0"),
        ("topics", r"orders\Z", "at position 6"),
        ("groups", "app-(?i)x", "at position 4"),
        ("groups", "a++", "at position 2"),
        ("topics", "[]a]", "at position 1"),
        ("topics", "a{99999999999}", "not a regular expression"),
    ):
        response = client.post(_url(alice["cluster"]), {**BODY, field: pattern}, format="json")
        assert response.status_code == 400, (pattern, response.content)
        assert where in str(response.json()["details"][field]), response.json()


def test_another_organization_gets_404_everywhere(api, alice, bob):
    created = _create(api, alice)
    bob_client = api(bob["admin"])
    cluster = alice["cluster"]
    assert bob_client.get(_url(cluster)).status_code == 404
    assert bob_client.post(_url(cluster), BODY, format="json").status_code == 404
    assert bob_client.get(_url(cluster, created["id"])).status_code == 404
    assert bob_client.delete(_url(cluster, created["id"])).status_code == 404
    response = bob_client.post(
        _url(cluster, created["id"], "cutover"), {"topics": ["orders"]}, format="json"
    )
    assert response.status_code == 404
    # Bob's own cluster does not know Alice's migration either, nor do his agents.
    assert bob_client.get(_url(bob["cluster"], created["id"])).status_code == 404
    assert AgentApi(bob["agent_key"])("migrations/lease", {"agent_id": "a"}) == {"migration": None}
    assert Migration.objects.get(public_id=created["id"]).state == "running"


def test_the_copier_leases_it_with_the_password_and_creates_mirrored_topics(api, alice):
    created = _create(api, alice)
    agent, leased = _leased(alice)
    assert leased["id"] == created["id"]
    assert leased["source"]["security"]["password"] == "s3cret-source-password"
    assert leased["topics"] == "orders|payments"
    # Nobody else leases it while the lease lasts.
    assert agent("migrations/lease", {"agent_id": "agt-other"}) == {"migration": None}
    answer = agent(
        "migrations/topic",
        {
            "migration_id": leased["id"],
            "lease": leased["lease"],
            "name": "orders",
            "partitions": 3,
            "configs": {"cleanup.policy": "compact", "retention.ms": "86400000"},
        },
    )
    assert answer["state"] == "mirroring" and answer["error"] == ""
    topic = Topic.objects.get(cluster=alice["cluster"], name="orders")
    assert topic.partition_count == 3 and topic.mirrored_by == created["id"]
    assert topic.configs["cleanup.policy"] == "compact"
    # Another migration of a topic this one mirrors: a conflict.
    again = api(alice["admin"]).post(
        _url(alice["cluster"]), {**BODY, "topics": "ord.*"}, format="json"
    )
    assert again.status_code == 409 and "mirrored by a running migration" in again.content.decode()
    assert set(Partition.objects.filter(topic=topic).values_list("mirrored", flat=True)) == {True}
    listed = agent("topics/list", {"names": ["orders"]})["topics"][0]
    assert listed["mirrored_by"] == created["id"]


def test_the_sources_effective_configs_are_copied_and_apply_after_cutover(api, alice):
    created = _create(api, alice)
    agent, leased = _leased(alice)
    ids = {"migration_id": leased["id"], "lease": leased["lease"]}
    # A source that reports its configs (Kafka, Floe): defaults count, with their values.
    agent(
        "migrations/topic",
        {
            **ids,
            "name": "orders",
            "partitions": 1,
            "configs": {
                "retention.ms": "259200000",
                "cleanup.policy": "delete",
                "segment.bytes": "1073741824",
                "max.message.bytes": "lots",
            },
            "config_origins": {
                "retention.ms": "source_default",
                "cleanup.policy": "topic",
                "segment.bytes": "source_default",
                "max.message.bytes": "topic",
            },
        },
    )
    assert Topic.objects.get(name="orders").configs == {
        "retention.ms": "259200000",
        "cleanup.policy": "delete",
        "segment.bytes": "1073741824",
        "retention.bytes": "-1",  # not reported: Kafka's default
    }
    # A source that reports none (Tansu), into a topic made beforehand in Floe (empty:
    # adopted) with retention of its own: Kafka's defaults, the source's behaviour.
    agent.create_topic("payments", 1, **{"retention.ms": "1000"})
    agent("migrations/topic", {**ids, "name": "payments", "partitions": 1})
    assert Topic.objects.get(name="payments").configs == {
        "retention.ms": "604800000",
        "cleanup.policy": "delete",
        "retention.bytes": "-1",
    }

    client = api(alice["admin"])
    detail = client.get(_url(alice["cluster"], created["id"])).json()
    topics = {t["name"]: t for t in detail["topics"]}
    assert topics["orders"]["configs"] == {
        "retention.ms": {"value": "259200000", "origin": "source_default"},
        "cleanup.policy": {"value": "delete", "origin": "topic"},
        "segment.bytes": {"value": "1073741824", "origin": "source_default"},
        "max.message.bytes": {
            "value": "lots",
            "origin": "topic",
            "error": "Invalid value lots for configuration max.message.bytes: must be an integer",
        },
        "retention.bytes": {"value": "-1", "origin": "kafka_default"},
    }
    assert topics["payments"]["configs"]["retention.ms"] == {
        "value": "604800000",
        "origin": "kafka_default",
    }
    assert {t["retention_applies"] for t in topics.values()} == {"after cutover"}
    response = client.post(
        _url(alice["cluster"], created["id"], "cutover"), {"topics": ["orders"]}, format="json"
    )
    assert {t["name"]: t["retention_applies"] for t in response.json()["topics"]} == {
        "orders": "now",
        "payments": "after cutover",
    }


def test_a_mirrored_topic_grows_when_its_source_did(api, alice):
    _create(api, alice)
    agent, leased = _leased(alice)
    ids = {"migration_id": leased["id"], "lease": leased["lease"]}
    agent("migrations/topic", {**ids, "name": "orders", "partitions": 2})
    grown = agent("migrations/topic", {**ids, "name": "orders", "partitions": 4})
    assert grown["state"] == "mirroring" and grown["error"] == ""
    topic = Topic.objects.get(cluster=alice["cluster"], name="orders")
    assert topic.partition_count == 4
    assert (
        list(Partition.objects.filter(topic=topic).values_list("mirrored", flat=True)) == [True] * 4
    )
    # More than a topic may have: said, the topic still mirrored as it was.
    failed = agent("migrations/topic", {**ids, "name": "orders", "partitions": 20_000})
    assert failed["state"] == "mirroring" and failed["error"].startswith(
        "the source has 20000 partitions: At most"
    )
    assert Topic.objects.get(pk=topic.pk).partition_count == 4
    # Asked again with the count it has, the error is gone.
    again = agent("migrations/topic", {**ids, "name": "orders", "partitions": 4})
    assert again["state"] == "mirroring" and again["error"] == ""


def test_a_topic_written_in_floe_is_not_adopted(api, alice):
    _create(api, alice)
    agent, leased = _leased(alice)
    topic_id = agent.create_topic("payments", 1)
    agent(
        "commit",
        {
            "file_key": f"{alice['cluster'].public_id}/seg-1",
            "size": 100,
            "batches": [{"topic_id": topic_id, "partition": 0, "pos": 0, "len": 100, "records": 1}],
        },
    )
    answer = agent(
        "migrations/topic",
        {
            "migration_id": leased["id"],
            "lease": leased["lease"],
            "name": "payments",
            "partitions": 1,
        },
    )
    assert answer["state"] == "failed" and "written in Floe" in answer["error"]
    assert Topic.objects.get(pk=topic_id).mirrored_by == ""


def test_reports_show_per_partition_state_and_a_lost_lease_is_refused(api, alice):
    created = _create(api, alice)
    agent, leased = _leased(alice)
    ids = {"migration_id": leased["id"], "lease": leased["lease"]}
    agent("migrations/topic", {**ids, "name": "orders", "partitions": 2})
    topic = Topic.objects.get(cluster=alice["cluster"], name="orders")
    agent(
        "mirror/commit",
        {
            **ids,
            "file_key": f"{alice['cluster'].public_id}/mirror/f1",
            "size": 100,
            "batches": [
                {
                    "topic_id": str(topic.id),
                    "partition": 0,
                    "base_offset": 10,
                    "last_offset": 39,
                    "records": 30,
                    "pos": 0,
                    "len": 100,
                }
            ],
            "log_starts": [{"topic_id": str(topic.id), "partition": 0, "offset": 10}],
        },
    )
    answer = agent(
        "migrations/report",
        {
            **ids,
            "waiting_for": "",
            "topics": [
                {
                    "name": "orders",
                    "partitions": [
                        {
                            "partition": 0,
                            "source_log_start": 10,
                            "source_end_offset": 50,
                            "bytes_copied": 100,
                        },
                        {"partition": 1, "source_log_start": 0, "source_end_offset": 0},
                    ],
                }
            ],
            "groups": {"billing-a": {"state": "copied", "partitions": []}},
        },
    )
    assert answer == {"cut_over": [], "mirroring": {"orders": str(topic.id)}}
    detail = api(alice["reader"]).get(_url(alice["cluster"], created["id"])).json()
    (orders,) = detail["topics"]
    assert orders["partitions"][0] == {
        "partition": 0,
        "source_log_start": 10,
        "source_end_offset": 50,
        "destination_log_start": 10,
        "destination_end_offset": 40,
        "records_behind": 10,
        "bytes_copied": 100,
        "error": "",
    }
    assert orders["partitions"][1]["records_behind"] == 0
    assert detail["groups"] == {"billing-a": {"state": "copied", "partitions": []}}
    response = agent.raw("migrations/report", {**ids, "lease": "f" * 32})
    assert response.status_code == 409


def test_an_expired_lease_is_refused_though_nobody_took_it_and_taken_with_the_next_epoch(
    api, alice
):
    """Expiry is the database's clock: a copier whose lease ran out may not report,
    create topics or copy groups, even before another copier takes over; the next
    lease has the next epoch and a new token."""
    _create(api, alice)
    agent, first = _leased(alice)
    ids = {"migration_id": first["id"], "lease": first["lease"]}
    assert agent("migrations/report", {**ids, "lease_s": 10})["cut_over"] == []
    Lease.objects.filter(subject=f"migration {first['id']}").update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    for name, body in (
        ("migrations/report", {}),
        ("migrations/topic", {"name": "orders", "partitions": 1}),
        ("migrations/group-offsets", {"group_id": "billing-a", "offsets": []}),
    ):
        refused = agent.raw(name, {**ids, **body})
        assert refused.status_code == 409 and "expired" in refused.json()["error"], name
    second = agent("migrations/lease", {"agent_id": "agt-other"})["migration"]
    assert second["id"] == first["id"] and second["epoch"] == first["epoch"] + 1
    assert second["lease"] != first["lease"]
    refused = agent.raw("migrations/report", ids)
    assert refused.status_code == 409 and "superseded" in refused.json()["error"]
    assert Migration.objects.get(public_id=first["id"]).lease_agent == "agt-other"


def test_cutover_makes_named_topics_writable_and_stop_releases_the_rest(api, alice):
    created = _create(api, alice)
    agent, leased = _leased(alice)
    ids = {"migration_id": leased["id"], "lease": leased["lease"]}
    for name in ("orders", "payments"):
        agent("migrations/topic", {**ids, "name": name, "partitions": 1})
    client = api(alice["admin"])
    response = client.post(
        _url(alice["cluster"], created["id"], "cutover"), {"topics": ["nope"]}, format="json"
    )
    assert response.status_code == 400
    response = client.post(
        _url(alice["cluster"], created["id"], "cutover"), {"topics": ["orders"]}, format="json"
    )
    assert response.status_code == 200
    states = {t["name"]: t["state"] for t in response.json()["topics"]}
    assert states == {"orders": "cut_over", "payments": "mirroring"}
    assert Topic.objects.get(name="orders").mirrored_by == ""
    assert agent("migrations/report", ids)["cut_over"] == ["orders"]
    # A cut-over topic is never mirrored again.
    assert agent("migrations/topic", {**ids, "name": "orders", "partitions": 1})["state"] == (
        "cut_over"
    )
    assert client.delete(_url(alice["cluster"], created["id"])).status_code == 204
    assert Topic.objects.get(name="payments").mirrored_by == ""
    assert not Partition.objects.filter(mirrored=True).exists()
    assert agent.raw("migrations/report", ids).status_code == 409
    assert agent("migrations/lease", {"agent_id": "agt-jobs"}) == {"migration": None}


def _copying_orders(api, alice) -> tuple[AgentApi, dict]:
    """A migration leased by a copier that mirrors topic orders: (its agent API, the
    migration's id and lease as its calls carry them)."""
    _create(api, alice)
    agent, leased = _leased(alice)
    ids = {"migration_id": leased["id"], "lease": leased["lease"]}
    agent("migrations/topic", {**ids, "name": "orders", "partitions": 1})
    return agent, ids


def _copy(agent, ids, group: str, offset: int) -> dict:
    offsets = [{"topic": "orders", "partition": 0, "offset": offset, "metadata": "m"}]
    return agent("migrations/group-offsets", {**ids, "group_id": group, "offsets": offsets})


def _lease_group(agent, group: str) -> int:
    """The group's lease for agent agt-1, as a coordinator asked about it takes it."""
    agent("register", {"agent_id": "agt-1", "host": "127.0.0.1", "port": 9092})
    answer = agent("groups/leases", {"agent_id": "agt-1", "acquire": [group], "ttl_ms": 30_000})
    return answer["leases"][0]["epoch"]


def test_reads_of_a_group_in_floe_never_stop_its_offsets_being_copied(api, alice):
    """OffsetFetch, DescribeGroups, ListGroups and lag monitors make a coordinator take
    the group's lease, and save nothing: the copy goes on, coordinator or not."""
    agent, ids = _copying_orders(api, alice)
    assert _copy(agent, ids, "billing-a", 42) == {"error_code": 0, "used": ""}
    epoch = _lease_group(agent, "billing-a")
    # (A coordinator that loaded the group saves it as it is: no members.)
    saved = agent(
        "groups/save",
        {"agent_id": "agt-1", "group_id": "billing-a", "epoch": epoch, "generation": 0},
    )
    assert saved == {"error_code": 0}
    fetched = agent("offsets/fetch", {"group_id": "billing-a", "partitions": None})
    assert [o["offset"] for o in fetched["offsets"]] == [42]
    assert _copy(agent, ids, "billing-a", 50) == {"error_code": 0, "used": ""}
    assert GroupOffset.objects.get(group_id="billing-a").committed_offset == 50
    GroupLease.objects.filter(group_id="billing-a").update(expires_at=timezone.now())
    assert _copy(agent, ids, "billing-a", 51)["error_code"] == 0


@pytest.mark.parametrize("group_type", ["classic", "consumer"])
def test_a_group_a_consumer_joined_in_floe_is_never_overwritten(api, alice, group_type):
    """Classic (JoinGroup/SyncGroup) and KIP-848 groups alike: the coordinator's first
    save with a member marks the group joined."""
    agent, ids = _copying_orders(api, alice)
    assert _copy(agent, ids, "billing-a", 42)["error_code"] == 0
    epoch = _lease_group(agent, "billing-a")
    member = {"member_id": "m-1", "client_id": "c", "client_host": "/127.0.0.1"}
    body = {"agent_id": "agt-1", "group_id": "billing-a", "epoch": epoch, "generation": 1}
    if group_type == "consumer":
        member.update(member_epoch=1, topic_names=["orders"])
        body.update(group_type="consumer", extra={"assignment_epoch": 1})
    assert agent("groups/save", {**body, "members": [member]}) == {"error_code": 0}
    joined = GroupLease.objects.get(group_id="billing-a").joined_at
    assert joined is not None
    refused = _copy(agent, ids, "billing-a", 50)
    assert refused == {
        "error_code": ErrorCode.NOT_COORDINATOR,
        "used": f"active in Floe: a consumer joined at {joined:%Y-%m-%d %H:%M:%S} UTC",
    }
    assert GroupOffset.objects.get(group_id="billing-a").committed_offset == 42
    # … nor once it is empty again, its lease expired: a group used in Floe is Floe's.
    assert agent("groups/save", {**body, "generation": 2, "members": []}) == {"error_code": 0}
    GroupLease.objects.filter(group_id="billing-a").update(expires_at=timezone.now())
    assert _copy(agent, ids, "billing-a", 50)["error_code"] == ErrorCode.NOT_COORDINATOR
    assert GroupOffset.objects.get(group_id="billing-a").committed_offset == 42


def test_a_group_a_client_committed_to_in_floe_is_never_overwritten(api, alice):
    """An assign-only consumer's commit (no member) through the coordinator makes the
    group Floe's: the copier's own commits do not."""
    agent, ids = _copying_orders(api, alice)
    assert _copy(agent, ids, "billing-b", 42)["error_code"] == 0
    epoch = _lease_group(agent, "billing-b")
    offsets = [{"topic": "orders", "partition": 0, "offset": 44}]
    committed = agent(
        "offsets/commit",
        {"group_id": "billing-b", "offsets": offsets, "agent_id": "agt-1", "epoch": epoch},
    )
    assert committed["offsets"][0]["error_code"] == 0
    refused = _copy(agent, ids, "billing-b", 50)
    assert refused["error_code"] == ErrorCode.NOT_COORDINATOR
    assert refused["used"].startswith("committed in Floe at ")
    assert GroupOffset.objects.get(group_id="billing-b").committed_offset == 44
