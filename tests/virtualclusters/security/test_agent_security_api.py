"""Agent API: SASL verifiers and ACLs, each visible only to its own cluster's agents."""

from __future__ import annotations

import pytest

from tests.factories import make_cluster
from virtualclusters.security.services import sasl_credential_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent_api(client):
    def call(key: str, name: str, body: dict | None = None, *, raw: str | None = None):
        return client.post(
            f"/agent/v1/{name}",
            data=raw if raw is not None else body or {},
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {key}",
        )

    return call


BINDING = {
    "resource_type": "topic",
    "resource_name": "orders",
    "pattern_type": "literal",
    "principal": "User:alice",
    "host": "*",
    "operation": "read",
    "permission": "allow",
}


def test_it_gives_verifiers_never_passwords_and_only_to_the_users_cluster(agent_api):
    cluster, key = make_cluster("a")
    _, other_key = make_cluster("b")
    _, password = sasl_credential_create(cluster=cluster, username="alice", read_only=True)
    answer = agent_api(key, "sasl/credential", {"username": "alice"}).json()
    assert answer["found"] and answer["read_only"] and not answer["superuser"]
    assert set(answer["scram"]) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    assert answer["plain"].startswith("pbkdf2_sha256$")
    assert password not in str(answer)
    assert agent_api(other_key, "sasl/credential", {"username": "alice"}).json() == {"found": False}
    assert agent_api(key, "sasl/credential", {"username": 5}).status_code == 400
    assert agent_api("floe_agent_nope", "sasl/credential", {"username": "alice"}).status_code == 401


def test_acl_listing_is_versioned(agent_api):
    _, key = make_cluster("a")
    first = agent_api(key, "acls/list", {"version": None}).json()
    assert first["acls"] == []
    same = agent_api(key, "acls/list", {"version": first["version"]}).json()
    assert same == {"version": first["version"], "acls": None}
    assert agent_api(key, "acls/create", {"acls": [BINDING]}).json()["results"] == [
        {"error_code": 0, "error_message": None}
    ]
    changed = agent_api(key, "acls/list", {"version": first["version"]}).json()
    assert changed["version"] != first["version"] and changed["acls"] == [BINDING]
    agent_api(key, "acls/delete", {"filters": [{}]})
    assert agent_api(key, "acls/list", {"version": changed["version"]}).json()["acls"] == []


def test_acl_calls_answer_kafka_errors_for_bad_bindings_and_filters(agent_api):
    _, key = make_cluster("a")
    results = agent_api(
        key,
        "acls/create",
        {"acls": [{**BINDING, "operation": "fly"}, {**BINDING, "principal": "x"}]},
    ).json()["results"]
    assert [r["error_code"] for r in results] == [42, 42]
    assert "fly" in results[0]["error_message"] and "principal" in results[1]["error_message"]
    described = agent_api(key, "acls/describe", {"filter": {"resource_type": "unknown"}}).json()
    assert described["error_code"] == 42
    deleted = agent_api(key, "acls/delete", {"filters": [{"operation": "unknown"}, {}]}).json()
    assert [r["error_code"] for r in deleted["results"]] == [42, 0]
    assert agent_api(key, "acls/create", {"acls": "nope"}).status_code == 400
    assert agent_api(key, "acls/create", raw="[1, 2]").status_code == 400


def test_acls_of_one_cluster_are_invisible_to_another(agent_api):
    _, key = make_cluster("a")
    _, other_key = make_cluster("b")
    agent_api(key, "acls/create", {"acls": [BINDING]})
    assert agent_api(other_key, "acls/list", {}).json()["acls"] == []
    assert agent_api(other_key, "acls/describe", {"filter": {}}).json()["acls"] == []
    deleted = agent_api(other_key, "acls/delete", {"filters": [{}]}).json()["results"]
    assert deleted == [{"error_code": 0, "error_message": None, "acls": []}]
    assert agent_api(key, "acls/describe", {"filter": {}}).json()["acls"] == [BINDING]
