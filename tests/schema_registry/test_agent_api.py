"""The Schema Registry's agent-API calls (schema_registry/agent_api.py): what the
control plane keeps — fingerprints, ids, versions, levels, never a text — per cluster."""

from __future__ import annotations

import hashlib

import pytest

from schema_registry.models import RegisteredSchema
from tests.metadata_store.conftest import AgentApi

pytestmark = pytest.mark.django_db


def fp(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def alice_api(alice):
    return AgentApi(alice["agent_key"])


@pytest.fixture
def bob_api(bob):
    return AgentApi(bob["agent_key"])


def register(api, subject: str, fingerprint: str, checked_latest: int = 0, **extra) -> dict:
    body = {"subject": subject, "fingerprint": fingerprint, "checked_latest": checked_latest}
    return api("registry/register", {**body, **extra})


def test_ids_are_per_schema_and_versions_dense_per_subject(alice_api):
    assert register(alice_api, "a", fp("one")) == {"id": 1, "version": 1}
    assert register(alice_api, "a", fp("one")) == {"id": 1, "version": 1}  # idempotent
    assert register(alice_api, "b", fp("one")) == {"id": 1, "version": 1}
    assert register(alice_api, "a", fp("two"), checked_latest=1) == {"id": 2, "version": 2}
    listed = alice_api("registry/versions", {"subject": "a"})
    assert [(v["version"], v["id"], v["fingerprint"]) for v in listed["versions"]] == [
        (1, 1, fp("one")),
        (2, 2, fp("two")),
    ]
    assert listed["compatibility"] == "BACKWARD"
    assert alice_api("registry/versions", {"subject": "none"})["error_code"] == 40401
    assert alice_api("registry/versions", {"subject": "none", "missing_ok": True}) == {
        "versions": [],
        "compatibility": "BACKWARD",
        "mode": "READWRITE",
    }
    # The control plane keeps no schema text: only what the agent sent.
    fields = {f.name for f in RegisteredSchema._meta.get_fields()}
    assert not fields & {"schema", "text", "definition"}


def test_a_registration_checked_against_an_old_latest_is_stale(alice_api):
    register(alice_api, "a", fp("one"))
    register(alice_api, "a", fp("two"), checked_latest=1)
    assert register(alice_api, "a", fp("three"), checked_latest=1) == {"stale": True}
    assert register(alice_api, "new", fp("three"), checked_latest=4) == {"stale": True}


def test_ids_are_never_reused_after_a_permanent_delete(alice_api):
    register(alice_api, "a", fp("one"))
    assert alice_api("registry/delete_subject", {"subject": "a"}) == {"versions": [1]}
    assert alice_api("registry/delete_subject", {"subject": "a", "permanent": True}) == {
        "versions": [1]
    }
    assert alice_api("registry/schema", {"id": 1})["error_code"] == 40403
    assert register(alice_api, "a", fp("one")) == {"id": 2, "version": 1}


def test_another_clusters_registry_is_invisible(alice_api, bob_api):
    register(alice_api, "alice-only", fp("secret"))
    assert bob_api("registry/subjects", {}) == {"subjects": []}
    assert bob_api("registry/schema", {"id": 1})["error_code"] == 40403
    assert bob_api("registry/versions", {"subject": "alice-only"})["error_code"] == 40401
    assert bob_api("registry/delete_subject", {"subject": "alice-only"})["error_code"] == 40401
    assert register(bob_api, "bobs", fp("secret")) == {"id": 1, "version": 1}  # his own ids
    assert alice_api("registry/subjects", {}) == {"subjects": ["alice-only"]}


def test_bad_bodies_and_levels_are_refused_clearly(alice_api):
    assert (
        alice_api.raw("registry/register", {"subject": "a", "fingerprint": "x"}).status_code == 400
    )
    answer = alice_api("registry/config_set", {"compatibility": "SIDEWAYS"})
    assert answer["error_code"] == 42203
    assert alice_api("registry/config_set", {"compatibility": "full"}) == {"compatibility": "FULL"}
    assert alice_api("registry/config_get", {}) == {"compatibility": "FULL"}
    missing_ref = {"name": "X", "subject": "nope", "version": 1}
    answer = register(alice_api, "a", fp("one"), references=[missing_ref])
    assert answer["error_code"] == 42201


def test_readonly_refuses_registrations_and_deletes_globally_or_per_subject(alice_api):
    register(alice_api, "a", fp("one"))
    assert alice_api("registry/mode_set", {"mode": "READONLY"}) == {"mode": "READONLY"}
    assert alice_api("registry/mode_get", {}) == {"mode": "READONLY"}
    refused = register(alice_api, "a", fp("two"), checked_latest=1)
    assert refused == {"error_code": 42205, "message": "Subject a is in read-only mode"}
    assert alice_api("registry/delete_subject", {"subject": "a"})["error_code"] == 42205
    # A subject's own mode wins over the global one, both ways.
    assert alice_api("registry/mode_set", {"subject": "b", "mode": "READWRITE"}) == {
        "mode": "READWRITE"
    }
    assert register(alice_api, "b", fp("two")) == {"id": 2, "version": 1}
    assert alice_api("registry/mode_delete", {}) == {"mode": "READONLY"}  # global: reset
    assert alice_api("registry/mode_set", {"subject": "a", "mode": "READONLY"}) == {
        "mode": "READONLY"
    }
    assert register(alice_api, "a", fp("three"), checked_latest=1)["error_code"] == 42205
    assert register(alice_api, "c", fp("three")) == {"id": 3, "version": 1}
    assert alice_api("registry/versions", {"subject": "a"})["mode"] == "READONLY"
    assert alice_api("registry/mode_get", {"subject": "c"})["error_code"] == 40409
    assert alice_api("registry/mode_get", {"subject": "c", "default_to_global": True}) == {
        "mode": "READWRITE"
    }
    assert alice_api("registry/mode_delete", {"subject": "a"}) == {"mode": "READONLY"}
    assert register(alice_api, "a", fp("three"), checked_latest=1) == {"id": 3, "version": 2}
    assert alice_api("registry/mode_set", {"mode": "WRITEONLY"})["error_code"] == 42204


def test_import_takes_the_id_and_version_given_and_only_those(alice_api):
    assert alice_api("registry/mode_set", {"mode": "IMPORT"}) == {"mode": "IMPORT"}
    assert register(alice_api, "a", fp("one"), schema_id=100, version=5) == {
        "id": 100,
        "version": 5,
    }
    assert register(alice_api, "a", fp("one"), schema_id=100, version=5) == {
        "id": 100,
        "version": 5,
    }  # idempotent
    assert register(alice_api, "b", fp("two"), schema_id=7) == {"id": 7, "version": 1}
    # Another schema under a taken id or version, or a schema under a second id: refused.
    assert register(alice_api, "c", fp("three"), schema_id=100)["error_code"] == 42205
    assert register(alice_api, "a", fp("three"), schema_id=8, version=5)["error_code"] == 42205
    assert register(alice_api, "d", fp("one"), schema_id=9)["error_code"] == 42205
    # Without an id, IMPORT refuses; READWRITE refuses one with an id.
    assert register(alice_api, "e", fp("four")) == {
        "error_code": 42205,
        "message": "Subject e is not in read-write mode",
    }
    alice_api("registry/mode_set", {"mode": "READWRITE"})
    assert register(alice_api, "e", fp("four"), schema_id=50) == {
        "error_code": 42205,
        "message": "Subject e is not in import mode",
    }
    # New ids continue past every id taken.
    assert register(alice_api, "e", fp("four")) == {"id": 101, "version": 1}


def test_import_mode_needs_an_empty_registry_or_force(alice_api):
    register(alice_api, "a", fp("one"))
    assert alice_api("registry/mode_set", {"mode": "IMPORT"})["error_code"] == 42205
    assert alice_api("registry/mode_set", {"subject": "a", "mode": "IMPORT"})["error_code"] == (
        42205
    )
    assert alice_api("registry/mode_set", {"subject": "new", "mode": "IMPORT"}) == {
        "mode": "IMPORT"
    }
    assert alice_api("registry/mode_set", {"mode": "IMPORT", "force": True}) == {"mode": "IMPORT"}


def test_another_clusters_mode_is_its_own(alice_api, bob_api):
    alice_api("registry/mode_set", {"mode": "READONLY"})
    assert bob_api("registry/mode_get", {}) == {"mode": "READWRITE"}
    assert register(bob_api, "b", fp("one")) == {"id": 1, "version": 1}
