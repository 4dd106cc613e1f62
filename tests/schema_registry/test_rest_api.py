"""The REST API of a cluster's Schema Registry (`/api/v1/clusters/{id}/schemas/…`):
subjects, versions and levels from the metadata store, deletes through the services
(audited), another organization's cluster a 404. A version's text needs a live agent:
without one it is a 409 that says so (tests/schema_registry/test_schema_texts.py has the
agents)."""

from __future__ import annotations

import hashlib

import pytest
from rest_framework.test import APIClient

from controlplane.models import AuditEvent, Membership
from schema_registry import services
from tests.factories import make_api_key, make_cluster, make_org

pytestmark = pytest.mark.django_db


def fp(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def register(cluster, subject: str, text: str, **extra) -> dict:
    latest = services.Subject.objects.filter(registry__cluster=cluster, name=subject).first()
    checked = 0
    if latest is not None:
        live = latest.versions.filter(deleted=False).order_by("-version").first()
        checked = live.version if live else 0
    return services.schema_register(
        cluster=cluster, subject=subject, fingerprint=fp(text),
        schema_type=extra.get("schema_type", "AVRO"), references=extra.get("references", []),
        checked_latest=checked,
    )  # fmt: skip


@pytest.fixture
def alice():
    user, org = make_org("alice-co")
    cluster, _ = make_cluster("alice-cluster", org=org)
    register(cluster, "orders-value", "v1")
    register(cluster, "orders-value", "v2")
    register(cluster, "users-value", "u1", schema_type="JSON")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key(org)}")
    api.base = f"/api/v1/clusters/{cluster.public_id}/schemas"
    api.cluster, api.org = cluster, org
    return api


def test_it_lists_subjects_in_pages_with_their_latest_version(alice):
    response = alice.get(f"{alice.base}/subjects/", {"limit": 1})
    assert response.status_code == 200, response.content
    assert response["X-Total-Count"] == "2" and 'rel="next"' in response["Link"]
    assert response.json() == [
        {"name": "orders-value", "versions": 2, "latest_version": 2, "latest_id": 2,
         "schema_type": "AVRO", "compatibility": None}
    ]  # fmt: skip
    second = alice.get(f"{alice.base}/subjects/", {"limit": 1, "offset": 1}).json()
    assert [(s["name"], s["schema_type"]) for s in second] == [("users-value", "JSON")]
    assert alice.get(f"{alice.base}/subjects/", {"limit": 0}).status_code == 400


def test_it_describes_a_subject_and_lists_its_versions(alice):
    subject = alice.get(f"{alice.base}/subjects/orders-value/").json()
    assert subject == {"name": "orders-value", "compatibility": "BACKWARD",
                       "compatibility_own": None, "versions": 2, "latest_version": 2}  # fmt: skip
    versions = alice.get(f"{alice.base}/subjects/orders-value/versions/")
    assert versions["X-Total-Count"] == "2"
    assert [(v["version"], v["id"], v["deleted"]) for v in versions.json()] == [
        (1, 1, False),
        (2, 2, False),
    ]
    assert alice.get(f"{alice.base}/subjects/nothing/").status_code == 404
    assert alice.get(f"{alice.base}/subjects/orders-value/versions/9/").status_code == 404


def test_a_versions_text_without_a_live_agent_is_a_409_that_says_so(alice):
    response = alice.get(f"{alice.base}/subjects/orders-value/versions/1/")
    assert response.status_code == 409
    assert (
        "No live agent of this cluster is connected to read the schema texts"
        in (response.json()["error"])
    )


def test_it_deletes_soft_then_permanently_and_audits_each(alice):
    url = f"{alice.base}/subjects/orders-value/"
    assert alice.delete(url + "?permanent=true").status_code == 409  # not soft-deleted first
    assert alice.delete(url).status_code == 204
    assert alice.get(f"{alice.base}/subjects/").json()[0]["name"] == "users-value"
    listed = alice.get(f"{alice.base}/subjects/", {"deleted": "true"}).json()
    assert [(s["name"], s["versions"], s["latest_version"]) for s in listed] == [
        ("orders-value", 0, None),
        ("users-value", 1, 1),
    ]
    assert alice.delete(url).status_code == 409  # soft-deleted already
    assert alice.delete(url + "?permanent=true").status_code == 204
    assert alice.get(url).status_code == 404
    events = AuditEvent.objects.filter(organization=alice.org, target_type="schema_subject")
    assert sorted(events.values_list("target_name", flat=True)) == [
        "orders-value (permanently)",
        "orders-value (soft)",
    ]


def test_it_deletes_one_version(alice):
    url = f"{alice.base}/subjects/orders-value/versions/2/"
    assert alice.delete(url).status_code == 204
    assert alice.get(f"{alice.base}/subjects/orders-value/").json()["latest_version"] == 1
    assert alice.delete(url + "?permanent=true").status_code == 204
    assert alice.get(url).status_code == 404
    assert alice.delete(url.replace("/2/", "/1/") + "?permanent=maybe").status_code == 400


def test_it_sets_levels_for_the_cluster_and_a_subject(alice):
    assert alice.get(f"{alice.base}/config/").json() == {"compatibility": "BACKWARD"}
    assert alice.put(f"{alice.base}/config/", {"compatibility": "FULL"}, format="json").json() == {
        "compatibility": "FULL"
    }
    bad = alice.put(f"{alice.base}/config/", {"compatibility": "SOMETIMES"}, format="json")
    assert bad.status_code == 400
    url = f"{alice.base}/subjects/orders-value/"
    changed = alice.patch(url, {"compatibility": "NONE"}, format="json").json()
    assert (changed["compatibility"], changed["compatibility_own"]) == ("NONE", "NONE")
    back = alice.patch(url, {"compatibility": None}, format="json").json()
    assert (back["compatibility"], back["compatibility_own"]) == ("FULL", None)


def test_another_organizations_schemas_are_a_404(alice):
    _, bob_org = make_org("bob-co")
    bob = APIClient()
    bob.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key(bob_org)}")
    for url in ("subjects/", "subjects/orders-value/", "subjects/orders-value/versions/",
                "subjects/orders-value/versions/1/", "config/"):  # fmt: skip
        assert bob.get(f"{alice.base}/{url}").status_code == 404, url
    assert bob.delete(f"{alice.base}/subjects/orders-value/").status_code == 404
    assert alice.get(f"{alice.base}/subjects/orders-value/versions/1/").status_code == 409
    assert services.Subject.objects.filter(name="orders-value").count() == 1


def test_a_read_only_member_reads_but_cannot_delete(alice):
    member = APIClient()
    member.credentials(
        HTTP_AUTHORIZATION=f"Bearer {make_api_key(alice.org, role=Membership.Role.MEMBER)}"
    )
    assert member.get(f"{alice.base}/subjects/").status_code == 200
    assert member.delete(f"{alice.base}/subjects/orders-value/").status_code == 403
    assert alice.get(f"{alice.base}/subjects/orders-value/").json()["versions"] == 2


def test_a_cluster_with_schemas_is_deleted_with_its_registry(alice):
    # A version's schema is RESTRICTed, not PROTECTed: the cascade from the cluster
    # takes both (a PROTECT made this a 500).
    response = alice.delete(
        f"/api/v1/clusters/{alice.cluster.public_id}/",
        {"confirm_name": "alice-cluster"},
        format="json",
    )
    assert response.status_code == 204, response.content
    assert not services.Subject.objects.exists()
    assert not services.RegisteredSchema.objects.exists()
