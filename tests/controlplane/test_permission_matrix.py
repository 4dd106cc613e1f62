"""Every REST operation of the OpenAPI schema and every console page and form, for each
kind of caller: the organization's owner, an admin, a read-only member, a removed
member's key (the console: their session), another organization's owner. What each may
do comes from ONE table below (the least role an action needs, and what the request
answers when allowed); an operation or a console URL without a row fails the test.

Each cluster's Iceberg REST catalog (outside the OpenAPI schema) has its own table, CATALOG,
with the cluster's agent key and another cluster's among the callers.

Each request runs in a savepoint that is rolled back, so every caller meets the same
organization (a deletion by one does not hide the thing from the next).
"""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime

import pytest
from django.db import transaction
from django.test import Client
from django.urls import URLPattern, URLResolver, reverse
from rest_framework.test import APIClient

from billing.services import invoice_issue
from controlplane import console_urls
from metadata_store.mirroring import topic_mirroring_set
from metadata_store.topics import topic_create
from schema_registry.services import schema_register
from team import members as team
from team.services import api_key_create, signup_link_token
from tenancy.models import Membership
from tests import factories
from virtualclusters.mirror.models import MigrationTopic
from virtualclusters.mirror.services import migration_create
from virtualclusters.pipelines.services import pipeline_create
from virtualclusters.security.services import acl_binding, acl_create, sasl_credential_create
from virtualclusters.tables import catalog_urls
from virtualclusters.tables.topic_tables import topic_table_enable

pytestmark = pytest.mark.django_db

OWNER, ADMIN, MEMBER, ANYONE = "owner", "admin", "member", None
CALLERS = ("owner", "admin", "member", "removed", "other")
RANK = {None: 0, MEMBER: 1, ADMIN: 2, OWNER: 3}

# (method, path or console URL name): (the least role that may, the answer when allowed).
MATRIX = {
    # REST: every operation of the OpenAPI schema.
    ("GET", "/api/v1/api-keys/"): (MEMBER, 200),
    ("POST", "/api/v1/api-keys/"): (ADMIN, 201),
    ("DELETE", "/api/v1/api-keys/{key_id}/"): (ADMIN, 204),
    ("GET", "/api/v1/api-keys/{key_id}/"): (MEMBER, 200),
    ("GET", "/api/v1/audit-events/"): (MEMBER, 200),
    ("PUT", "/api/v1/billing/budget/"): (OWNER, 200),
    ("GET", "/api/v1/billing/invoices/"): (MEMBER, 200),
    ("GET", "/api/v1/billing/invoices/{invoice_id}.{fmt}"): (MEMBER, 200),
    ("GET", "/api/v1/billing/invoices/{invoice_id}/"): (MEMBER, 200),
    ("GET", "/api/v1/billing/plan/"): (MEMBER, 200),
    ("PUT", "/api/v1/billing/plan/"): (OWNER, 200),
    ("GET", "/api/v1/billing/plans/"): (MEMBER, 200),
    ("GET", "/api/v1/billing/usage/"): (MEMBER, 200),
    ("GET", "/api/v1/clusters/"): (MEMBER, 200),
    ("POST", "/api/v1/clusters/"): (ADMIN, 201),
    ("DELETE", "/api/v1/clusters/{cluster_id}/"): (ADMIN, 204),
    ("GET", "/api/v1/clusters/{cluster_id}/"): (MEMBER, 200),
    ("PATCH", "/api/v1/clusters/{cluster_id}/"): (ADMIN, 200),
    ("GET", "/api/v1/clusters/{cluster_id}/acls/"): (MEMBER, 200),
    ("POST", "/api/v1/clusters/{cluster_id}/acls/"): (ADMIN, 201),
    ("DELETE", "/api/v1/clusters/{cluster_id}/acls/{acl_id}/"): (ADMIN, 204),
    ("GET", "/api/v1/clusters/{cluster_id}/acls/{acl_id}/"): (MEMBER, 200),
    ("GET", "/api/v1/clusters/{cluster_id}/agent-keys/"): (MEMBER, 200),
    ("POST", "/api/v1/clusters/{cluster_id}/agent-keys/"): (ADMIN, 201),
    ("DELETE", "/api/v1/clusters/{cluster_id}/agent-keys/{key_id}/"): (ADMIN, 204),
    ("GET", "/api/v1/clusters/{cluster_id}/agent-keys/{key_id}/"): (MEMBER, 200),
    ("GET", "/api/v1/clusters/{cluster_id}/agents/"): (MEMBER, 200),
    ("PUT", "/api/v1/clusters/{cluster_id}/bucket/"): (ADMIN, 200),
    ("GET", "/api/v1/clusters/{cluster_id}/config/"): (MEMBER, 200),
    ("PATCH", "/api/v1/clusters/{cluster_id}/config/"): (ADMIN, 200),
    ("PUT", "/api/v1/clusters/{cluster_id}/config/"): (ADMIN, 200),
    ("GET", "/api/v1/clusters/{cluster_id}/groups/"): (MEMBER, 200),
    ("DELETE", "/api/v1/clusters/{cluster_id}/groups/{group_id}/"): (ADMIN, 404),
    ("GET", "/api/v1/clusters/{cluster_id}/groups/{group_id}/"): (MEMBER, 404),
    ("GET", "/api/v1/clusters/{cluster_id}/job-runs/"): (MEMBER, 200),
    ("GET", "/api/v1/clusters/{cluster_id}/migrations/"): (MEMBER, 200),
    ("POST", "/api/v1/clusters/{cluster_id}/migrations/"): (ADMIN, 201),
    ("GET", "/api/v1/clusters/{cluster_id}/migrations/{migration_id}/"): (MEMBER, 200),
    ("DELETE", "/api/v1/clusters/{cluster_id}/migrations/{migration_id}/"): (ADMIN, 204),
    ("POST", "/api/v1/clusters/{cluster_id}/migrations/{migration_id}/cutover/"): (ADMIN, 200),
    ("GET", "/api/v1/clusters/{cluster_id}/pipelines/"): (MEMBER, 200),
    ("POST", "/api/v1/clusters/{cluster_id}/pipelines/"): (ADMIN, 201),
    ("GET", "/api/v1/clusters/{cluster_id}/pipelines/{name}/"): (MEMBER, 200),
    ("DELETE", "/api/v1/clusters/{cluster_id}/pipelines/{name}/"): (ADMIN, 204),
    ("GET", "/api/v1/clusters/{cluster_id}/pipelines/{name}/configurations/"): (MEMBER, 200),
    ("POST", "/api/v1/clusters/{cluster_id}/pipelines/{name}/configurations/"): (ADMIN, 201),
    ("GET", "/api/v1/clusters/{cluster_id}/pipelines/{name}/configurations/{version}/"): (
        MEMBER,
        200,
    ),
    # A dry run changes nothing, but runs the configuration (on an agent, or here): admins.
    ("POST", "/api/v1/clusters/{cluster_id}/pipelines/{name}/dry-run"): (ADMIN, 200),
    ("POST", "/api/v1/clusters/{cluster_id}/pipelines/{name}/state"): (ADMIN, 200),
    ("GET", "/api/v1/clusters/{cluster_id}/schemas/config/"): (MEMBER, 200),
    ("PUT", "/api/v1/clusters/{cluster_id}/schemas/config/"): (ADMIN, 200),
    ("GET", "/api/v1/clusters/{cluster_id}/schemas/subjects/"): (MEMBER, 200),
    ("DELETE", "/api/v1/clusters/{cluster_id}/schemas/subjects/{subject}/"): (ADMIN, 204),
    ("GET", "/api/v1/clusters/{cluster_id}/schemas/subjects/{subject}/"): (MEMBER, 200),
    ("PATCH", "/api/v1/clusters/{cluster_id}/schemas/subjects/{subject}/"): (ADMIN, 200),
    ("GET", "/api/v1/clusters/{cluster_id}/schemas/subjects/{subject}/versions/"): (MEMBER, 200),
    (
        "DELETE",
        "/api/v1/clusters/{cluster_id}/schemas/subjects/{subject}/versions/{version}/",
    ): (ADMIN, 204),
    # The text needs a live agent of the cluster; the world has none: a 409 that says so.
    (
        "GET",
        "/api/v1/clusters/{cluster_id}/schemas/subjects/{subject}/versions/{version}/",
    ): (MEMBER, 409),
    ("GET", "/api/v1/clusters/{cluster_id}/share-groups/"): (MEMBER, 200),
    ("DELETE", "/api/v1/clusters/{cluster_id}/share-groups/{group_id}/"): (ADMIN, 404),
    ("GET", "/api/v1/clusters/{cluster_id}/share-groups/{group_id}/"): (MEMBER, 404),
    ("POST", "/api/v1/clusters/{cluster_id}/share-groups/{group_id}/delete-offsets/"): (ADMIN, 404),
    ("POST", "/api/v1/clusters/{cluster_id}/share-groups/{group_id}/reset-offsets/"): (ADMIN, 404),
    ("GET", "/api/v1/clusters/{cluster_id}/sasl-credentials/"): (MEMBER, 200),
    ("POST", "/api/v1/clusters/{cluster_id}/sasl-credentials/"): (ADMIN, 201),
    ("DELETE", "/api/v1/clusters/{cluster_id}/sasl-credentials/{credential_id}/"): (ADMIN, 204),
    ("GET", "/api/v1/clusters/{cluster_id}/sasl-credentials/{credential_id}/"): (MEMBER, 200),
    ("GET", "/api/v1/clusters/{cluster_id}/throughput/"): (MEMBER, 200),
    ("GET", "/api/v1/clusters/{cluster_id}/diagnostics/"): (MEMBER, 200),
    ("GET", "/api/v1/clusters/{cluster_id}/metrics"): (MEMBER, 200),
    ("GET", "/api/v1/clusters/{cluster_id}/topics/"): (MEMBER, 200),
    ("POST", "/api/v1/clusters/{cluster_id}/topics/"): (ADMIN, 201),
    ("DELETE", "/api/v1/clusters/{cluster_id}/topics/{name}/"): (ADMIN, 204),
    ("GET", "/api/v1/clusters/{cluster_id}/topics/{name}/"): (MEMBER, 200),
    ("PATCH", "/api/v1/clusters/{cluster_id}/topics/{name}/"): (ADMIN, 200),
    ("GET", "/api/v1/clusters/{cluster_id}/topics/{name}/records/"): (MEMBER, 409),
    # The matrix sends no ?offset=: a 400 says it is needed (the answers:
    # tests/virtualclusters/test_file_index_api.py).
    ("GET", "/api/v1/clusters/{cluster_id}/topics/{name}/partitions/{partition}/locate"): (
        MEMBER,
        400,
    ),
    ("GET", "/api/v1/clusters/{cluster_id}/files/"): (MEMBER, 200),
    ("DELETE", "/api/v1/clusters/{cluster_id}/topics/{name}/table/"): (ADMIN, 204),
    ("GET", "/api/v1/clusters/{cluster_id}/topics/{name}/table/"): (MEMBER, 200),
    ("PUT", "/api/v1/clusters/{cluster_id}/topics/{name}/table/"): (ADMIN, 200),
    ("POST", "/api/v1/invitations/"): (ADMIN, 201),
    ("GET", "/api/v1/members/"): (MEMBER, 200),
    ("DELETE", "/api/v1/members/{email}/"): (ADMIN, 204),
    ("PATCH", "/api/v1/members/{email}/"): (ADMIN, 200),
    # The console: every page (GET) and form (POST) by URL name; the third number is
    # what a person of no organization (a removed member) gets.
    ("POST", "acl-create"): (ADMIN, 400, 404),
    ("POST", "acl-delete"): (ADMIN, 302, 404),
    ("POST", "agent-key-create"): (ADMIN, 302, 404),
    ("POST", "agent-key-revoke"): (ADMIN, 302, 404),
    ("GET", "audit-log"): (MEMBER, 200, 404),
    ("POST", "billing-budget"): (OWNER, 302, 404),
    ("GET", "billing-invoice"): (MEMBER, 200, 404),
    ("POST", "billing-invoice"): (ADMIN, 200, 404),
    ("GET", "billing-invoice-file"): (MEMBER, 200, 404),
    ("POST", "billing-invoice-file"): (ADMIN, 200, 404),
    ("POST", "billing-plan"): (OWNER, 302, 404),
    ("GET", "billing-usage"): (MEMBER, 200, 404),
    ("POST", "billing-usage"): (ADMIN, 200, 404),
    ("GET", "cluster-agents"): (MEMBER, 200, 404),
    ("POST", "cluster-config"): (ADMIN, 200, 404),
    ("POST", "cluster-delete"): (ADMIN, 302, 404),
    ("GET", "cluster-detail"): (MEMBER, 200, 404),
    ("POST", "cluster-detail"): (ADMIN, 200, 404),
    ("GET", "cluster-groups"): (MEMBER, 200, 404),
    ("POST", "cluster-groups"): (ADMIN, 302, 404),
    ("GET", "cluster-share-groups"): (MEMBER, 200, 404),
    ("POST", "cluster-share-groups"): (ADMIN, 302, 404),
    ("GET", "cluster-jobs"): (MEMBER, 200, 404),
    ("POST", "cluster-jobs"): (ADMIN, 200, 404),
    ("GET", "cluster-new"): (MEMBER, 200, 404),
    ("POST", "cluster-new"): (ADMIN, 200, 404),
    ("POST", "cluster-rename"): (ADMIN, 302, 404),
    ("GET", "cluster-security"): (MEMBER, 200, 404),
    ("POST", "cluster-security"): (ADMIN, 200, 404),
    ("GET", "cluster-throughput"): (MEMBER, 200, 404),
    ("GET", "cluster-diagnostics"): (MEMBER, 200, 404),
    ("GET", "cluster-migrations"): (MEMBER, 200, 404),
    ("GET", "migration-new"): (MEMBER, 200, 404),
    ("POST", "migration-new"): (ADMIN, 302, 404),
    ("GET", "migration-detail"): (MEMBER, 200, 404),
    ("GET", "migration-cutover"): (MEMBER, 200, 404),  # the page that asks first
    ("POST", "migration-cutover"): (ADMIN, 302, 404),
    ("GET", "migration-stop"): (MEMBER, 200, 404),  # the page that asks first
    ("POST", "migration-stop"): (ADMIN, 302, 404),
    ("GET", "cluster-pipelines"): (MEMBER, 200, 404),
    ("GET", "pipeline-new"): (MEMBER, 200, 404),  # the editor, its buttons disabled
    ("POST", "pipeline-new"): (ADMIN, 302, 404),
    ("GET", "pipeline-detail"): (MEMBER, 200, 404),
    ("GET", "pipeline-edit"): (MEMBER, 200, 404),
    ("POST", "pipeline-edit"): (ADMIN, 302, 404),
    ("POST", "pipeline-state"): (ADMIN, 302, 404),
    ("GET", "pipeline-delete"): (MEMBER, 200, 404),  # the page that asks first
    ("POST", "pipeline-delete"): (ADMIN, 302, 404),
    ("POST", "console-api-key-create"): (ADMIN, 302, 404),
    ("POST", "console-api-key-revoke"): (ADMIN, 302, 404),
    ("GET", "console-api-keys"): (MEMBER, 200, 200),
    ("POST", "console-api-keys"): (ADMIN, 200, 200),
    ("GET", "dashboard"): (MEMBER, 200, 200),
    ("POST", "dashboard"): (ADMIN, 200, 200),
    ("GET", "invitation-accept"): (ANYONE, 200, 200),
    ("POST", "invitation-accept"): (ANYONE, 200, 200),
    ("GET", "invitation-account"): (ANYONE, 200, 200),
    ("POST", "invitation-account"): (ANYONE, 200, 200),
    ("GET", "login"): (ANYONE, 302, 302),
    ("POST", "login"): (ANYONE, 302, 302),
    ("POST", "logout"): (ANYONE, 302, 302),
    ("POST", "org-switch"): (ANYONE, 404, 404),
    ("POST", "sasl-credential-create"): (ADMIN, 302, 404),
    ("GET", "cluster-schemas"): (MEMBER, 200, 404),
    ("POST", "cluster-schemas-config"): (ADMIN, 302, 404),
    ("GET", "schema-subject"): (MEMBER, 200, 404),
    ("POST", "schema-subject-config"): (ADMIN, 302, 404),
    ("POST", "schema-subject-delete"): (ADMIN, 302, 404),
    ("POST", "schema-version-delete"): (ADMIN, 302, 404),
    ("POST", "sasl-credential-delete"): (ADMIN, 302, 404),
    ("GET", "signup"): (ANYONE, 302, 302),
    ("POST", "signup"): (ANYONE, 302, 302),
    ("GET", "signup-finish"): (ANYONE, 200, 200),
    ("POST", "signup-finish"): (ANYONE, 200, 200),
    ("GET", "team"): (MEMBER, 200, 404),
    ("POST", "team"): (ADMIN, 302, 404),
    ("POST", "team-member"): (ADMIN, 302, 404),
    ("POST", "topic-config"): (ADMIN, 302, 404),
    ("POST", "topic-delete"): (ADMIN, 302, 404),
    ("GET", "topic-detail"): (MEMBER, 200, 404),
    ("POST", "topic-new"): (ADMIN, 302, 404),
}

# FLOE_MATRIX_RECORD=1 (with -s) prints every answer: for writing a new row, never to
# copy answers in wholesale — each row is a decision about who may do what.
RECORD = os.environ.get("FLOE_MATRIX_RECORD") == "1"


@pytest.fixture
def world(db):
    """Alice's organization with everything the paths name; its people; Bob's."""
    alice, org = factories.make_org("alice-co")
    cluster, agent_key = factories.make_cluster("alice-cluster", org=org)
    orders = topic_create(cluster=cluster, name="orders", num_partitions=1)
    cluster.bucket_url = "file:///tmp/alice-co-bucket"  # no object is written there
    cluster.save(update_fields=["bucket_url"])
    topic_table_enable(topic=orders, schema="raw")
    schema_register(
        cluster=cluster, subject="orders-value", fingerprint="a" * 64, schema_type="AVRO",
        references=[], checked_latest=0,
    )  # fmt: skip
    credential, _ = sasl_credential_create(cluster=cluster, username="app")
    acl, _ = acl_create(
        cluster=cluster,
        binding=acl_binding(
            {"resource_type": "topic", "resource_name": "t", "principal": "User:app",
             "operation": "read"}
        ),
    )  # fmt: skip
    migration = migration_create(cluster=cluster, source_bootstrap="127.0.0.1:9092", topics="moved")
    moved = topic_create(cluster=cluster, name="moved", num_partitions=1)
    MigrationTopic.objects.create(migration=migration, name="moved", topic=moved)
    topic_mirroring_set(topic=moved, migration_id=migration.public_id)
    pipeline_create(cluster=cluster, name="orders", config=PIPELINE)
    invoice = invoice_issue(organization=org, month_start=datetime(2026, 10, 1, tzinfo=UTC))
    people = {}
    for name, role in [("ada", ADMIN), ("mo", MEMBER), ("rex", ADMIN), ("eve", MEMBER)]:
        invitation, link, _ = team.invitation_create(
            organization=org, email=f"{name}@example.com", role=role, invited_by=alice,
            link_base="http://x",
        )  # fmt: skip
        people[name] = team.invitation_account_create(
            invitation=invitation, password=factories.PASSWORD
        )
    keys = {
        "owner": factories.make_api_key(org, role=OWNER, owner=alice),
        "admin": factories.make_api_key(org, role=ADMIN, owner=people["ada"]),
        "member": factories.make_api_key(org, role=MEMBER, owner=people["mo"]),
        "removed": factories.make_api_key(org, role=ADMIN, owner=people["rex"]),
    }
    owner_membership = Membership.objects.get(organization=org, user=alice)
    rex = Membership.objects.get(organization=org, user=people["rex"])
    team.member_remove(actor=owner_membership, target=rex)
    bob, bob_org = factories.make_org("bob-co")
    _, bob_agent_key = factories.make_cluster("bob-cluster", org=bob_org)
    keys["other"] = factories.make_api_key(bob_org, role=OWNER, owner=bob)
    keys["agent"], keys["other agent"] = agent_key, bob_agent_key
    victim_key, _ = api_key_create(
        organization=org, name="victim", role=MEMBER, service_account=True
    )
    _, link, _ = team.invitation_create(
        organization=org, email="new@example.com", role=MEMBER, invited_by=alice,
        link_base="http://x",
    )  # fmt: skip
    return {
        "keys": keys,
        "users": {
            "owner": alice,
            "admin": people["ada"],
            "member": people["mo"],
            "removed": people["rex"],
            "other": bob,
        },  # fmt: skip
        "params": {
            "cluster_id": cluster.public_id,
            "name": "orders",
            "partition": "0",
            "namespace": "topics",  # the topic table's, made by topic_table_enable
            "table": "orders",
            "subject": "orders-value",
            "version": "1",
            "acl_id": acl.public_id,
            "credential_id": credential.public_id,
            "group_id": "no-such-group",
            "invoice_id": invoice.public_id,
            "fmt": "pdf",
            "email": "eve@example.com",
            "token": link.rsplit("/", 1)[1],
            "invitation_signed": team.invitation_account_link_token(link.rsplit("/", 1)[1]),
            "signup_signed": signup_link_token(email="new@example.com", organization_name=""),
            "api_key_id": victim_key.public_id,
            "agent_key_id": cluster.agent_keys.get().public_id,
            "migration_id": migration.public_id,
        },
    }


# A pipeline named as the topic (the paths' {name}), and its configurations' text.
PIPELINE = "input: {kafka: {topics: [orders]}}\noutputs: {default: {bucket: {prefix: x/}}}\n"

# Bodies that an allowed caller's request succeeds with (anything else sends none).
BODIES = {
    ("POST", "/api/v1/api-keys/"): {"name": "made", "role": "member"},
    ("PUT", "/api/v1/billing/budget/"): {"monthly_micros": 1000},
    ("PUT", "/api/v1/billing/plan/"): {"plan": "pro"},
    ("POST", "/api/v1/clusters/"): {"name": "made"},
    ("PATCH", "/api/v1/clusters/{cluster_id}/"): {"name": "renamed"},
    ("DELETE", "/api/v1/clusters/{cluster_id}/"): {"confirm_name": "alice-cluster"},
    ("POST", "/api/v1/clusters/{cluster_id}/acls/"): {
        "resource_type": "topic",
        "resource_name": "made",
        "principal": "User:app",
        "operation": "write",
    },  # fmt: skip
    ("POST", "/api/v1/clusters/{cluster_id}/agent-keys/"): {"name": "made"},
    ("PUT", "/api/v1/clusters/{cluster_id}/bucket/"): {"bucket_url": "file:///tmp/made"},
    ("PUT", "/api/v1/clusters/{cluster_id}/config/"): {"default_partitions": 2},
    ("PUT", "/api/v1/clusters/{cluster_id}/schemas/config/"): {"compatibility": "FULL"},
    ("PATCH", "/api/v1/clusters/{cluster_id}/schemas/subjects/{subject}/"): {
        "compatibility": "NONE"
    },
    ("PATCH", "/api/v1/clusters/{cluster_id}/config/"): {"default_partitions": 2},
    ("POST", "/api/v1/clusters/{cluster_id}/sasl-credentials/"): {"username": "made"},
    ("POST", "/api/v1/clusters/{cluster_id}/topics/"): {"name": "made"},
    ("POST", "/api/v1/clusters/{cluster_id}/share-groups/{group_id}/reset-offsets/"): {
        "topic": "orders",
        "to": "earliest",
    },
    ("POST", "/api/v1/clusters/{cluster_id}/share-groups/{group_id}/delete-offsets/"): {
        "topic": "orders"
    },
    ("POST", "/api/v1/clusters/{cluster_id}/migrations/"): {
        "source_bootstrap": "127.0.0.1:9092",
        "topics": "made-.*",
    },
    ("POST", "/api/v1/clusters/{cluster_id}/migrations/{migration_id}/cutover/"): {
        "topics": ["moved"]
    },
    ("POST", "/api/v1/clusters/{cluster_id}/pipelines/"): {"name": "made", "config": PIPELINE},
    ("POST", "/api/v1/clusters/{cluster_id}/pipelines/{name}/configurations/"): {
        "config": PIPELINE
    },
    ("POST", "/api/v1/clusters/{cluster_id}/pipelines/{name}/dry-run"): {
        "samples": [{"value": "{}"}]
    },
    ("POST", "/api/v1/clusters/{cluster_id}/pipelines/{name}/state"): {"state": "running"},
    ("PATCH", "/api/v1/clusters/{cluster_id}/topics/{name}/"): {"configs": {}},
    ("PUT", "/api/v1/clusters/{cluster_id}/topics/{name}/table/"): {"schema": "raw"},
    ("POST", "/api/v1/invitations/"): {"email": "made@example.com", "role": "member"},
    ("PATCH", "/api/v1/members/{email}/"): {"role": "admin"},
    ("POST", "console-api-key-create"): {"name": "made", "role": "member"},
    ("POST", "cluster-new"): {"name": "made"},
    ("POST", "cluster-rename"): {"name": "renamed"},
    ("POST", "cluster-delete"): {"confirm_name": "alice-cluster"},
    ("POST", "topic-new"): {"name": "made", "partitions": 1},
    ("POST", "schema-subject-config"): {"compatibility": "FULL"},
    ("POST", "cluster-schemas-config"): {"compatibility": "NONE"},
    ("POST", "schema-subject-delete"): {"confirm_name": "orders-value"},
    ("POST", "schema-version-delete"): {"version": "1", "confirm_name": "orders-value"},
    ("POST", "agent-key-create"): {"name": "made"},
    ("POST", "migration-new"): {
        "source_bootstrap": "127.0.0.1:9092",
        "source_security__protocol": "PLAINTEXT",
        "topics": "made-.*",
    },
    ("POST", "pipeline-new"): {"name": "made", "config": PIPELINE, "action": "save"},
    ("POST", "pipeline-edit"): {"config": PIPELINE, "action": "save"},
    ("POST", "pipeline-state"): {"state": "running"},
    ("GET", "migration-cutover"): {"topics": ["moved"]},
    ("POST", "migration-cutover"): {"topics": ["moved"]},
    ("POST", "team"): {"email": "made@example.com", "role": "member"},
    ("POST", "team-member"): {"action": "role", "role": "admin"},
    ("POST", "sasl-credential-create"): {"username": "made"},
    ("POST", "billing-plan"): {"plan": "pro"},
    ("POST", "billing-budget"): {"budget": "250"},
}


def rest_operations() -> list[tuple[str, str]]:
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    return [(m.upper(), path) for path, ops in schema["paths"].items() for m in ops]


def rest_url(path: str, params: dict) -> str:
    key_id = params["agent_key_id"] if "agent-keys" in path else params["api_key_id"]
    values = {**params, "key_id": key_id}
    return re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], path)


def expected(caller: str, row: tuple, names_a_thing: bool) -> int:
    """What `caller` gets for an action with `row` (least role, status when allowed)."""
    least, allowed = row[:2]
    if caller == "removed":
        return 401
    if caller == "other":  # Bob acts in his own organization; Alice's things are not there
        return 404 if names_a_thing else allowed
    return allowed if RANK[caller] >= RANK[least] else 403


def judge(what: str, got: dict, missing: list, wrong: list) -> None:
    """Fail on any action without a row, then on any answer the table did not expect."""
    if RECORD:
        for (method, action, caller), status in sorted(got.items()):
            print(method, action, caller, status)
    assert not missing, f"{what} without a row in MATRIX: {missing}"
    assert not wrong, "(method, action, caller, got, expected):\n" + "\n".join(map(str, wrong))


def once(call, *args, **kwargs):
    """`call(...)` in a savepoint rolled back afterwards: every caller meets the same data."""
    with transaction.atomic():
        response = call(*args, **kwargs)
        transaction.set_rollback(True)
    return response


def test_every_rest_operation_answers_each_caller_as_the_table_says(world):
    operations = rest_operations()
    missing = [op for op in operations if op not in MATRIX]
    got, wrong = {}, []
    for method, path in operations:
        url = rest_url(path, world["params"])
        body = BODIES.get((method, path))
        for caller in CALLERS:
            client = APIClient(raise_request_exception=False)
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {world['keys'][caller]}")
            data = "" if body is None else json.dumps(body)
            response = once(client.generic, method, url, data, content_type="application/json")
            got[(method, path, caller)] = response.status_code
            if (method, path) in MATRIX:
                want = expected(caller, MATRIX[(method, path)], "{" in path)
                if response.status_code != want:
                    wrong.append((method, path, caller, response.status_code, want))
    judge("REST operations", got, missing, wrong)


def console_routes() -> list[tuple[str, list[str]]]:
    """Every console URL name and the parameters its pattern takes."""
    routes = []

    def walk(patterns) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns)
            elif isinstance(pattern, URLPattern) and pattern.name:
                routes.append((pattern.name, list(pattern.pattern.regex.groupindex)))

    walk(console_urls.urlpatterns)
    return routes


def console_url(name: str, kwargs: list[str], params: dict) -> str:
    key_id = params["api_key_id"] if "api-key" in name else params["agent_key_id"]
    signed = params["signup_signed"] if name == "signup-finish" else params["invitation_signed"]
    values = {**params, "key_id": key_id, "signed": signed}
    return reverse(name, kwargs={k: values[k] for k in kwargs})


def test_every_console_page_and_form_answers_each_caller_as_the_table_says(world):
    def signed_in(caller: str) -> Client:
        client = Client(raise_request_exception=False)
        client.force_login(world["users"][caller])
        return client

    missing, got, wrong = [], {}, []
    for name, kwargs in console_routes():
        url = console_url(name, kwargs, world["params"])
        for method in ("GET", "POST"):
            # A method the page does not take (405 for its owner) needs no row.
            if once(signed_in("owner").generic, method, url).status_code == 405:
                continue
            if (method, name) not in MATRIX:
                missing.append((method, name))
                if not RECORD:
                    continue
            body = BODIES.get((method, name), {})
            for caller in CALLERS:
                client = signed_in(caller)
                send = client.post if method == "POST" else client.get
                response = once(send, url, body)
                got[(method, name, caller)] = response.status_code
                row = MATRIX.get((method, name), (None, 0, 0))
                want = expected_in_console(caller, row, bool(set(kwargs) - {"token", "signed"}))
                if response.status_code != want:
                    wrong.append((method, name, caller, response.status_code, want))
    judge("console pages or forms", got, missing, wrong)


def expected_in_console(caller: str, row: tuple, names_a_thing: bool) -> int:
    """What `caller` gets for a console row (least role, when allowed, without an org)."""
    least, allowed, without_organization = row
    if caller == "removed":  # signed in, but a member of no organization any more
        return without_organization
    return expected(caller, (least, allowed), names_a_thing)


# Each cluster's Iceberg REST catalog (/iceberg/<cluster id>/v1/…, outside the OpenAPI
# schema), by URL name: (the least role that may, the answer when allowed). The cluster's
# own agent key (its jobs-role agents) may everything an admin may; another cluster's is 404.
CATALOG = {
    ("GET", "iceberg-config"): (MEMBER, 200),
    ("GET", "iceberg-namespaces"): (MEMBER, 200),
    ("POST", "iceberg-namespaces"): (ADMIN, 200),
    ("GET", "iceberg-namespace"): (MEMBER, 200),
    ("DELETE", "iceberg-namespace"): (ADMIN, 409),  # it holds the topic's table
    ("GET", "iceberg-tables"): (MEMBER, 200),
    ("POST", "iceberg-tables"): (ADMIN, 200),
    ("GET", "iceberg-table"): (MEMBER, 200),
    ("POST", "iceberg-table"): (ADMIN, 200),
    ("DELETE", "iceberg-table"): (ADMIN, 204),
}
CATALOG_BODIES = {
    ("POST", "iceberg-namespaces"): {"namespace": ["made"]},
    ("POST", "iceberg-tables"): {"name": "made", "schema": {"type": "struct", "fields": []}},
    ("POST", "iceberg-table"): {
        "identifier": {"namespace": ["topics"], "name": "orders"},
        "requirements": [],
        "updates": [],
    },
}


def catalog_operations() -> list[tuple[str, str, list[str]]]:
    """Every method every catalog URL's view answers: (method, URL name, its parameters)."""
    return [
        (method.upper(), pattern.name, list(pattern.pattern.regex.groupindex))
        for pattern in catalog_urls.urlpatterns
        for method in pattern.callback.view_class.http_method_names
        if method not in ("options", "head") and hasattr(pattern.callback.view_class, method)
    ]


def test_every_catalog_operation_answers_each_key_as_the_table_says(world):
    """Another organization's API key, or another cluster's agent key, finds no catalog."""
    operations = catalog_operations()
    assert len(operations) >= 10
    missing = [(m, name) for m, name, _ in operations if (m, name) not in CATALOG]
    got, wrong = {}, []
    for method, name, kwargs in operations:
        url = reverse(name, kwargs={k: world["params"][k] for k in kwargs})
        body = CATALOG_BODIES.get((method, name))
        for caller in (*CALLERS, "agent", "other agent"):
            client = APIClient(raise_request_exception=False)
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {world['keys'][caller]}")
            data = "" if body is None else json.dumps(body)
            response = once(client.generic, method, url, data, content_type="application/json")
            got[(method, name, caller)] = response.status_code
            if (method, name) in CATALOG:
                least, allowed = CATALOG[(method, name)]
                want = {"agent": allowed, "other agent": 404, "other": 404}.get(caller)
                if want is None:
                    want = expected(caller, (least, allowed), True)
                if response.status_code != want:
                    wrong.append((method, name, caller, response.status_code, want))
    judge("catalog operations", got, missing, wrong)
