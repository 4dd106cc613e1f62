"""KIP-554: SCRAM credentials managed over the Kafka protocol with confluent-kafka's
AdminClient — the same SASL users the console and the REST API manage."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from django.test import Client

from tests.agents.security.clients import confluent_config
from tests.agents.security.conftest import ADMIN_PASSWORD, ADMIN_USER
from tests.factories import make_api_key
from virtualclusters.security.models import SaslCredential

pytestmark = [pytest.mark.kafka, pytest.mark.django_db(transaction=True)]
SASL = ["--require-sasl"]
SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


def _alter(admin: AdminClient, alterations: list) -> dict[str, object]:
    """user → None (done) or the KafkaError code."""
    out = {}
    for user, future in admin.alter_user_scram_credentials(alterations).items():
        try:
            out[user] = future.result(15)
        except Exception as exc:  # noqa: BLE001 — the error is what is checked
            out[user] = exc.args[0].code()
    return out


def _logs_in(bootstrap: str, user: str, password: str, mechanism: str) -> bool:
    producer = Producer(
        {
            **confluent_config(bootstrap, user, password, mechanism=mechanism),
            "message.timeout.ms": 4000,
            "log_level": 0,
        }
    )
    errors: list = []
    producer.produce("logins", value=b"x", on_delivery=lambda e, m: errors.append(e))
    producer.flush(8)
    return [e is None for e in errors] == [True]


def test_scram_users_made_over_kafka_log_in_and_show_in_the_console(agent, secure_cluster):
    a = agent(secure_cluster.key, extra=SASL)
    admin = AdminClient(confluent_config(a.bootstrap, ADMIN_USER, ADMIN_PASSWORD))
    made = _alter(
        admin,
        [UserScramCredentialUpsertion("bob", ScramCredentialInfo(SHA256, 8192), b"bob-password-1")],
    )
    assert made == {"bob": None}
    assert _logs_in(a.bootstrap, "bob", "bob-password-1", "SCRAM-SHA-256")
    assert not _logs_in(a.bootstrap, "bob", "bob-password-1", "SCRAM-SHA-512")  # not given
    assert not _logs_in(a.bootstrap, "bob", "bob-password-1", "PLAIN")  # needs the password
    row = SaslCredential.objects.get(cluster=secure_cluster.cluster, username="bob")
    assert row.scram_sha256["iterations"] == 8192 and not row.scram_sha512 and not row.plain_hash
    key = make_api_key(secure_cluster.cluster.organization)
    listed = Client().get(
        f"/api/v1/clusters/{secure_cluster.cluster.public_id}/sasl-credentials/",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )
    assert listed.status_code == 200, listed.content
    users = listed.json()
    users = users.get("results", users) if isinstance(users, dict) else users
    assert {u["username"]: u["mechanisms"] for u in users} == {
        "admin": ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
        "bob": ["SCRAM-SHA-256"],
    }

    described = admin.describe_user_scram_credentials().result(15)
    assert {
        u: [(i.mechanism, i.iterations) for i in d.scram_credential_infos]
        for u, d in described.items()
    } == {
        "admin": [(SHA256, 8192), (SHA512, 8192)],
        "bob": [(SHA256, 8192)],
    }
    refused = _alter(
        admin,
        [
            UserScramCredentialUpsertion("carol", ScramCredentialInfo(SHA512, 100), b"pw"),
            UserScramCredentialDeletion("nobody", SHA256),
        ],
    )
    assert refused == {
        "carol": KafkaError.UNACCEPTABLE_CREDENTIAL,  # Kafka's 4096..16384 iterations
        "nobody": KafkaError.RESOURCE_NOT_FOUND,
    }
    assert not SaslCredential.objects.filter(username__in=["carol", "nobody"]).exists()

    assert _alter(admin, [UserScramCredentialDeletion("bob", SHA256)]) == {"bob": None}
    assert not SaslCredential.objects.filter(username="bob").exists()  # nothing left of it
    assert not _logs_in(a.bootstrap, "bob", "bob-password-1", "SCRAM-SHA-256")


def test_only_a_principal_that_may_alter_the_cluster_manages_credentials(agent, acl_cluster):
    """ALTER on the cluster is needed (Kafka's rule); mallory may not even change her own."""
    password = acl_cluster.user("mallory")
    before = SaslCredential.objects.get(username="mallory").scram_sha512
    a = agent(acl_cluster.key, extra=SASL)
    mallory = AdminClient(confluent_config(a.bootstrap, "mallory", password))
    upsert = UserScramCredentialUpsertion("mallory", ScramCredentialInfo(SHA512, 4096), b"new")
    assert _alter(mallory, [upsert]) == {"mallory": KafkaError.CLUSTER_AUTHORIZATION_FAILED}
    assert SaslCredential.objects.get(username="mallory").scram_sha512 == before
    # (DescribeUserScramCredentials denied is answered as Kafka answers it, a top-level
    # CLUSTER_AUTHORIZATION_FAILED and no results — which librdkafka 2.16 crashes on.)
