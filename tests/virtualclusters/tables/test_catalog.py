"""The cluster's Iceberg REST catalog, driven by PyIceberg's RestCatalog and DuckDB's
Iceberg extension over HTTP: namespaces, tables, commits with requirements, tenancy."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import NoSuchTableError

from core.storage import open_store
from tests.virtualclusters.tables.readers import duckdb_rows

pytestmark = pytest.mark.django_db(transaction=True)


def catalog_url(live_server, cluster) -> str:
    return f"{live_server.url}/iceberg/{cluster.public_id}"


@pytest.fixture
def alice_bucket(alice, tmp_path):
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    alice["cluster"].bucket_url = bucket.as_uri()
    alice["cluster"].save(update_fields=["bucket_url"])
    return bucket


def test_pyiceberg_creates_appends_and_reads_back_a_table_in_the_clusters_bucket(
    live_server, alice, alice_bucket
):
    rest = RestCatalog("floe", uri=catalog_url(live_server, alice["cluster"]), token=alice["admin"])
    rest.create_namespace("analytics")
    assert ("analytics",) in rest.list_namespaces()
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", "b", "c"]})
    table = rest.create_table("analytics.people", schema=rows.schema)
    assert table.location().startswith(alice_bucket.as_uri() + f"/{alice['cluster'].public_id}/")
    table.append(rows)
    table.append(rows.slice(0, 1))

    again = rest.load_table("analytics.people")
    assert sorted(again.scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "name": "a"},
        {"id": 1, "name": "a"},
        {"id": 2, "name": "b"},
        {"id": 3, "name": "c"},
    ]
    assert len(again.metadata.snapshots) == 2
    assert rest.list_tables("analytics") == [("analytics", "people")]
    data_files = list(alice_bucket.rglob("*.parquet"))
    assert len(data_files) == 2


def test_a_commit_whose_requirement_no_longer_holds_is_refused_with_409(
    live_server, alice, alice_bucket, api
):
    url = catalog_url(live_server, alice["cluster"])
    first = RestCatalog("a", uri=url, token=alice["admin"])
    first.create_namespace("n")
    rows = pa.table({"id": pa.array([1], pa.int64())})
    table = first.create_table("n.t", schema=rows.schema)
    stale = RestCatalog("b", uri=url, token=alice["admin"]).load_table("n.t")
    table.append(rows)
    path = f"/iceberg/{alice['cluster'].public_id}/v1/namespaces/n/tables/t"
    refused = api(alice["admin"]).post(
        path,
        {
            "identifier": {"namespace": ["n"], "name": "t"},
            "requirements": [
                {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None}
            ],
            "updates": [{"action": "set-properties", "updates": {"x": "1"}}],
        },
        format="json",
    )
    assert refused.status_code == 409, refused.content
    assert refused.json()["error"]["type"] == "CommitFailedException"
    # PyIceberg's writer, refused the same way, reloads and appends on the new snapshot.
    stale.append(rows)
    final = first.load_table("n.t")
    assert final.scan().to_arrow().num_rows == 2
    assert len(final.metadata.snapshots) == 2
    assert "x" not in final.properties


def test_another_organizations_key_finds_no_catalog_and_a_bad_key_is_401(
    live_server, alice, bob, alice_bucket, api
):
    url = catalog_url(live_server, alice["cluster"])
    RestCatalog("a", uri=url, token=alice["admin"]).create_namespace("n")
    client = api(bob["admin"])
    assert client.get(f"/iceberg/{alice['cluster'].public_id}/v1/namespaces").status_code == 404
    bob_agent = api()
    bob_agent.credentials(HTTP_AUTHORIZATION=f"Bearer {bob['agent_key']}")
    assert bob_agent.get(f"/iceberg/{alice['cluster'].public_id}/v1/config").status_code == 404
    answer = api("floe_api_not-a-key").get(f"/iceberg/{alice['cluster'].public_id}/v1/config")
    assert answer.status_code == 401
    assert answer.json()["error"]["type"] == "NotAuthorizedException"
    assert api().get(f"/iceberg/{alice['cluster'].public_id}/v1/config").status_code == 401
    with pytest.raises(NoSuchTableError):
        RestCatalog("a", uri=url, token=alice["admin"]).load_table("n.missing")


def test_a_read_only_key_reads_but_cannot_create(live_server, alice, alice_bucket, api):
    reader = api(alice["reader"])
    base = f"/iceberg/{alice['cluster'].public_id}/v1"
    assert reader.get(f"{base}/namespaces").json() == {"namespaces": []}
    refused = reader.post(f"{base}/namespaces", {"namespace": ["n"]}, format="json")
    assert refused.status_code == 403


def test_duckdb_reads_a_table_through_the_catalog(live_server, alice, alice_bucket):
    url = catalog_url(live_server, alice["cluster"])
    rest = RestCatalog("floe", uri=url, token=alice["admin"])
    rest.create_namespace("n")
    rows = pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"]})
    table = rest.create_table("n.t", schema=rows.schema)
    table.append(rows)
    assert duckdb_rows(
        url, alice["admin"], "n", "t", "SELECT id, name FROM {table} ORDER BY id"
    ) == [
        (1, "a"),
        (2, "b"),
    ]


def test_on_an_s3_bucket_pyiceberg_writes_under_the_clusters_prefix_with_its_own_credentials(
    live_server, alice, moto_s3_url
):
    alice["cluster"].bucket_url = f"{moto_s3_url}&prefix=catalog-test"
    alice["cluster"].save(update_fields=["bucket_url"])
    url = catalog_url(live_server, alice["cluster"])
    rest = RestCatalog("floe", uri=url, token=alice["admin"])  # credentials: the environment
    endpoint = moto_s3_url.split("endpoint=")[1].split("&")[0]
    assert rest.properties["s3.endpoint"] == endpoint  # the catalog's config override
    rest.create_namespace("n")
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
    table = rest.create_table("n.t", schema=rows.schema)
    bucket = moto_s3_url.split("?")[0]
    assert table.location().startswith(f"{bucket}/catalog-test/{alice['cluster'].public_id}/")
    table.append(rows)
    assert (
        RestCatalog("again", uri=url, token=alice["admin"])
        .load_table("n.t")
        .scan()
        .to_arrow()
        .num_rows
        == 3
    )
    keys = [o.key for o in open_store(alice["cluster"].bucket_url).list("")]
    assert [k for k in keys if k.endswith(".parquet")], keys
    assert all(k.startswith(f"{alice['cluster'].public_id}/tables/n/t-") for k in keys), keys


def test_bad_requests_get_the_iceberg_error_model_never_a_500(
    live_server, alice, alice_bucket, api
):
    client = api(alice["admin"])
    base = f"/iceberg/{alice['cluster'].public_id}/v1"
    RestCatalog(
        "a", uri=catalog_url(live_server, alice["cluster"]), token=alice["admin"]
    ).create_namespace("n")
    client.post(
        f"{base}/namespaces/n/tables",
        {"name": "t", "schema": {"type": "struct", "fields": []}},
        format="json",
    )
    bad = {
        ("post", f"{base}/namespaces", '{"namespace": "n"}'): 400,
        ("post", f"{base}/namespaces", '{"namespace": ["a.b"]}'): 400,
        ("post", f"{base}/namespaces", "[1, 2]"): 400,
        ("post", f"{base}/namespaces", '{"namespace": ["%s"]}' % ("x" * 300)): 400,
        ("post", f"{base}/namespaces/n/tables", '{"name": "%s", "schema": {"type": "struct", "fields": []}}' % ("x" * 300)): 400,
        ("post", f"{base}/namespaces", '{"namespace": ["n"]}'): 409,
        ("post", f"{base}/namespaces/n/tables", '{"name": "u", "schema": 7}'): 400,
        ("post", f"{base}/namespaces/n/tables", '{"name": "t", "schema": {"type": "struct", "fields": []}}'): 409,
        ("post", f"{base}/namespaces/missing/tables", '{"name": "u", "schema": {"type": "struct", "fields": []}}'): 404,
        ("post", f"{base}/namespaces/n/tables/t", '{"updates": [{"action": "nope"}]}'): 400,
        ("post", f"{base}/namespaces/n/tables/t", '{"identifier": {"namespace": ["n"], "name": "t"}, "updates": [{"action": "set-current-schema", "schema-id": 99}]}'): 400,
        ("post", f"{base}/namespaces/n/tables/missing", '{"identifier": {"namespace": ["n"], "name": "missing"}}'): 404,
        ("get", f"{base}/namespaces/missing", ""): 404,
        ("delete", f"{base}/namespaces/n", ""): 409,
    }  # fmt: skip
    for (method, path, body), status in bad.items():
        answer = getattr(client, method)(path, body, content_type="application/json")
        assert answer.status_code == status, (method, path, body, answer.content)
        error = answer.json()["error"]
        assert error["code"] == status and error["type"] and error["message"], error
    assert client.delete(f"{base}/namespaces/n/tables/t").status_code == 204
    assert client.delete(f"{base}/namespaces/n").status_code == 204
