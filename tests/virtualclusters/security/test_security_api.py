"""REST API: SASL credentials and ACLs of a cluster (tenancy, permissions, validation)."""

from __future__ import annotations

import base64

import pytest

from core.security.scram import plain_verify, scram_credential
from virtualclusters.security.models import Acl, SaslCredential
from virtualclusters.security.services import acl_binding, acl_create, sasl_credential_create

pytestmark = pytest.mark.django_db


def creds_url(alice) -> str:
    return f"/api/v1/clusters/{alice['cluster'].public_id}/sasl-credentials/"


def acls_url(alice) -> str:
    return f"/api/v1/clusters/{alice['cluster'].public_id}/acls/"


@pytest.mark.parametrize("blank", [{}, {"password": ""}], ids=["left-out", "blank"])
def test_it_creates_a_credential_and_shows_a_generated_password_once(api, alice, blank):
    client = api(alice["admin"])
    created = client.post(creds_url(alice), {"username": "orders-app", **blank}, format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["id"].startswith("scr_") and body["username"] == "orders-app"
    assert body["mechanisms"] == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    password = body["password"]
    assert len(password) >= 24
    listed = client.get(creds_url(alice)).json()
    assert [c["id"] for c in listed] == [body["id"]]
    assert all("password" not in c for c in listed)
    assert "password" not in client.get(creds_url(alice) + body["id"] + "/").json()

    stored = SaslCredential.objects.get(public_id=body["id"])
    assert password not in repr(stored.__dict__), "only verifiers are stored"
    assert plain_verify(password, stored.plain_hash)
    salt = base64.b64decode(stored.scram_sha512["salt"])
    recomputed = scram_credential(
        password, "SCRAM-SHA-512", iterations=stored.scram_sha512["iterations"], salt=salt
    )
    assert recomputed == stored.scram_sha512


def test_it_accepts_a_chosen_password_and_flags(api, alice):
    created = api(alice["admin"]).post(
        creds_url(alice),
        {"username": "ops@example.com", "password": "chosen-password", "superuser": True},
        format="json",
    )
    assert created.status_code == 201
    assert created.json()["password"] == "chosen-password" and created.json()["superuser"]
    reader = api(alice["admin"]).post(
        creds_url(alice), {"username": "auditor", "read_only": True}, format="json"
    )
    assert reader.json()["read_only"] is True and reader.json()["superuser"] is False


@pytest.mark.parametrize(
    "payload, field",
    [
        ({}, "username"),
        ({"username": ""}, "username"),
        ({"username": "bad name!"}, "username"),
        ({"username": "x" * 129}, "username"),
        ({"username": "ok", "password": "short"}, "password"),
        ({"username": "ok", "password": "x" * 257}, "password"),
        ({"username": "ok", "superuser": "maybe"}, "superuser"),
        ({"username": "ok", "superuser": True, "read_only": True}, "read_only"),
        ({"username": "ok", "password": "nul\0inside-it"}, "password"),
    ],
)
def test_it_rejects_bad_credential_payloads_with_a_message(api, alice, payload, field):
    response = api(alice["admin"]).post(creds_url(alice), payload, format="json")
    assert response.status_code == 400
    assert field in response.json()["error"]


def test_it_rejects_a_duplicate_username(api, alice):
    client = api(alice["admin"])
    assert client.post(creds_url(alice), {"username": "dup"}, format="json").status_code == 201
    again = client.post(creds_url(alice), {"username": "dup"}, format="json")
    assert again.status_code == 409 and "already exists" in again.json()["error"]


def test_it_deletes_a_credential(api, alice):
    client = api(alice["admin"])
    created = client.post(creds_url(alice), {"username": "gone"}, format="json").json()
    assert client.delete(creds_url(alice) + created["id"] + "/").status_code == 204
    assert client.get(creds_url(alice) + created["id"] + "/").status_code == 404


ACL = {
    "resource_type": "topic",
    "resource_name": "orders",
    "principal": "User:orders-app",
    "operation": "read",
}


def test_it_creates_lists_and_deletes_acls(api, alice):
    client = api(alice["admin"])
    created = client.post(acls_url(alice), ACL, format="json")
    assert created.status_code == 201, created.json()
    acl = created.json()
    assert acl["id"].startswith("acl_")
    assert acl["pattern_type"] == "literal" and acl["permission"] == "allow" and acl["host"] == "*"
    same = client.post(acls_url(alice), ACL, format="json")
    assert same.status_code == 200 and same.json()["id"] == acl["id"]
    prefixed = client.post(
        acls_url(alice),
        {**ACL, "resource_name": "ord", "pattern_type": "prefixed", "permission": "deny"},
        format="json",
    )
    assert prefixed.status_code == 201
    assert len(client.get(acls_url(alice)).json()) == 2
    only = client.get(acls_url(alice), {"resource_name": "orders"}).json()
    assert [a["id"] for a in only] == [acl["id"]]
    assert client.get(acls_url(alice) + acl["id"] + "/").json()["operation"] == "read"
    assert client.delete(acls_url(alice) + acl["id"] + "/").status_code == 204
    assert client.get(acls_url(alice) + acl["id"] + "/").status_code == 404


@pytest.mark.parametrize(
    "change, field",
    [
        ({"operation": "fly"}, "operation"),
        ({"resource_type": "planet"}, "resource_type"),
        ({"principal": "alice"}, "principal"),
        ({"principal": "User:"}, "principal"),
        ({"resource_name": ""}, "resource_name"),
        ({"pattern_type": "match"}, "pattern_type"),
        ({"permission": "maybe"}, "permission"),
        ({"resource_type": "cluster", "resource_name": "mine"}, "kafka-cluster"),
        ({"resource_name": "*", "pattern_type": "prefixed"}, "prefixed"),
    ],
)
def test_it_rejects_bad_acl_payloads_with_a_message(api, alice, change, field):
    response = api(alice["admin"]).post(acls_url(alice), {**ACL, **change}, format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json()["error"]


def test_it_rejects_an_acl_without_required_fields(api, alice):
    response = api(alice["admin"]).post(acls_url(alice), {"resource_type": "topic"}, format="json")
    assert response.status_code == 400 and "resource_name" in response.json()["error"]


# --- tenancy and permissions, for every endpoint ------------------------------------

ENDPOINTS = [
    ("get", "{creds}", None),
    ("post", "{creds}", {"username": "intruder"}),
    ("get", "{creds}{scr}/", None),
    ("delete", "{creds}{scr}/", None),
    ("get", "{acls}", None),
    ("post", "{acls}", ACL),
    ("get", "{acls}{acl}/", None),
    ("delete", "{acls}{acl}/", None),
]


def _url(template: str, alice) -> str:
    cluster = alice["cluster"]
    credential = (
        cluster.sasl_credentials.first()
        or sasl_credential_create(cluster=cluster, username="existing")[0]
    )
    acl = cluster.acls.first() or acl_create(cluster=cluster, binding=acl_binding(ACL))[0]
    return template.format(
        creds=creds_url(alice), acls=acls_url(alice), scr=credential.public_id, acl=acl.public_id
    )


@pytest.mark.parametrize("method, template, payload", ENDPOINTS)
def test_another_organizations_key_gets_404(api, alice, bob, method, template, payload):
    url = _url(template, alice)
    response = getattr(api(bob["admin"]), method)(url, payload, format="json")
    assert response.status_code == 404
    assert "error" in response.json()
    assert SaslCredential.objects.filter(cluster=alice["cluster"]).count() == 1
    assert Acl.objects.filter(cluster=alice["cluster"]).count() == 1


@pytest.mark.parametrize("method, template, payload", [e for e in ENDPOINTS if e[0] != "get"])
def test_a_read_only_key_cannot_write(api, alice, method, template, payload):
    response = getattr(api(alice["reader"]), method)(_url(template, alice), payload, format="json")
    assert response.status_code == 403
    assert "read-only" in response.json()["error"]


@pytest.mark.parametrize("method, template, payload", [e for e in ENDPOINTS if e[0] == "get"])
def test_a_read_only_key_can_read(api, alice, method, template, payload):
    assert api(alice["reader"]).get(_url(template, alice)).status_code == 200


def test_the_schema_documents_the_security_endpoints(api):
    paths = api().get("/api/v1/schema/", HTTP_ACCEPT="application/json").json()["paths"]
    assert "/api/v1/clusters/{cluster_id}/sasl-credentials/" in paths
    assert "/api/v1/clusters/{cluster_id}/acls/{acl_id}/" in paths


def test_bad_acl_list_filters_get_400(api, alice):
    response = api(alice["admin"]).get(acls_url(alice), {"principal": "User:a\0b"})
    assert response.status_code == 400 and "principal" in response.json()["error"]
