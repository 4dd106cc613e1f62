"""Shared fixtures: REST clients authenticated by API key, organizations, clusters."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from controlplane.models import ApiKey
from tests import factories


@pytest.fixture
def alice(db):
    """Alice's organization with an admin key, a read-only key and one cluster."""
    user, org = factories.make_org("alice-co")
    cluster, agent_key = factories.make_cluster("alice-cluster", org=org)
    return {
        "user": user,
        "org": org,
        "cluster": cluster,
        "agent_key": agent_key,
        "admin": factories.make_api_key(org),
        "reader": factories.make_api_key(org, scope=ApiKey.Scope.READ_ONLY),
    }


@pytest.fixture
def bob(db):
    """Another tenant, to prove Alice's things are invisible to him."""
    user, org = factories.make_org("bob-co")
    cluster, agent_key = factories.make_cluster("bob-cluster", org=org)
    return {
        "user": user,
        "org": org,
        "cluster": cluster,
        "agent_key": agent_key,
        "admin": factories.make_api_key(org),
    }


@pytest.fixture
def api():
    """A REST client; ``api(key)`` returns one that sends that API key."""

    def client(key: str | None = None) -> APIClient:
        c = APIClient()
        if key:
            c.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
        return c

    return client
