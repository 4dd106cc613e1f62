"""Security tests drive real agents through the fixtures of tests/agent, plus clusters with
SASL users made through the real services."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from tests.agents.conftest import agent, bucket_url, cluster  # noqa: F401
from tests.factories import make_cluster
from virtualclusters.security.services import sasl_credential_create

ADMIN_USER, ADMIN_PASSWORD = "admin", "admin-secret-password"


@dataclass
class SecureCluster:
    """A virtual cluster, its agent key and a superuser `admin`; `user()` adds more."""

    cluster: object
    key: str
    passwords: dict[str, str] = field(default_factory=dict)

    def user(self, name: str, password: str | None = None, **flags) -> str:
        """Create a SASL user; returns its password."""
        _, plaintext = sasl_credential_create(
            cluster=self.cluster, username=name, password=password, **flags
        )
        self.passwords[name] = plaintext
        return plaintext

    def set_config(self, **config) -> None:
        from virtualclusters.services import cluster_config_update

        cluster_config_update(cluster=self.cluster, config=config)


def _secure_cluster(name: str, **config) -> SecureCluster:
    created, key = make_cluster(name, auto_create_topics=True, **config)
    secure = SecureCluster(created, key)
    secure.user(ADMIN_USER, ADMIN_PASSWORD, superuser=True)
    return secure


@pytest.fixture
def secure_cluster(transactional_db) -> SecureCluster:
    """A cluster with ACLs off and a superuser `admin`."""
    return _secure_cluster("secure")


@pytest.fixture
def acl_cluster(transactional_db) -> SecureCluster:
    """A cluster with ACLs enforced and a superuser `admin`."""
    return _secure_cluster("acl", acls_enabled=True)


@pytest.fixture
def other_cluster(transactional_db) -> SecureCluster:
    """Another tenant's cluster, with its own `admin`."""
    return _secure_cluster("other")
