"""API keys never do more than their owner may: a person's key acts with the lower of its
role and its owner's current role, and stops when its owner leaves; owner-only actions
are owner-only through keys too (issue 25, findings 1 and 2)."""

from __future__ import annotations

import pytest

from team import members as team
from team.models import ApiKey, AuditEvent
from team.services import api_key_create
from tenancy.models import Membership
from tests.factories import PASSWORD

pytestmark = pytest.mark.django_db


def join(org, email: str, role: str):
    invitation, _, _ = team.invitation_create(
        organization=org, email=email, role=role, invited_by=None, link_base="http://x"
    )
    user = team.invitation_account_create(invitation=invitation, password=PASSWORD)
    return user, Membership.objects.get(organization=org, user=user)


def person_key(org, user, role: str = "admin") -> str:
    _, plaintext = api_key_create(
        organization=org, name=f"{user.email} {role}", role=role, owner=user, created_by=user
    )
    return plaintext


def owner_membership(alice) -> Membership:
    return Membership.objects.get(organization=alice["org"], user=alice["user"])


def topics_url(alice) -> str:
    return f"/api/v1/clusters/{alice['cluster'].public_id}/topics/"


def test_a_demoted_members_admin_key_can_no_longer_write(api, alice):
    dan, membership = join(alice["org"], "dan@example.com", "admin")
    key = api(person_key(alice["org"], dan))
    assert key.post(topics_url(alice), {"name": "before"}, format="json").status_code == 201
    team.member_role_change(actor=owner_membership(alice), target=membership, role="member")
    refused = key.post(topics_url(alice), {"name": "after"}, format="json")
    assert refused.status_code == 403, refused.content
    assert key.get(topics_url(alice)).status_code == 200  # a member still reads


def test_a_removed_members_key_stops_at_once_and_the_audit_log_says_so(api, alice):
    dan, membership = join(alice["org"], "dan@example.com", "admin")
    plaintext = person_key(alice["org"], dan)
    key = api(plaintext)
    assert key.get(topics_url(alice)).status_code == 200
    team.member_remove(actor=owner_membership(alice), target=membership)
    assert key.post(topics_url(alice), {"name": "x"}, format="json").status_code == 401
    assert key.get(topics_url(alice)).status_code == 401
    revoked = ApiKey.objects.get(owner=dan)
    assert revoked.revoked_at is not None
    assert AuditEvent.objects.filter(
        organization=alice["org"], action="revoked", target_type="api_key",
        target_id=revoked.public_id,
    ).exists()  # fmt: skip


def test_a_service_account_key_stays_when_its_maker_leaves(api, alice):
    dan, membership = join(alice["org"], "dan@example.com", "admin")
    _, plaintext = api_key_create(
        organization=alice["org"], name="ci", role="admin", service_account=True, created_by=dan
    )
    team.member_remove(actor=owner_membership(alice), target=membership)
    assert api(plaintext).post(topics_url(alice), {"name": "ci"}, format="json").status_code == 201


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/v1/billing/plan/", {"plan": "pro"}),
        ("/api/v1/billing/budget/", {"monthly_micros": 1}),
    ],
)
def test_plan_and_budget_are_owner_only_through_keys_too(api, alice, path, body):
    dan, _ = join(alice["org"], "dan@example.com", "admin")
    for key in (alice["admin"], person_key(alice["org"], dan)):
        refused = api(key).put(path, body, format="json")
        assert refused.status_code == 403 and "Only owners" in refused.json()["error"]
    assert api(alice["owner"]).put(path, body, format="json").status_code == 200


def test_an_owner_key_of_someone_no_longer_owner_is_an_admin_key(api, alice):
    dan, membership = join(alice["org"], "dan@example.com", "admin")
    team.ownership_transfer(actor=owner_membership(alice), target=membership)
    refused = api(alice["owner"]).put("/api/v1/billing/plan/", {"plan": "pro"}, format="json")
    assert refused.status_code == 403
    ok = api(alice["owner"]).post(topics_url(alice), {"name": "still-admin"}, format="json")
    assert ok.status_code == 201


def test_a_key_is_never_made_above_its_makers_role(api, alice):
    refused = api(alice["admin"]).post(
        "/api/v1/api-keys/", {"name": "x", "role": "owner"}, format="json"
    )
    assert refused.status_code == 403 and "role" in refused.json()["error"]
    # A service account is at most an admin, whoever makes it: a well-formed request for
    # more than may be granted is a 403 (schemathesis calls a 400 for a schema-valid body
    # a broken promise).
    refused = api(alice["owner"]).post(
        "/api/v1/api-keys/",
        {"name": "svc", "role": "owner", "service_account": True},
        format="json",
    )
    assert refused.status_code == 403 and "admin" in refused.json()["error"]
    dan, _ = join(alice["org"], "dan@example.com", "member")
    with pytest.raises(Exception, match="cannot do more"):
        api_key_create(organization=alice["org"], name="y", role="admin", owner=dan)


def test_the_key_list_shows_owner_role_and_last_use(api, alice):
    mine = api(alice["owner"])
    mine.get("/api/v1/clusters/")
    created = mine.post(
        "/api/v1/api-keys/", {"name": "svc", "service_account": True}, format="json"
    )
    assert created.status_code == 201, created.content
    keys = {k["name"]: k for k in mine.get("/api/v1/api-keys/").json()}
    own = next(k for k in keys.values() if k["owner"] == alice["user"].email)
    assert own["role"] == "owner" and own["service_account"] is False
    assert own["last_used_at"] is not None
    assert keys["svc"]["owner"] is None and keys["svc"]["service_account"] is True
    assert keys["svc"]["role"] == "admin"


def test_the_console_refuses_an_admin_the_plan_with_the_same_rule(client, alice):
    dan, _ = join(alice["org"], "dan@example.com", "admin")
    client.force_login(dan)
    refused = client.post("/billing/plan", {"plan": "pro"})
    assert refused.status_code == 403 and "Only owners change the plan" in refused.content.decode()


@pytest.mark.django_db(transaction=True)
def test_existing_keys_get_their_creator_as_owner_or_become_service_account_keys():
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before, after = (
        [("controlplane", "0002_console")],
        [("controlplane", "0003_api_key_owner_role")],
    )
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    apps = MigrationExecutor(connection).loader.project_state(before).apps
    org = apps.get_model("controlplane", "Organization").objects.create(name="old")
    user_model = apps.get_model("auth", "User")
    member = user_model.objects.create(username="m@example.com", email="m@example.com")
    gone = user_model.objects.create(username="g@example.com", email="g@example.com")
    apps.get_model("controlplane", "Membership").objects.create(
        organization=org, user=member, role="admin"
    )
    keys = apps.get_model("controlplane", "ApiKey").objects
    for name, scope, creator in [
        ("a", "admin", member),
        ("b", "read_only", gone),
        ("c", "admin", None),
    ]:
        keys.create(organization=org, name=name, scope=scope, digest=name, created_by=creator)
    executor = MigrationExecutor(connection)
    executor.migrate(after)
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
    migrated = {k.name: k for k in ApiKey.objects.filter(organization_id=org.pk)}
    assert (migrated["a"].owner_id, migrated["a"].role, migrated["a"].service_account) == (
        member.pk, "admin", False,
    )  # fmt: skip
    assert (migrated["b"].owner_id, migrated["b"].role, migrated["b"].service_account) == (
        None, "member", True,
    )  # fmt: skip
    assert (migrated["c"].owner_id, migrated["c"].service_account) == (None, True)
