"""Test data built through the real services (never raw model writes)."""

from __future__ import annotations

import itertools

from team.services import api_key_create, user_signup
from tenancy.models import Membership
from virtualclusters.services import agent_key_create, cluster_create

_counter = itertools.count(1)
PASSWORD = "correct-horse-battery-staple"


def make_org(name: str | None = None):
    """A user and their organization (the user is its owner)."""
    n = next(_counter)
    user, org = user_signup(
        email=f"user{n}@example.com", password=PASSWORD, organization_name=name or f"org{n}"
    )
    return user, org


def make_api_key(org, *, role: str = Membership.Role.ADMIN, owner=None) -> str:
    """The plaintext of a new API key of ``org``: ``owner``'s, or (none given) the
    organization's service account's."""
    _, plaintext = api_key_create(
        organization=org,
        name=f"key {next(_counter)}",
        role=role,
        owner=owner,
        service_account=owner is None,
    )
    return plaintext


def make_cluster(name: str = "c1", *, org=None, **config):
    """A virtual cluster (in a new organization unless given) and an agent key for it."""
    if org is None:
        _, org = make_org()
    cluster = cluster_create(organization=org, name=name, config=config)
    _, plaintext = agent_key_create(cluster=cluster, name="test agent")
    return cluster, plaintext
