"""The console's Schemas pages without an agent: subjects and versions from the metadata
store, the text's place saying no agent is connected, deletes only with the subject's
name typed, levels, another organization's cluster a 404, a member read-only.
(tests/controlplane/browser/test_schemas_page.py has the page with a live agent.)"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from schema_registry.models import Subject, SubjectVersion
from team.members import invitation_account_create, invitation_create
from team.models import AuditEvent
from tenancy.models import Membership
from tests.factories import PASSWORD, make_cluster, make_org
from tests.schema_registry.test_rest_api import register

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(client):
    user, org = make_org("alice-co")
    cluster, _ = make_cluster("alice-cluster", org=org)
    register(cluster, "orders-value", "v1")
    register(cluster, "orders-value", "v2")
    client.force_login(user)
    client.base = f"/clusters/{cluster.public_id}/schemas"
    client.cluster, client.org, client.user = cluster, org, user
    return client


def _versions(cluster, deleted: bool) -> list[int]:
    rows = SubjectVersion.objects.filter(subject__registry__cluster=cluster, deleted=deleted)
    return sorted(rows.values_list("version", flat=True))


def test_the_subjects_page_lists_subjects_and_the_global_level(alice):
    page = alice.get(f"{alice.base}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-subject="orders-value"' in html and 'id="global-level">BACKWARD' in html
    assert (
        f'href="{alice.base}/"'
        in alice.get(f"/clusters/{alice.cluster.public_id}/").content.decode()
    )


def test_a_subjects_page_without_an_agent_lists_versions_and_says_none_is_connected(alice):
    page = alice.get(f"{alice.base}/orders-value/?version=1&compare=2")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-version="1"' in html and 'data-version="2"' in html
    assert "No live agent of this cluster is connected to read the schema texts" in html
    assert alice.get(f"{alice.base}/nothing/").status_code == 404


def test_a_delete_needs_the_subjects_name_typed(alice):
    url = f"{alice.base}/orders-value/delete"
    wrong = alice.post(url, {"confirm_name": "orders"}, follow=True)
    assert "Type the subject" in wrong.content.decode()
    assert _versions(alice.cluster, deleted=False) == [1, 2]
    alice.post(url, {"confirm_name": "orders-value"})
    assert _versions(alice.cluster, deleted=True) == [1, 2]
    gone = alice.post(url, {"confirm_name": "orders-value", "permanent": "on"})
    assert gone.status_code == 302 and gone["Location"] == f"{alice.base}/"
    assert not Subject.objects.filter(registry__cluster=alice.cluster).exists()
    events = AuditEvent.objects.filter(organization=alice.org, target_type="schema_subject")
    assert {(e.actor_label, e.target_name) for e in events} == {
        (alice.user.email, "orders-value (soft)"),
        (alice.user.email, "orders-value (permanently)"),
    }


def test_a_version_is_deleted_soft_then_permanently(alice):
    url = f"{alice.base}/orders-value/delete-version"
    refused = alice.post(url, {"version": "2", "confirm_name": "orders-value", "permanent": "on"},
                         follow=True)  # fmt: skip
    assert "was not deleted first" in refused.content.decode()
    alice.post(url, {"version": "2", "confirm_name": "orders-value"})
    assert _versions(alice.cluster, deleted=True) == [2]
    alice.post(url, {"version": "2", "confirm_name": "orders-value", "permanent": "on"})
    assert _versions(alice.cluster, deleted=True) == []
    assert _versions(alice.cluster, deleted=False) == [1]


def test_a_subjects_level_is_set_and_dropped(alice):
    url = f"{alice.base}/orders-value/compatibility"
    alice.post(url, {"compatibility": "FULL_TRANSITIVE"})
    assert Subject.objects.get(name="orders-value").compatibility == "FULL_TRANSITIVE"
    html = alice.get(f"{alice.base}/orders-value/").content.decode()
    assert 'id="level-in-force">FULL_TRANSITIVE' in html
    bad = alice.post(url, {"compatibility": "SOMETIMES"}, follow=True)
    assert "Invalid compatibility level" in bad.content.decode()
    alice.post(url, {"compatibility": ""})
    assert Subject.objects.get(name="orders-value").compatibility is None


def test_another_organizations_schemas_are_a_404_and_a_member_cannot_delete(alice, client):
    bob, _ = make_org("bob-co")
    client.force_login(bob)
    for url in ("/", "/orders-value/"):
        assert client.get(alice.base + url).status_code == 404
    assert client.post(f"{alice.base}/orders-value/delete",
                       {"confirm_name": "orders-value"}).status_code == 404  # fmt: skip
    invitation, _, _ = invitation_create(
        organization=alice.org, email="mo@example.com", role=Membership.Role.MEMBER,
        invited_by=alice.user, link_base="http://x",
    )  # fmt: skip
    client.force_login(invitation_account_create(invitation=invitation, password=PASSWORD))
    assert client.get(f"{alice.base}/orders-value/").status_code == 200
    refused = client.post(f"{alice.base}/orders-value/delete", {"confirm_name": "orders-value"})
    assert refused.status_code == 403
    assert _versions(alice.cluster, deleted=False) == [1, 2]


def test_the_clusters_level_is_set_on_the_subjects_page(alice):
    url = f"/clusters/{alice.cluster.public_id}/schemas-compatibility"
    done = alice.post(url, {"compatibility": "forward"}, follow=True)
    assert "now check FORWARD" in done.content.decode()
    assert 'id="global-level">FORWARD' in done.content.decode()
    bad = alice.post(url, {"compatibility": ""}, follow=True)
    assert "Invalid compatibility level" in bad.content.decode()
    assert 'id="global-level">FORWARD' in bad.content.decode()


def test_the_subjects_page_query_count_does_not_grow_with_subjects(alice):
    """The same queries for 1 subject and for 21 (each page load after a first one, so
    per-process caches warmed by whichever tests ran before do not count)."""

    def queries_for_the_page() -> int:
        alice.get(f"{alice.base}/")
        with CaptureQueriesContext(connection) as queries:
            page = alice.get(f"{alice.base}/")
        assert page.status_code == 200
        return len(queries)

    register(alice.cluster, "s-value", "text")
    one = queries_for_the_page()
    for n in range(20):
        register(alice.cluster, f"s{n}-value", f"text {n}")
    many = queries_for_the_page()
    assert many == one <= 12, (one, many)
    assert alice.get(f"{alice.base}/").content.decode().count("data-subject=") == 21 + 1
