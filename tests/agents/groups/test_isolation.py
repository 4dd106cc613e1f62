"""Invariant 4 for consumer groups: a group of cluster A is invisible to cluster B, over
the Kafka protocol and the REST API."""

from __future__ import annotations

import pytest

from metadata_store.models import GroupOffset
from tests import factories
from tests.agents.groups.members import ConfluentMember, balanced, wait_until
from tests.agents.groups.test_clients import create_topic

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka, pytest.mark.timeout(90)]


def test_a_group_of_one_cluster_is_invisible_to_another(agent, cluster, client):
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.structs import OffsetAndMetadata

    other_cluster, other_key = factories.make_cluster("other", auto_create_topics=True)
    mine, theirs = agent(cluster.key), agent(other_key)
    for a in (mine, theirs):
        create_topic(a.bootstrap, "shared", 1)  # the same topic name in both clusters

    member = ConfluentMember("a-0", mine.bootstrap, "payroll", "shared")
    member.start()
    admin = KafkaAdminClient(bootstrap_servers=mine.bootstrap, request_timeout_ms=15000)
    other = KafkaAdminClient(bootstrap_servers=theirs.bootstrap, request_timeout_ms=15000)
    try:
        wait_until(lambda: balanced([member], 1), 30, "cluster A's group is up")
        admin.alter_group_offsets(
            "ledger", {TopicPartition("shared", 0): OffsetAndMetadata(4, "", -1)}
        )
        # A group with offsets only is listed from the metadata store's groups (a CI run
        # once saw the list right after the commit without it): allow it a few seconds.
        wait_until(
            lambda: {g["group_id"] for g in admin.list_groups()} == {"payroll", "ledger"},
            10,
            "cluster A's agent lists both groups",
        )

        # Cluster B's agent knows neither group, and is its own coordinator.
        assert other.list_groups() == []
        described = other.describe_groups(["payroll", "ledger"])
        assert {g: d["group_state"] for g, d in described.items()} == {
            "payroll": "Dead",
            "ledger": "Dead",
        }
        assert other.list_group_offsets({"ledger": None}) == {"ledger": {}}
        assert dict(other.delete_groups(["ledger"])) == {"ledger": "GroupIdNotFoundError"}
        assert other.describe_cluster()["brokers"][0]["port"] == theirs.port

        # REST: B's organization sees an empty list; A's cluster is a 404 to it.
        b_key = factories.make_api_key(other_cluster.organization)
        a_key = factories.make_api_key(cluster.cluster.organization)
        b_url = f"/api/v1/clusters/{other_cluster.public_id}/groups/"
        a_url = f"/api/v1/clusters/{cluster.public_id}/groups/"
        assert client.get(b_url, HTTP_AUTHORIZATION=f"Bearer {b_key}").json() == []
        assert client.get(a_url, HTTP_AUTHORIZATION=f"Bearer {b_key}").status_code == 404
        wait_until(
            lambda: (
                {
                    g["group_id"]
                    for g in client.get(a_url, HTTP_AUTHORIZATION=f"Bearer {a_key}").json()
                }
                == {"payroll", "ledger"}
            ),
            10,
            "cluster A lists both groups",
        )
    finally:
        member.stop()
        admin.close()
        other.close()
    assert GroupOffset.objects.filter(group_id="ledger", cluster=cluster.cluster).exists()
