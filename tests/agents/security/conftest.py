"""Security tests drive real agents through the fixtures of tests/agent, plus clusters with
SASL users made through the real services."""

from __future__ import annotations

import re
import time
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


# --- listeners: which ports an agent bound, which ones a client is shown --------------

_LISTENER_LINE = re.compile(r"Kafka listener (\w+) on [^:]+:(\d+), advertised")


def listener_ports(process) -> dict[str, int]:
    """Each listener's bound port, from the agent process's log."""
    return {name: int(port) for name, port in _LISTENER_LINE.findall(process.logs())}


def broker_ports(config: dict) -> set[int]:
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient(config).list_topics(timeout=10)
    return {b.port for b in metadata.brokers.values()}


def wait_for_views(views: dict[str, tuple[dict, set[int]]], timeout_s: float = 30.0) -> None:
    """Until every client config's Metadata lists exactly its expected ports."""
    deadline = time.monotonic() + timeout_s
    while True:
        seen = {name: broker_ports(config) for name, (config, _) in views.items()}
        if all(seen[name] == expected for name, (_, expected) in views.items()):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"views did not settle: {seen}")
        time.sleep(0.5)
