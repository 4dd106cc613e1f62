"""SASL PLAIN and SCRAM against agents started with --require-sasl, with real clients."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.errors import KafkaError as KpKafkaError

from tests.agents.security.clients import confluent_config, kafka_python_config

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]
SASL = ["--require-sasl"]


def confluent_round_trip(bootstrap: str, user: str, password: str, mechanism: str, topic: str):
    """Produce three messages and read them back, both as `user`."""
    config = confluent_config(bootstrap, user, password, mechanism=mechanism)
    producer = Producer({**config, "linger.ms": 5, "message.timeout.ms": 20000})
    delivered = []
    for i in range(3):
        producer.produce(
            topic, value=f"{mechanism}-{i}".encode(), on_delivery=lambda e, m: delivered.append(e)
        )
    assert producer.flush(20) == 0
    assert delivered == [None, None, None]

    consumer = Consumer(
        {**config, "group.id": "unused", "enable.auto.commit": False, "fetch.wait.max.ms": 100}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values = []
    deadline = time.monotonic() + 20
    try:
        while len(values) < 3 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            assert not message.error(), message.error()
            values.append(message.value())
    finally:
        consumer.close()
    return values


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"])
def test_confluent_kafka_logs_in_and_round_trips(agent, secure_cluster, mechanism):
    password = secure_cluster.user("alice")
    a = agent(secure_cluster.key, extra=SASL)
    topic = f"t-{mechanism.lower()}"
    values = confluent_round_trip(a.bootstrap, "alice", password, mechanism, topic)
    assert values == [f"{mechanism}-{i}".encode() for i in range(3)]
    assert "authenticated as User:alice with " + mechanism in a.logs()


def _authentication_error(bootstrap: str, user: str, password: str, mechanism: str) -> KafkaError:
    """The error librdkafka reports when `user`/`password` cannot log in."""
    errors: list[KafkaError] = []
    admin = AdminClient(
        confluent_config(
            bootstrap, user, password, mechanism=mechanism, error_cb=errors.append, log_level=0
        )
    )
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)
    admin.poll(1)  # error_cb runs from poll()
    auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert auth, errors
    return auth[0]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_confluent_kafka_is_refused_with_a_wrong_password(agent, secure_cluster, mechanism):
    secure_cluster.user("alice", "the-right-password")
    a = agent(secure_cluster.key, extra=SASL)
    error = _authentication_error(a.bootstrap, "alice", "a-wrong-password", mechanism)
    assert "invalid credentials" in error.str()
    error = _authentication_error(a.bootstrap, "mallory", "the-right-password", mechanism)
    assert "invalid credentials" in error.str()
    assert "SASL authentication failed" in a.logs()


def test_a_credential_of_another_cluster_is_refused(agent, secure_cluster, other_cluster):
    password = secure_cluster.user("alice")
    other_cluster.user("alice", "bobs-alice-has-another-password")
    a = agent(secure_cluster.key, extra=SASL)
    b = agent(other_cluster.key, extra=SASL)
    assert confluent_round_trip(a.bootstrap, "alice", password, "SCRAM-SHA-512", "mine")
    for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"):
        _authentication_error(b.bootstrap, "alice", password, mechanism)
    # …and the other cluster's own superuser cannot log in to the first one either.
    _authentication_error(a.bootstrap, "admin", "admin-secret-password-of-other", "PLAIN")


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_kafka_python_logs_in_and_round_trips(agent, secure_cluster, mechanism):
    password = secure_cluster.user("carol")
    a = agent(secure_cluster.key, extra=SASL)
    config = kafka_python_config(a.bootstrap, "carol", password, mechanism=mechanism)
    producer = KafkaProducer(**config, linger_ms=5, acks="all")
    try:
        sent = [producer.send("kp", value=b"m%d" % i, partition=0) for i in range(5)]
        producer.flush(20)
        assert [f.get(10).offset for f in sent] == list(range(5))
    finally:
        producer.close()

    consumer = KafkaConsumer(**config, enable_auto_commit=False, fetch_max_wait_ms=100)
    try:
        consumer.assign([KpTopicPartition("kp", 0)])
        consumer.seek_to_beginning()
        received = []
        deadline = time.monotonic() + 20
        while len(received) < 5 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                received.extend(r.value for r in records)
    finally:
        consumer.close()
    assert received == [b"m%d" % i for i in range(5)]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_kafka_python_is_refused_with_a_wrong_password(agent, secure_cluster, mechanism, caplog):
    secure_cluster.user("carol", "the-right-password")
    a = agent(secure_cluster.key, extra=SASL)
    config = kafka_python_config(a.bootstrap, "carol", "a-wrong-password", mechanism=mechanism)
    started = time.monotonic()
    # api_version given: the client does not probe the broker in its constructor, and
    # send() gives up after max_block_ms.
    producer = KafkaProducer(**config, api_version=(3, 3), max_block_ms=3000)
    try:
        with pytest.raises(KpKafkaError):
            producer.send("kp", b"never").get(5)
    finally:
        producer.close(timeout=1)
    assert time.monotonic() - started < 20
    assert "SaslAuthenticationFailedError" in caplog.text
    assert "invalid credentials with SASL mechanism " + mechanism in caplog.text
