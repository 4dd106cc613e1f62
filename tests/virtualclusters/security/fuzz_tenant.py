"""The tenant schemathesis runs as: an organization whose cluster has a SASL user and an
ACL, so that generated calls reach the services; the owner's API key (owner role, so
that owner-only operations reach their services too)."""

from __future__ import annotations

from tests import factories
from virtualclusters.security.services import acl_binding, acl_create, sasl_credential_create


def make_fuzz_tenant(name: str) -> dict:
    user, org = factories.make_org(name)
    cluster, _ = factories.make_cluster("fuzzed", org=org)
    sasl_credential_create(cluster=cluster, username="fuzz-user")
    acl_create(
        cluster=cluster,
        binding=acl_binding(
            {
                "resource_type": "topic",
                "resource_name": "t",
                "principal": "User:fuzz-user",
                "operation": "read",
            }
        ),
    )
    key = factories.make_api_key(org, role="owner", owner=user)
    return {"cluster": cluster, "key": key}
