"""The REST API of topic tables: switching one on (raw, or an Avro subject of the
cluster's registry), what cannot change once on, its state, stopping it, and tenancy."""

from __future__ import annotations

import pytest

from metadata_store.models import Topic
from metadata_store.topics import topic_create
from schema_registry.services import schema_register
from virtualclusters.tables.topic_tables import topic_table_enable

pytestmark = pytest.mark.django_db


@pytest.fixture
def orders(alice):
    topic_create(cluster=alice["cluster"], name="orders", num_partitions=3)
    topic_create(cluster=alice["cluster"], name="payments", num_partitions=1)
    return f"/api/v1/clusters/{alice['cluster'].public_id}/topics/orders/table/"


def with_bucket(alice) -> None:
    alice["cluster"].bucket_url = "file:///tmp/alice-tables-bucket"  # nothing is written
    alice["cluster"].save(update_fields=["bucket_url"])


def test_a_cluster_without_a_bucket_cannot_have_tables_yet(api, alice, orders):
    answer = api(alice["admin"]).put(orders, {"schema": "raw"}, format="json")
    assert answer.status_code == 409  # the cluster's state, not the request, is wrong
    assert "no bucket" in answer.json()["details"]["table"][0]


def test_a_raw_table_is_switched_on_described_and_stopped(api, alice, orders):
    with_bucket(alice)
    client = api(alice["admin"])
    on = client.put(orders, {"schema": "raw", "partition_by": "hour"}, format="json")
    assert on.status_code == 200, on.content
    state = on.json()
    assert {k: state[k] for k in ("state", "namespace", "table", "schema", "partition_by")} == {
        "state": "active",
        "namespace": "topics",
        "table": "orders",
        "schema": "raw",
        "partition_by": "hour",
    }
    assert state["catalog_url"].endswith(f"/iceberg/{alice['cluster'].public_id}")
    assert (state["rows"], state["last_offsets"], state["lag_records"]) == (0, {}, 0)
    assert state["dead_letters"] is None  # raw values always "decode"
    assert state["metadata_location"].startswith(
        f"file:///tmp/alice-tables-bucket/{alice['cluster'].public_id}/tables/topics/orders-"
    )
    again = client.put(orders, {"schema": "raw", "partition_by": "hour", "freshness_seconds": 5})
    assert again.status_code == 200 and again.json()["freshness_seconds"] == 5
    renamed = client.put(orders, {"schema": "raw", "table": "other"}, format="json")
    assert renamed.status_code == 409
    assert client.delete(orders).status_code == 204
    assert client.get(orders).json()["state"] == "stopped"
    assert client.put(orders, {"schema": "raw", "partition_by": "hour"}).json()["state"] == (
        "active"
    )


def test_an_avro_subject_of_the_clusters_registry_is_kept_by_name_and_version(api, alice, orders):
    with_bucket(alice)
    schema_register(
        cluster=alice["cluster"], subject="payments-value", fingerprint="b" * 64,
        schema_type="AVRO", references=[], checked_latest=0,
    )  # fmt: skip
    client = api(alice["admin"])
    path = orders.replace("/orders/", "/payments/")
    unknown = client.put(path, {"schema": {"subject": "nope"}}, format="json")
    # A subject or version the registry lacks: a conflict with its state (409); a schema
    # that is no subject at all: a bad value (400).
    assert unknown.status_code == 409 and "nope" in unknown.json()["details"]["schema"][0]
    no_version = client.put(path, {"schema": {"subject": "payments-value", "version": 2}})
    assert no_version.status_code == 409
    on = client.put(path, {"schema": {"subject": "payments-value", "version": 1}}, format="json")
    assert on.status_code == 200, on.content
    assert on.json()["schema"] == {"subject": "payments-value", "version": 1}
    assert on.json()["dead_letters"] == {"table": "payments_dead_letters", "rows": 0}
    bad = client.put(orders, {"schema": {"subject": 3}}, format="json")
    assert bad.status_code == 400


def test_another_organization_and_a_topic_without_a_table_find_nothing(api, alice, bob, orders):
    with_bucket(alice)
    assert api(alice["reader"]).get(orders).status_code == 404  # not kept as a table
    assert api(alice["reader"]).put(orders, {"schema": "raw"}, format="json").status_code == 403
    assert api(alice["admin"]).put(orders, {"schema": "raw"}, format="json").status_code == 200
    assert api(bob["admin"]).get(orders).status_code == 404
    assert api(bob["admin"]).put(orders, {"schema": "raw"}, format="json").status_code == 404
    assert api(bob["admin"]).delete(orders).status_code == 404


def test_the_topic_page_shows_the_tables_state_and_a_query_to_copy(client, alice, orders, settings):
    with_bucket(alice)
    client.force_login(alice["user"])
    page = f"/clusters/{alice['cluster'].public_id}/topics/orders/"
    before = client.get(page).content.decode()
    assert "Not kept as a table" in before
    topic_table_enable(
        topic=Topic.objects.get(cluster=alice["cluster"], name="orders"), schema="raw"
    )
    after = client.get(page).content.decode()
    assert "<code>topics.orders</code> · active · 0 rows · 0 records behind" in after
    url = f"{settings.FLOE_PUBLIC_URL}/iceberg/{alice['cluster'].public_id}"
    assert f'uri="{url}"' in after.replace("&quot;", '"')


def test_beats_frequent_check_looks_only_at_clusters_that_keep_tables(
    alice, bob, orders, monkeypatch
):
    from virtualclusters.jobs import tasks

    with_bucket(alice)
    checked: list[tuple[int, str]] = []
    monkeypatch.setattr(tasks.cluster_job_check, "delay", lambda *args: checked.append(args))
    tasks.jobs_check("table_append")
    assert checked == []
    topic_table_enable(
        topic=Topic.objects.get(cluster=alice["cluster"], name="orders"), schema="raw"
    )
    tasks.jobs_check("table_append")
    assert checked == [(alice["cluster"].pk, "table_append")]
    tasks.jobs_check("compaction")
    assert {c for c, _ in checked[1:]} >= {alice["cluster"].pk, bob["cluster"].pk}
