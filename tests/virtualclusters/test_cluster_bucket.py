"""A cluster's bucket (BYOC): the first agent fixes it, an agent with another is refused
naming both, the API and the console show it, and changing it is explicit."""

from __future__ import annotations

import pytest

from tests.metadata_store.conftest import AgentApi

pytestmark = pytest.mark.django_db


def register(key: str, agent_id: str, bucket_url: str):
    return AgentApi(key).raw("register", {"agent_id": agent_id, "bucket_url": bucket_url})


def test_the_first_agent_fixes_the_bucket_and_the_same_bucket_is_welcome(alice):
    assert (
        register(alice["agent_key"], "agt-1", "s3://alice-data?region=eu-west-1").status_code == 200
    )
    again = register(alice["agent_key"], "agt-2", "s3://alice-data?region=eu-west-1")
    assert again.status_code == 200
    assert again.json()["cluster"]["bucket_url"] == "s3://alice-data?region=eu-west-1"
    alice["cluster"].refresh_from_db()
    assert alice["cluster"].bucket_url == "s3://alice-data?region=eu-west-1"


def test_an_agent_with_another_bucket_is_refused_with_a_message_naming_both(alice):
    register(alice["agent_key"], "agt-1", "file:///srv/alice")
    refused = register(alice["agent_key"], "agt-2", "s3://elsewhere")
    assert refused.status_code == 409
    message = refused.json()["error"]
    assert "s3://elsewhere" in message and "file:///srv/alice" in message
    assert alice["cluster"].public_id in message


def test_the_other_clusters_bucket_does_not_bind_this_one(alice, bob):
    register(alice["agent_key"], "agt-a", "file:///srv/alice")
    assert register(bob["agent_key"], "agt-b", "file:///srv/bob").status_code == 200


def test_a_bucket_url_with_credentials_is_refused(alice):
    refused = register(alice["agent_key"], "agt-1", "s3://AKIA:secret@bucket")
    assert refused.status_code == 400 and "credentials" in refused.json()["error"]
    alice["cluster"].refresh_from_db()
    assert alice["cluster"].bucket_url == ""


def test_a_cluster_created_with_its_bucket_refuses_agents_with_another(api, alice):
    created = api(alice["admin"]).post(
        "/api/v1/clusters/",
        {"name": "byoc", "bucket_url": "s3://mine?region=us-east-1"},
        format="json",
    )
    assert created.status_code == 201, created.content
    assert created.json()["bucket_url"] == "s3://mine?region=us-east-1"


def test_changing_the_bucket_is_an_explicit_call_of_the_clusters_own_org(api, alice, bob):
    register(alice["agent_key"], "agt-1", "file:///old")
    url = f"/api/v1/clusters/{alice['cluster'].public_id}/bucket/"
    assert api(bob["admin"]).put(url, {"bucket_url": "file:///x"}, format="json").status_code == 404
    bad = api(alice["admin"]).put(url, {"bucket_url": "ftp://x"}, format="json")
    assert bad.status_code == 400
    changed = api(alice["admin"]).put(url, {"bucket_url": "file:///new"}, format="json")
    assert changed.status_code == 200 and changed.json()["bucket_url"] == "file:///new"
    assert register(alice["agent_key"], "agt-2", "file:///old").status_code == 409
    assert register(alice["agent_key"], "agt-3", "file:///new").status_code == 200


def test_the_console_shows_the_bucket(client, alice):
    register(alice["agent_key"], "agt-1", "file:///srv/alice-bucket")
    client.force_login(alice["user"])
    page = client.get(f"/clusters/{alice['cluster'].public_id}/").content.decode()
    assert "file:///srv/alice-bucket" in page
