"""Schema linking (issue 38) through the REST API and the copier's agent-API calls: a
migration naming a source Schema Registry (its password sealed, never shown), the
linker's reports in the migration's state, and the end of the link — a cutover of the
schemas or a stop — giving the linked subjects back to normal registration."""

from __future__ import annotations

import pytest

from metadata_store import leases
from schema_registry.models import Subject
from tests.metadata_store.conftest import AgentApi
from tests.virtualclusters.test_migrations_api import _leased, _url
from virtualclusters.mirror.models import Migration

pytestmark = pytest.mark.django_db

BODY = {
    "source_bootstrap": "127.0.0.1:29092",
    "topics": "orders",
    "source_schema_registry": {
        "url": "https://registry.example.test:8081/base",
        "username": "linker",
        "password": "s3cret-registry-password",
    },
    "subjects": "orders-.*",
}
REPORT = {
    "subjects": ["orders-value", "money.proto"],
    "subjects_copied": 2,
    "versions_copied": 3,
    "last_sync": "2026-11-28T22:00:00+00:00",
    "error": "",
    "errors": {"orders-key": "the source registry …: HTTP 500"},
}


def _create(api, alice, body=BODY) -> dict:
    response = api(alice["admin"]).post(_url(alice["cluster"]), body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def _report(agent: AgentApi, leased: dict, link: dict) -> dict:
    return agent(
        "migrations/report",
        {"migration_id": leased["id"], "lease": leased["lease"], "schema_link": link},
    )


def _link(agent: AgentApi, leased: dict, *subjects: str) -> list[bool]:
    """As the linker does it: each subject linked (listed, in IMPORT mode)."""
    return [
        agent(
            "migrations/link-subject",
            {"migration_id": leased["id"], "lease": leased["lease"], "subject": subject},
        )["linked"]
        for subject in subjects
    ]


def _modes(cluster) -> dict[str, str | None]:
    return dict(Subject.objects.filter(registry__cluster=cluster).values_list("name", "mode"))


def test_it_creates_a_linked_migration_and_never_shows_the_registry_password(api, alice):
    created = _create(api, alice)
    assert created["source_schema_registry"] == {
        "url": "https://registry.example.test:8081/base",
        "username": "linker",
    }
    assert created["subjects_regex"] == "orders-.*"
    assert created["schemas"] == {
        "state": "linking",
        "cut_over_at": None,
        "subjects_copied": 0,
        "versions_copied": 0,
        "last_sync": None,
        "error": "",
        "subject_errors": {},
    }
    row = Migration.objects.get(public_id=created["id"])
    assert "s3cret" not in row.schema_registry_password_sealed
    for url in (_url(alice["cluster"]), _url(alice["cluster"], created["id"])):
        assert b"s3cret" not in api(alice["reader"]).get(url).content
    # Only the leasing agent gets it, opened.
    _, leased = _leased(alice)
    assert leased["schema_registry"] == {
        "url": "https://registry.example.test:8081/base",
        "username": "linker",
        "password": "s3cret-registry-password",
        "subjects": "orders-.*",
    }


def test_a_migration_without_a_registry_links_nothing(api, alice):
    created = _create(api, alice, {"source_bootstrap": "127.0.0.1:29092", "topics": "orders"})
    assert created["source_schema_registry"] is None and created["schemas"] is None
    agent, leased = _leased(alice)
    assert leased["schema_registry"] is None
    assert "schemas_linked" not in _report(agent, leased, {})
    response = api(alice["admin"]).post(
        _url(alice["cluster"], created["id"], "cutover"), {"schemas": True}, format="json"
    )
    assert response.status_code == 400 and "schemas" in response.json()["error"]


def test_subjects_without_a_registry_mean_nothing(api, alice):
    body = {"source_bootstrap": "127.0.0.1:29092", "topics": "orders", "subjects": "orders-.*"}
    created = _create(api, alice, body)
    assert created["subjects_regex"] == "" and created["schemas"] is None


def test_every_subject_is_linked_when_no_regex_is_given(api, alice):
    body = {**BODY, "source_schema_registry": {"url": "http://10.0.0.9:8081"}}
    del body["subjects"]
    created = _create(api, alice, body)
    assert created["subjects_regex"] == ".*"
    assert created["source_schema_registry"] == {"url": "http://10.0.0.9:8081", "username": ""}


@pytest.mark.parametrize(
    "registry, subjects, field",
    [
        ({"url": "ftp://registry:8081"}, ".*", "source_schema_registry"),
        ({"url": "registry:8081"}, ".*", "source_schema_registry"),
        ({"url": "http://user:pw@registry:8081"}, ".*", "source_schema_registry"),
        ({"url": "http://registry:8081/?x=1"}, ".*", "source_schema_registry"),
        ({"url": "http://registry:8081", "extra": 1}, ".*", "source_schema_registry"),
        ({"url": "http://registry:8081"}, "orders(", "subjects"),
    ],
)
def test_it_refuses_a_bad_registry_or_regex_naming_the_field(api, alice, registry, subjects, field):
    body = {**BODY, "subjects": subjects, "source_schema_registry": registry}
    response = api(alice["admin"]).post(_url(alice["cluster"]), body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["error"], response.json()
    assert not Migration.objects.exists()


def test_the_linkers_reports_show_in_the_migrations_state(api, alice):
    created = _create(api, alice)
    agent, leased = _leased(alice)
    assert _report(agent, leased, REPORT)["schemas_linked"] is True
    schemas = api(alice["reader"]).get(_url(alice["cluster"], created["id"])).json()["schemas"]
    assert schemas == {
        "state": "linking",
        "cut_over_at": None,
        "subjects_copied": 2,
        "versions_copied": 3,
        "last_sync": "2026-11-28T22:00:00Z",
        "error": "",
        "subject_errors": {"orders-key": "the source registry …: HTTP 500"},
    }


def test_cutting_the_schemas_over_gives_the_linked_subjects_back(api, alice):
    created = _create(api, alice)
    agent, leased = _leased(alice)
    # Linked: two the linker linked (one outside the regex: a reference's subject), one
    # the regex names; one in IMPORT mode that the link never touched stays so.
    assert _link(agent, leased, "orders-value", "money.proto") == [True, True]
    assert _modes(alice["cluster"]) == {"orders-value": "IMPORT", "money.proto": "IMPORT"}
    for subject in ("orders-late", "imported-by-hand"):
        agent("registry/mode_set", {"subject": subject, "mode": "IMPORT", "force": True})
    _report(agent, leased, {**REPORT, "subjects": ["orders-value"]})
    response = api(alice["admin"]).post(
        _url(alice["cluster"], created["id"], "cutover"), {"schemas": True}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["schemas"]["state"] == "cut_over"
    assert response.json()["schemas"]["cut_over_at"] is not None
    assert _modes(alice["cluster"]) == {
        "orders-value": None,
        "money.proto": None,
        "orders-late": None,
        "imported-by-hand": "IMPORT",
    }
    # The linker learns it from its next report and stops; a new lease names no registry.
    assert _report(agent, leased, REPORT)["schemas_linked"] is False
    assert _link(agent, leased, "orders-next") == [False]  # nothing linked after it
    assert "orders-next" not in _modes(alice["cluster"])
    assert Migration.objects.get(public_id=created["id"]).schema_link == {
        **REPORT,
        "subjects": ["money.proto", "orders-value"],  # linked, whoever reported them
    }
    again = api(alice["admin"]).post(
        _url(alice["cluster"], created["id"], "cutover"), {"schemas": True}, format="json"
    )
    assert again.status_code == 400
    leases.lease_end(
        cluster_id=alice["cluster"].pk, subject=leases.migration_subject(created["id"])
    )
    assert _leased(alice)[1]["schema_registry"] is None


def test_stopping_the_migration_ends_the_link_too(api, alice):
    created = _create(api, alice)
    agent, leased = _leased(alice)
    _link(agent, leased, "orders-value")
    response = api(alice["admin"]).delete(_url(alice["cluster"], created["id"]))
    assert response.status_code == 204
    assert _modes(alice["cluster"]) == {"orders-value": None}
    schemas = api(alice["reader"]).get(_url(alice["cluster"], created["id"])).json()["schemas"]
    assert schemas["state"] == "stopped"


def test_a_cutover_needs_topics_or_schemas_and_readers_cannot(api, alice, bob):
    created = _create(api, alice)
    url = _url(alice["cluster"], created["id"], "cutover")
    response = api(alice["admin"]).post(url, {}, format="json")
    assert response.status_code == 400
    assert api(alice["reader"]).post(url, {"schemas": True}, format="json").status_code == 403
    assert api(bob["admin"]).post(url, {"schemas": True}, format="json").status_code == 404
    assert Migration.objects.get(public_id=created["id"]).schemas_linked
