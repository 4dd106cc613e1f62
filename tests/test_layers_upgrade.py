"""Upgrading a database made before the layers (issue 26): controlplane's models move to
`tenancy` (Organization, Membership, Invitation) and `team` (ApiKey, AuditEvent),
virtualclusters' VirtualCluster and AgentKey to `metadata_store` — with their tables,
rows, foreign keys and content types as they were."""

from __future__ import annotations

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from billing.models import Budget
from metadata_store.models import AgentKey, Topic
from schema_registry.models import Registry
from team.models import ApiKey, AuditEvent
from tenancy.models import Invitation, Membership, Organization
from virtualclusters.models import SaslCredential, VirtualCluster

# The last migrations of the release before the move.
BEFORE = [
    ("controlplane", "0003_api_key_owner_role"),
    ("virtualclusters", "0010_throughput_out"),
    ("billing", "0001_initial"),
    ("metadata_store", "0011_random_producer_ids"),
    ("schema_registry", "0001_initial"),
]
# (old app, model) → new app
MOVED = {
    ("controlplane", "organization"): "tenancy",
    ("controlplane", "membership"): "tenancy",
    ("controlplane", "invitation"): "tenancy",
    ("controlplane", "apikey"): "team",
    ("controlplane", "auditevent"): "team",
    ("virtualclusters", "virtualcluster"): "metadata_store",
    ("virtualclusters", "agentkey"): "metadata_store",
}


def _migrate(targets) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return MigrationExecutor(connection)  # a fresh loader sees the applied set


def _fill_old_schema(apps) -> dict:
    """A row in every moved model, and rows of other apps pointing at them."""
    user = apps.get_model("auth", "User").objects.create(username="o@example.com")
    org = apps.get_model("controlplane", "Organization").objects.create(
        name="old-co", public_id="org_upgrade"
    )
    membership = apps.get_model("controlplane", "Membership").objects.create(
        organization=org, user=user, role="owner"
    )
    apps.get_model("controlplane", "Invitation").objects.create(
        public_id="inv_upgrade",
        organization=org,
        email="new@example.com",
        role="member",
        digest="d" * 64,
        created_by=user,
    )
    apps.get_model("controlplane", "ApiKey").objects.create(
        public_id="key_upgrade",
        organization=org,
        name="ci",
        role="admin",
        owner=user,
        display_prefix="floe_api_ab",
        digest="k" * 64,
        created_by=user,
    )
    apps.get_model("controlplane", "AuditEvent").objects.create(
        organization=org,
        actor=user,
        actor_label="o@example.com",
        action="created",
        target_type="cluster",
        target_id="vci_upgrade",
        target_name="old-cluster",
    )
    cluster = apps.get_model("virtualclusters", "VirtualCluster").objects.create(
        organization=org, name="old-cluster", public_id="vci_upgrade"
    )
    apps.get_model("billing", "Budget").objects.create(organization=org, monthly_micros=5)
    apps.get_model("virtualclusters", "AgentKey").objects.create(
        public_id="akn_upgrade", cluster=cluster, name="prod", display_prefix="p", digest="a" * 64
    )
    apps.get_model("metadata_store", "Topic").objects.create(
        cluster=cluster, name="orders", partition_count=3
    )
    apps.get_model("virtualclusters", "SaslCredential").objects.create(
        public_id="scr_upgrade",
        cluster=cluster,
        username="app",
        plain_hash="h",
        scram_sha256={},
        scram_sha512={},
    )
    apps.get_model("schema_registry", "Registry").objects.create(cluster=cluster, next_id=7)
    # The content types the old release made for its models (the new ones' rows are
    # not there yet in an old database). The contenttypes app itself is not rolled back:
    # its current model.
    content_types = ContentType.objects
    for (_, model), new_app in MOVED.items():
        content_types.filter(app_label=new_app, model=model).delete()
    kept = {
        (app, model): content_types.get_or_create(app_label=app, model=model)[0].pk
        for app, model in MOVED
    }
    return {
        "user": user.pk,
        "org": org.pk,
        "membership": membership.pk,
        "cluster": cluster.pk,
        "content_types": kept,
    }


@pytest.mark.django_db(transaction=True)
def test_the_move_keeps_every_row_and_foreign_key():
    old = _migrate(BEFORE)
    made = _fill_old_schema(old.loader.project_state(BEFORE).apps)
    new = _migrate(old.loader.graph.leaf_nodes())
    ContentType.objects.clear_cache()
    assert not new.migration_plan(new.loader.graph.leaf_nodes())

    org = Organization.objects.get(pk=made["org"])
    assert (org.public_id, org.name) == ("org_upgrade", "old-co")
    membership = Membership.objects.get(pk=made["membership"])
    assert (membership.organization, membership.user_id, membership.role) == (
        org, made["user"], "owner",
    )  # fmt: skip
    invitation = Invitation.objects.for_org(org).get()
    assert (invitation.public_id, invitation.created_by_id) == ("inv_upgrade", made["user"])
    key = ApiKey.objects.for_org(org).get()
    assert (key.public_id, key.owner_id, key.role) == ("key_upgrade", made["user"], "admin")
    event = AuditEvent.objects.for_org(org).get()
    assert (event.actor_id, event.target_id) == (made["user"], "vci_upgrade")
    assert VirtualCluster.objects.get(pk=made["cluster"]).organization == org
    assert Budget.objects.for_org(org).get().monthly_micros == 5
    assert list(org.clusters.values_list("public_id", flat=True)) == ["vci_upgrade"]
    cluster = VirtualCluster.objects.get(pk=made["cluster"])
    assert AgentKey.objects.get(public_id="akn_upgrade").cluster == cluster
    assert list(cluster.agent_keys.values_list("name", flat=True)) == ["prod"]
    assert Topic.objects.get(name="orders").cluster == cluster
    assert SaslCredential.objects.get(public_id="scr_upgrade").cluster == cluster
    assert Registry.objects.get(cluster=cluster).next_id == 7

    # The content types moved with their models (same ids: whatever refers to them holds).
    for (old_app, model), new_app in MOVED.items():
        moved = ContentType.objects.get(app_label=new_app, model=model)
        assert moved.pk == made["content_types"][(old_app, model)]
        assert not ContentType.objects.filter(app_label=old_app, model=model).exists()

    # The database's foreign keys are the old ones, still enforced.
    with pytest.raises(IntegrityError), transaction.atomic():
        Membership.objects.create(organization_id=org.pk + 1000, user_id=made["user"])
    with pytest.raises(IntegrityError), transaction.atomic():
        VirtualCluster.objects.create(organization_id=org.pk + 1000, name="orphan")
    with pytest.raises(IntegrityError), transaction.atomic():
        Topic.objects.create(cluster_id=cluster.pk + 1000, name="orphan", partition_count=1)

    # New rows carry on through the new models.
    other = Organization.objects.create(name="new-co")
    assert other.public_id.startswith("org_") and other.pk > org.pk
