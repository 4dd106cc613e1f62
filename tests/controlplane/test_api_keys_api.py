"""REST API: application API keys, and the OpenAPI schema."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_it_creates_a_read_only_key_and_shows_the_secret_once(api, alice):
    client = api(alice["admin"])
    created = client.post("/api/v1/api-keys/", {"name": "ci", "role": "member"}, format="json")
    assert created.status_code == 201
    body = created.json()
    assert body["key"].startswith("floe_api_") and body["role"] == "member"
    listed = client.get("/api/v1/api-keys/").json()
    assert body["id"] in [k["id"] for k in listed] and all("key" not in k for k in listed)
    assert (
        api(body["key"]).post("/api/v1/clusters/", {"name": "x"}, format="json").status_code == 403
    )


def test_it_rejects_a_bad_role(api, alice):
    response = api(alice["admin"]).post(
        "/api/v1/api-keys/", {"name": "x", "role": "root"}, format="json"
    )
    assert response.status_code == 400 and "role" in response.json()["error"]


def test_another_organization_cannot_see_or_revoke_a_key(api, alice, bob):
    key_id = api(alice["admin"]).get("/api/v1/api-keys/").json()[0]["id"]
    assert api(bob["admin"]).get(f"/api/v1/api-keys/{key_id}/").status_code == 404
    assert api(bob["admin"]).delete(f"/api/v1/api-keys/{key_id}/").status_code == 404
    assert key_id not in [k["id"] for k in api(bob["admin"]).get("/api/v1/api-keys/").json()]


def test_a_read_only_key_cannot_create_or_revoke_keys(api, alice):
    reader = api(alice["reader"])
    assert reader.post("/api/v1/api-keys/", {"name": "x"}, format="json").status_code == 403
    key_id = reader.get("/api/v1/api-keys/").json()[0]["id"]
    assert reader.delete(f"/api/v1/api-keys/{key_id}/").status_code == 403


def test_the_openapi_schema_is_served(api):
    response = api().get("/api/v1/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    assert "/api/v1/clusters/{cluster_id}/agent-keys/" in paths
    assert api().get("/api/v1/docs/").status_code == 200
