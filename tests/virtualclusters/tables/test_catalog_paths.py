"""A catalog commit cannot move a table's files out of the table's own prefix in its
cluster's bucket — not its location, not the paths its properties give writers, not a
snapshot's manifest list — for a topic's table and its dead-letter table alike, whoever
commits (an API key, the cluster's agent key)."""

from __future__ import annotations

import pytest

from metadata_store.topics import topic_create
from schema_registry.services import schema_register
from tests.factories import make_cluster

pytestmark = pytest.mark.django_db


@pytest.fixture
def tables(api, alice):
    """Alice's `payments` topic as an Avro table, with its dead-letter table; Bob's
    cluster on the same storage."""
    alice["cluster"].bucket_url = "file:///tmp/shared-tables-bucket"  # nothing is written
    alice["cluster"].save(update_fields=["bucket_url"])
    topic_create(cluster=alice["cluster"], name="payments", num_partitions=1)
    schema_register(
        cluster=alice["cluster"], subject="payments-value", fingerprint="b" * 64,
        schema_type="AVRO", references=[], checked_latest=0,
    )  # fmt: skip
    path = f"/api/v1/clusters/{alice['cluster'].public_id}/topics/payments/table/"
    on = api(alice["admin"]).put(path, {"schema": {"subject": "payments-value"}}, format="json")
    assert on.status_code == 200, on.content
    return f"/iceberg/{alice['cluster'].public_id}/v1/namespaces/topics/tables"


def commit(client, url: str, updates: list[dict]):
    name = url.rsplit("/", 1)[-1]
    body = {"identifier": {"namespace": ["topics"], "name": name}, "requirements": []}
    return client.post(url, {**body, "updates": updates}, format="json")


@pytest.mark.parametrize("table", ["payments", "payments_dead_letters"])
def test_a_commit_cannot_move_a_table_into_another_clusters_folder(api, alice, tables, table):
    other, _ = make_cluster("bob-on-the-same-storage")
    root = api(alice["admin"]).get(f"{tables}/{table}").json()["metadata"]["location"]
    elsewhere = f"file:///tmp/shared-tables-bucket/{other.public_id}/tables/topics/t-1"
    escapes = [
        [{"action": "set-location", "location": elsewhere}],
        [{"action": "set-location", "location": root + "/../../../../" + other.public_id}],
        [{"action": "set-location", "location": root + "-sibling"}],
        [{"action": "set-properties", "updates": {"write.data.path": elsewhere}}],
        [{"action": "set-properties", "updates": {"write.metadata.path": elsewhere}}],
        [{"action": "set-properties", "updates": {"write.object-storage.path": "s3://b/x"}}],
        [{"action": "set-properties", "updates": {"write.data.path": root + "/%2e%2e/x"}}],
    ]
    for who in (alice["admin"], alice["agent_key"]):
        for updates in escapes:
            refused = commit(api(who), f"{tables}/{table}", updates)
            assert refused.status_code == 403, (updates, refused.content)
            error = refused.json()["error"]
            assert error["type"] == "ForbiddenException" and error["code"] == 403
            assert "outside the table's own prefix" in error["message"]
    after = api(alice["admin"]).get(f"{tables}/{table}").json()["metadata"]
    assert after["location"] == root and "write.data.path" not in after["properties"]


def test_paths_inside_the_tables_own_prefix_are_kept(api, alice, tables):
    root = api(alice["admin"]).get(f"{tables}/payments").json()["metadata"]["location"]
    kept = commit(
        api(alice["agent_key"]),
        f"{tables}/payments",
        [{"action": "set-properties", "updates": {"write.data.path": root + "/data-v2"}}],
    )
    assert kept.status_code == 200, kept.content
    assert kept.json()["metadata"]["properties"]["write.data.path"] == root + "/data-v2"


def test_a_new_table_cannot_name_paths_outside_its_prefix(api, alice, tables):
    created = api(alice["admin"]).post(
        tables,
        {
            "name": "sneaky",
            "schema": {"type": "struct", "fields": []},
            "properties": {"write.data.path": "file:///tmp/shared-tables-bucket/vci_other"},
        },
        format="json",
    )
    assert created.status_code == 403, created.content
    assert created.json()["error"]["type"] == "ForbiddenException"
