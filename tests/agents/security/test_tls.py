"""TLS on the Kafka listener: SSL, SASL_SSL and mutual TLS with the certificate's subject
as the principal, against a CA made by the test."""

from __future__ import annotations

import socket
import ssl
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

from tests.agents.security.certificates import TestCA
from tests.agents.security.clients import confluent_config
from virtualclusters.security.services import acl_binding, acl_create

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]


@pytest.fixture
def ca(tmp_path) -> TestCA:
    folder = tmp_path / "pki"
    folder.mkdir()
    return TestCA(folder)


def tls_flags(ca: TestCA, *, client_ca: bool = False) -> list[str]:
    cert, key = ca.issue("agent", server=True)
    flags = ["--tls-cert", cert, "--tls-key", key]
    return flags + (["--tls-client-ca", str(ca.cert_path)] if client_ca else [])


def round_trip(config: dict, topic: str, count: int = 3) -> list[bytes]:
    producer = Producer({**config, "linger.ms": 5, "message.timeout.ms": 20000})
    for i in range(count):
        producer.produce(topic, value=b"tls-%d" % i, partition=0)
    assert producer.flush(20) == 0
    consumer = Consumer({**config, "group.id": "tls", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values = []
    deadline = time.monotonic() + 20
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None:
                assert not message.error(), message.error()
                values.append(message.value())
    finally:
        consumer.close()
    return values


def test_a_tls_round_trip_with_a_ca_made_by_the_test(agent, secure_cluster, ca):
    a = agent(secure_cluster.key, extra=tls_flags(ca))
    config = confluent_config(a.bootstrap, tls_ca=str(ca.cert_path))
    assert config["security.protocol"] == "SSL"
    assert round_trip(config, "over-tls") == [b"tls-0", b"tls-1", b"tls-2"]

    # kafka-python too, checking the certificate against the same CA.
    producer = KafkaProducer(
        bootstrap_servers=a.bootstrap, security_protocol="SSL", ssl_cafile=str(ca.cert_path)
    )
    producer.send("over-tls", b"kp", partition=0).get(10)
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=a.bootstrap,
        security_protocol="SSL",
        ssl_cafile=str(ca.cert_path),
        enable_auto_commit=False,
    )
    consumer.assign([KpTopicPartition("over-tls", 0)])
    consumer.seek(KpTopicPartition("over-tls", 0), 3)
    got = []
    deadline = time.monotonic() + 15
    while not got and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            got += [r.value for r in records]
    consumer.close()
    assert got == [b"kp"]
    assert "security protocol: SSL" in a.logs()


def test_plaintext_and_untrusting_clients_are_refused_and_the_agent_carries_on(
    agent, secure_cluster, ca, tmp_path
):
    a = agent(secure_cluster.key, extra=tls_flags(ca))
    with socket.create_connection((a.host, a.port), timeout=5) as plain:
        plain.sendall(b"\x00\x00\x00\x0a" + b"\x00\x12\x00\x00\x00\x00\x00\x01\xff\xff")
        plain.settimeout(5)
        try:
            answer = plain.recv(100)
        except ConnectionResetError:
            answer = b""
        assert not answer.startswith(b"\x00\x00\x00"), "no Kafka answer over plaintext"
    other = TestCA(tmp_path, "Someone Else")
    errors: list[KafkaError] = []
    stranger = AdminClient(
        confluent_config(
            a.bootstrap, tls_ca=str(other.cert_path), error_cb=errors.append, log_level=0
        )
    )
    with pytest.raises(KafkaException):
        stranger.list_topics(timeout=3)
    config = confluent_config(a.bootstrap, tls_ca=str(ca.cert_path))
    assert round_trip(config, "still-fine", 1) == [b"tls-0"]


def test_sasl_ssl_logs_in_over_tls(agent, secure_cluster, ca):
    password = secure_cluster.user("alice")
    a = agent(secure_cluster.key, extra=["--require-sasl", *tls_flags(ca)])
    config = confluent_config(a.bootstrap, "alice", password, tls_ca=str(ca.cert_path))
    assert config["security.protocol"] == "SASL_SSL"
    assert round_trip(config, "sasl-ssl") == [b"tls-0", b"tls-1", b"tls-2"]
    assert "authenticated as User:alice" in a.logs()


def test_mutual_tls_makes_the_certificate_subject_the_principal(agent, acl_cluster, ca):
    a = agent(acl_cluster.key, extra=tls_flags(ca, client_ca=True))
    acl_create(
        cluster=acl_cluster.cluster,
        binding=acl_binding(
            {
                "resource_type": "topic",
                "resource_name": "*",
                "principal": "User:CN=alice,O=Floe",
                "operation": "all",
            }
        ),
    )
    acl_create(
        cluster=acl_cluster.cluster,
        binding=acl_binding(
            {
                "resource_type": "group",
                "resource_name": "*",
                "principal": "User:*",
                "operation": "read",
            }
        ),
    )

    def client(name: str) -> dict:
        cert, key = ca.issue(name, organization="Floe")
        return {
            **confluent_config(a.bootstrap, tls_ca=str(ca.cert_path)),
            "ssl.certificate.location": cert,
            "ssl.key.location": key,
        }

    assert round_trip(client("alice"), "mtls") == [b"tls-0", b"tls-1", b"tls-2"]

    errors: list = []
    producer = Producer({**client("bob"), "message.timeout.ms": 5000, "log_level": 0})
    producer.produce("mtls", b"no", partition=0, on_delivery=lambda e, m: errors.append(e))
    producer.flush(10)
    assert len(errors) == 1 and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # No client certificate: the TLS handshake itself fails.
    context = ssl.create_default_context(cafile=str(ca.cert_path))
    with socket.create_connection((a.host, a.port), timeout=5) as raw:
        with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)):
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(b"\x00\x00\x00\x0a" + b"\x00\x12\x00\x00\x00\x00\x00\x01\xff\xff")
                if not tls.recv(4):
                    raise ConnectionResetError("closed")
