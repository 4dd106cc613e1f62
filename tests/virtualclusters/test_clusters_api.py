"""REST API: virtual clusters, their configuration and agent keys."""

from __future__ import annotations

import json

import pytest

from virtualclusters.models import VirtualCluster

pytestmark = pytest.mark.django_db


def test_it_lists_only_the_callers_clusters(api, alice, bob):
    response = api(alice["admin"]).get("/api/v1/clusters/")
    assert response.status_code == 200
    assert [c["id"] for c in response.json()] == [alice["cluster"].public_id]


def test_it_creates_a_cluster_with_config(api, alice):
    response = api(alice["admin"]).post(
        "/api/v1/clusters/", {"name": "prod", "config": {"default_partitions": 6}}, format="json"
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["id"].startswith("vci_") and body["name"] == "prod"
    assert body["config"]["default_partitions"] == 6
    assert body["config"]["auto_create_topics"] is True
    assert VirtualCluster.objects.get(public_id=body["id"]).organization == alice["org"]


@pytest.mark.parametrize(
    "payload, field",
    [
        ({}, "name"),
        ({"name": ""}, "name"),
        ({"name": "x" * 101}, "name"),
        ({"name": "ok", "config": {"default_partitions": 0}}, "default_partitions"),
        ({"name": "ok", "config": {"max_flush_age_ms": "soon"}}, "max_flush_age_ms"),
    ],
)
def test_it_rejects_bad_cluster_payloads_with_a_message(api, alice, payload, field):
    response = api(alice["admin"]).post("/api/v1/clusters/", payload, format="json")
    assert response.status_code == 400
    assert field in response.json()["error"]


def test_it_rejects_a_duplicate_cluster_name(api, alice):
    response = api(alice["admin"]).post(
        "/api/v1/clusters/", {"name": "alice-cluster"}, format="json"
    )
    assert response.status_code == 409  # a fine request; the name is taken
    assert "already exists" in response.json()["error"]


def test_it_describes_renames_and_deletes_a_cluster(api, alice):
    client, cid = api(alice["admin"]), alice["cluster"].public_id
    assert client.get(f"/api/v1/clusters/{cid}/").json()["name"] == "alice-cluster"
    renamed = client.patch(f"/api/v1/clusters/{cid}/", {"name": "renamed"}, format="json")
    assert renamed.status_code == 200 and renamed.json()["name"] == "renamed"
    wrong = client.delete(f"/api/v1/clusters/{cid}/?confirm_name=alice-cluster")
    assert wrong.status_code == 409 and "confirm" in wrong.json()["error"]
    assert client.delete(f"/api/v1/clusters/{cid}/?confirm_name=renamed").status_code == 204
    assert client.get(f"/api/v1/clusters/{cid}/").status_code == 404


def test_it_reads_and_updates_the_configuration(api, alice):
    client, cid = api(alice["admin"]), alice["cluster"].public_id
    assert client.get(f"/api/v1/clusters/{cid}/config/").json()["max_flush_age_ms"] == 250
    response = client.patch(
        f"/api/v1/clusters/{cid}/config/",
        {"max_flush_age_ms": 50, "acls_enabled": True},
        format="json",
    )
    assert response.status_code == 200
    assert response.json()["max_flush_age_ms"] == 50 and response.json()["acls_enabled"] is True
    bad = client.patch(f"/api/v1/clusters/{cid}/config/", {"max_flush_age_ms": 1}, format="json")
    assert bad.status_code == 400 and "max_flush_age_ms" in bad.json()["error"]
    unknown = client.patch(f"/api/v1/clusters/{cid}/config/", {"colour": "blue"}, format="json")
    assert unknown.status_code == 400 and "colour" in unknown.json()["error"]


def test_it_turns_ripcord_on_for_the_clusters_agents(api, alice, bob):
    client, cid = api(alice["admin"]), alice["cluster"].public_id
    assert client.get(f"/api/v1/clusters/{cid}/config/").json()["ripcord"] is False
    on = client.patch(f"/api/v1/clusters/{cid}/config/", {"ripcord": True}, format="json")
    assert on.status_code == 200 and on.json()["ripcord"] is True
    alice["cluster"].refresh_from_db()
    assert alice["cluster"].config()["ripcord"] is True  # what agents learn on heartbeat
    assert bob["cluster"].config()["ripcord"] is False
    bad = client.patch(f"/api/v1/clusters/{cid}/config/", {"ripcord": "sometimes"}, format="json")
    assert bad.status_code == 400 and "ripcord" in bad.json()["error"]


def test_it_sets_the_consumer_group_protocols_timeouts(api, alice):
    client, cid = api(alice["admin"]), alice["cluster"].public_id
    config = client.get(f"/api/v1/clusters/{cid}/config/").json()
    assert config["consumer_session_timeout_ms"] == 45_000  # Kafka's defaults
    assert config["consumer_heartbeat_interval_ms"] == 5_000
    changed = client.patch(
        f"/api/v1/clusters/{cid}/config/",
        {"consumer_session_timeout_ms": 6_000, "consumer_heartbeat_interval_ms": 500},
        format="json",
    )
    assert changed.status_code == 200 and changed.json()["consumer_session_timeout_ms"] == 6_000
    # The heartbeat interval stays below the session timeout, whichever one changes.
    slow = client.patch(
        f"/api/v1/clusters/{cid}/config/", {"consumer_heartbeat_interval_ms": 6_000}, format="json"
    )
    assert slow.status_code == 409 and "consumer_heartbeat_interval_ms" in slow.json()["error"]
    short = client.patch(
        f"/api/v1/clusters/{cid}/config/", {"consumer_session_timeout_ms": 400}, format="json"
    )
    assert short.status_code == 400


def test_it_creates_lists_and_revokes_agent_keys(api, alice):
    client, cid = api(alice["admin"]), alice["cluster"].public_id
    created = client.post(f"/api/v1/clusters/{cid}/agent-keys/", {"name": "edge"}, format="json")
    assert created.status_code == 201
    key = created.json()
    assert key["key"].startswith("floe_agent_") and key["id"].startswith("akn_")
    listed = client.get(f"/api/v1/clusters/{cid}/agent-keys/").json()
    assert key["id"] in [k["id"] for k in listed]
    assert all("key" not in k for k in listed), "secrets are shown once only"
    assert client.delete(f"/api/v1/clusters/{cid}/agent-keys/{key['id']}/").status_code == 204
    assert client.get(f"/api/v1/clusters/{cid}/agent-keys/{key['id']}/").status_code == 404
    listed = client.get(f"/api/v1/clusters/{cid}/agent-keys/?include_revoked=true").json()
    assert [k["revoked_at"] for k in listed if k["id"] == key["id"]] != [None]
    assert key["id"] not in [
        k["id"] for k in client.get(f"/api/v1/clusters/{cid}/agent-keys/").json()
    ]


def test_it_creates_and_lists_topics(api, alice):
    client, cid = api(alice["admin"]), alice["cluster"].public_id
    created = client.post(
        f"/api/v1/clusters/{cid}/topics/", {"name": "orders", "num_partitions": 3}, format="json"
    )
    assert created.status_code == 201, created.json()
    assert created.json()["partitions"] == 3
    bad = client.post(f"/api/v1/clusters/{cid}/topics/", {"name": "bad name!"}, format="json")
    assert bad.status_code == 400 and "illegal" in bad.json()["error"]
    assert [t["name"] for t in client.get(f"/api/v1/clusters/{cid}/topics/").json()] == ["orders"]
    assert client.delete(f"/api/v1/clusters/{cid}/topics/orders/").status_code == 204


# --- tenancy and permissions, for every endpoint ------------------------------------

ENDPOINTS = [
    ("get", "/api/v1/clusters/{cid}/", None),
    ("patch", "/api/v1/clusters/{cid}/", {"name": "stolen"}),
    ("delete", "/api/v1/clusters/{cid}/?confirm_name=alice-cluster", None),
    ("get", "/api/v1/clusters/{cid}/config/", None),
    ("patch", "/api/v1/clusters/{cid}/config/", {"acls_enabled": True}),
    ("get", "/api/v1/clusters/{cid}/agent-keys/", None),
    ("post", "/api/v1/clusters/{cid}/agent-keys/", {"name": "x"}),
    ("get", "/api/v1/clusters/{cid}/agent-keys/{akn}/", None),
    ("delete", "/api/v1/clusters/{cid}/agent-keys/{akn}/", None),
    ("get", "/api/v1/clusters/{cid}/topics/", None),
    ("post", "/api/v1/clusters/{cid}/topics/", {"name": "t"}),
    ("get", "/api/v1/clusters/{cid}/topics/existing/", None),
    ("delete", "/api/v1/clusters/{cid}/topics/existing/", None),
]


def _url(template: str, alice) -> str:
    from metadata_store.topics import topic_create

    if not alice["cluster"].topics.filter(name="existing").exists():
        topic_create(cluster=alice["cluster"], name="existing", num_partitions=1)
    akn = alice["cluster"].agent_keys.first().public_id
    return template.format(cid=alice["cluster"].public_id, akn=akn)


@pytest.mark.parametrize("method, template, payload", ENDPOINTS)
def test_another_organizations_key_gets_404(api, alice, bob, method, template, payload):
    response = getattr(api(bob["admin"]), method)(_url(template, alice), payload, format="json")
    assert response.status_code == 404
    assert "error" in response.json()
    assert VirtualCluster.objects.filter(pk=alice["cluster"].pk, name="alice-cluster").exists()


@pytest.mark.parametrize("method, template, payload", [e for e in ENDPOINTS if e[0] != "get"])
def test_a_read_only_key_cannot_write(api, alice, method, template, payload):
    response = getattr(api(alice["reader"]), method)(_url(template, alice), payload, format="json")
    assert response.status_code == 403
    assert "read-only" in response.json()["error"]


def test_a_read_only_key_can_read(api, alice):
    assert api(alice["reader"]).get("/api/v1/clusters/").status_code == 200


@pytest.mark.parametrize("header", ["", "Bearer nope", "Basic abc", "Bearer floe_api_unknown"])
def test_missing_or_bad_keys_get_401(api, alice, header):
    client = api()
    if header:
        client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get("/api/v1/clusters/")
    assert response.status_code == 401
    assert response.json()["error"]


def test_a_revoked_key_gets_401(api, alice):
    client = api(alice["admin"])
    key_id = client.get("/api/v1/api-keys/").json()[-1]["id"]
    other = client.post("/api/v1/api-keys/", {"name": "temp"}, format="json").json()
    assert api(other["key"]).delete(f"/api/v1/api-keys/{other['id']}/").status_code == 204
    assert api(other["key"]).get("/api/v1/clusters/").status_code == 401
    assert key_id


def test_the_bootstrap_address_is_the_clusters_own_live_agents(api, alice, bob):
    from tests.metadata_store.conftest import AgentApi

    url = f"/api/v1/clusters/{alice['cluster'].public_id}/"
    assert api(alice["reader"]).get(url).json()["bootstrap"] is None  # no agent yet
    for agent_id, host in (("agt-2", "10.0.0.9"), ("agt-1", "10.0.0.8")):
        AgentApi(alice["agent_key"])(
            "heartbeat", {"agent_id": agent_id, "host": host, "port": 9092}
        )
    AgentApi(bob["agent_key"])("heartbeat", {"agent_id": "agt-b", "host": "10.9.9.9", "port": 9092})
    assert api(alice["reader"]).get(url).json()["bootstrap"] == "10.0.0.8:9092,10.0.0.9:9092"
    listed = api(bob["admin"]).get("/api/v1/clusters/").json()
    assert [c["bootstrap"] for c in listed] == ["10.9.9.9:9092"]


def test_lists_come_in_pages_with_a_total_and_a_next_link(api, alice):
    client, cid = api(alice["admin"]), alice["cluster"].public_id
    for n in range(5):
        client.post(f"/api/v1/clusters/{cid}/topics/", {"name": f"t{n}"})
    first = client.get(f"/api/v1/clusters/{cid}/topics/?limit=2")
    assert [t["name"] for t in first.json()] == ["t0", "t1"]
    assert first["X-Total-Count"] == "5" and 'rel="next"' in first["Link"]
    next_url = first["Link"].split(">")[0].lstrip("<")
    assert [t["name"] for t in client.get(next_url).json()] == ["t2", "t3"]
    last = client.get(f"/api/v1/clusters/{cid}/topics/?limit=2&offset=4")
    assert [t["name"] for t in last.json()] == ["t4"] and "Link" not in last
    for bad in ("limit=0", "limit=1001", "offset=-1", "limit="):
        response = client.get(f"/api/v1/clusters/{cid}/topics/?{bad}")
        assert response.status_code == 400, bad


def test_an_unknown_api_path_is_a_json_404(api, alice):
    for path in ("/api/v1/nope/", "/api/v1/clusters/x/y/z/", "/api/v1/clusters/%0A/groups/%0A/"):
        response = api(alice["admin"]).get(path)
        assert response.status_code == 404 and response["Content-Type"] == "application/json"
        assert "error" in response.json()
    hint = api(alice["admin"]).get("/api/v1/clusters").json()["error"]
    assert "trailing slash" in hint


def test_topic_create_refuses_fields_it_does_not_know(api, alice):
    url = f"/api/v1/clusters/{alice['cluster'].public_id}/topics/"
    response = api(alice["admin"]).post(url, {"name": "orders", "partitions": 3})
    assert response.status_code == 400
    assert response.json()["details"] == {"partitions": ["Unknown field."]}


def _schema(tmp_path, *options: str) -> dict:
    """The REST API's OpenAPI schema, as `manage.py spectacular` writes it."""
    from django.core.management import call_command

    out = tmp_path / "schema.json"
    call_command("spectacular", *options, "--format", "openapi-json", "--file", str(out))
    return json.loads(out.read_text())


def test_the_schema_declares_bearer_keys_and_validates_without_warnings(tmp_path):
    schema = _schema(tmp_path, "--validate", "--fail-on-warn")
    assert schema["components"]["securitySchemes"]["apiKey"] == {
        "type": "http",
        "scheme": "bearer",
        "description": schema["components"]["securitySchemes"]["apiKey"]["description"],
    }
    assert schema["paths"]["/api/v1/clusters/"]["get"]["security"] == [{"apiKey": []}]


def test_no_value_matches_two_branches_of_a_schema_one_of(tmp_path):
    """A blank-allowed pattern field is written as oneOf [pattern, maxLength 0]: a pattern
    that also matches "" makes the blank value valid twice, which oneOf forbids (the
    fuzzer then calls the server's 200 for "" a schema violation)."""
    import jsonschema

    schema = _schema(tmp_path)

    def one_ofs(node):
        if isinstance(node, dict):
            if "oneOf" in node:
                yield node["oneOf"]
            for value in node.values():
                yield from one_ofs(value)
        elif isinstance(node, list):
            for value in node:
                yield from one_ofs(value)

    checked = 0
    for branches in one_ofs(schema):
        if all(branch.get("type") == "string" for branch in branches):
            matching = [b for b in branches if jsonschema.Draft4Validator(b).is_valid("")]
            assert len(matching) <= 1, branches
            checked += 1
    assert checked >= 2  # the bucket fields of cluster create and bucket change


def test_a_create_answers_with_the_location_of_what_it_made(api, alice):
    client, cid = api(alice["admin"]), alice["cluster"].public_id
    created = client.post(f"/api/v1/clusters/{cid}/topics/", {"name": "orders"})
    assert created["Location"] == f"/api/v1/clusters/{cid}/topics/orders/"
    assert client.get(created["Location"]).json()["name"] == "orders"


def test_it_changes_a_topics_configs(api, alice):
    client, cid = api(alice["admin"]), alice["cluster"].public_id
    client.post(f"/api/v1/clusters/{cid}/topics/", {"name": "orders"})
    url = f"/api/v1/clusters/{cid}/topics/orders/"
    changed = client.patch(url, {"configs": {"retention.ms": "60000", "cleanup.policy": "compact"}})
    assert changed.status_code == 200
    assert changed.json()["configs"] == {"retention.ms": "60000", "cleanup.policy": "compact"}
    back = client.patch(url, {"configs": {"retention.ms": None}})
    assert back.json()["configs"] == {"cleanup.policy": "compact"}
    bad = client.patch(url, {"configs": {"retention.ms": "soon"}})
    assert bad.status_code == 400 and "integer" in bad.json()["error"]


def test_it_sets_the_default_topic_type_of_the_clusters_topics(api, alice, bob):
    cid, client = alice["cluster"].public_id, api(alice["admin"])
    assert client.get(f"/api/v1/clusters/{cid}/config/").json()["default_topic_type"] == "standard"
    on = client.patch(
        f"/api/v1/clusters/{cid}/config/", {"default_topic_type": "lightning"}, format="json"
    )
    assert on.status_code == 200 and on.json()["default_topic_type"] == "lightning"
    alice["cluster"].refresh_from_db()
    assert alice["cluster"].config()["default_topic_type"] == "lightning"  # agents learn it
    assert bob["cluster"].config()["default_topic_type"] == "standard"
    bad = client.patch(
        f"/api/v1/clusters/{cid}/config/", {"default_topic_type": "turbo"}, format="json"
    )
    assert bad.status_code == 400 and "default_topic_type" in bad.json()["error"]
    other = api(bob["admin"]).patch(
        f"/api/v1/clusters/{cid}/config/", {"default_topic_type": "standard"}, format="json"
    )
    assert other.status_code == 404
