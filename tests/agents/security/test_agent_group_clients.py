"""Agent groups seen through kafka-python and kcat, with a SASL-only agent beside the
plaintext ones: one cluster, an `east` group of two plaintext agents and a `west` group
of a plaintext agent, an agent serving both listener kinds and a SASL-only agent. Each
client — kafka-python and kcat (librdkafka 2.0), plaintext in each group and SASL in
west — is told only its group's agents of its listener kind in every Metadata and
FindCoordinator answer it gets (recorded from kafka-python's cluster listeners and log,
and from kcat's `-d metadata,cgrp` debug lines), and produces to and consumes every
topic, those created through the other group and the other listener kind too.
(confluent-kafka, aiokafka and kafkajs: tests/agents/test_agent_groups.py.)"""

from __future__ import annotations

import contextlib
import logging
import re
import subprocess
import time
from dataclasses import dataclass, field

import pytest

from tests.agents.clients import Endpoint
from tests.agents.security.conftest import (
    ADMIN_PASSWORD,
    ADMIN_USER,
    listener_ports,
    wait_for_views,
)

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

RECORDS = 10
TOPICS = ("made-in-east", "made-in-west", "made-over-sasl")
# librdkafka's debug lines: every broker of a Metadata answer, and a group's coordinator.
_KCAT_BROKER = re.compile(r"Broker #(\d+)/(\d+): [^:\s]+:(\d+) NodeId")
_KCAT_COORDINATOR = re.compile(r'Group "[^"]+" coordinator is [^:\s]+:(\d+) id')


@dataclass
class Answers:
    """The broker ports of every Metadata answer and the coordinator port of every
    FindCoordinator answer one client received."""

    metadata: list[set[int]] = field(default_factory=list)
    coordinators: list[int] = field(default_factory=list)

    def assert_only(self, ports: set[int], client: str) -> None:
        assert self.metadata, f"{client}: no Metadata answer recorded"
        assert self.coordinators, f"{client}: no FindCoordinator answer recorded"
        assert all(seen == ports for seen in self.metadata), (client, ports, self.metadata)
        assert set(self.coordinators) <= ports, (client, ports, self.coordinators)


class _CoordinatorLog(logging.Handler):
    """kafka-python logs each FindCoordinator answer it accepts ("Coordinator for
    GROUP/<id> is <broker>", kafka.cluster at INFO); the broker is the log call's
    last argument."""

    def __init__(self, answers: Answers) -> None:
        super().__init__(logging.INFO)
        self.answers = answers

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg.startswith("Coordinator for") and record.args:
            self.answers.coordinators.append(record.args[-1].port)  # type: ignore[index]


@contextlib.contextmanager
def _recording(answers: Answers):
    """kafka-python's FindCoordinator answers recorded while in the block."""
    cluster_log = logging.getLogger("kafka.cluster")
    handler, level = _CoordinatorLog(answers), cluster_log.level
    cluster_log.addHandler(handler)
    cluster_log.setLevel(logging.INFO)
    try:
        yield
    finally:
        cluster_log.removeHandler(handler)
        cluster_log.setLevel(level)


def kafka_python_produce(endpoint: Endpoint, name: str, answers: Answers) -> None:
    """kafka-python produces RECORDS to every topic; every Metadata answer is recorded."""
    from kafka import KafkaProducer

    def record_metadata(cluster) -> None:
        answers.metadata.append({b.port for b in cluster.brokers()})

    with _recording(answers):
        producer = KafkaProducer(**endpoint.python(), acks="all", request_timeout_ms=10_000)
        producer._metadata.add_listener(record_metadata)
        try:
            futures = [
                producer.send(topic, f"{name}-{topic}-{i}".encode())
                for topic in TOPICS
                for i in range(RECORDS)
            ]
            producer.flush(30)
            for future in futures:
                future.get(10)
        finally:
            producer.close(10)


def kafka_python_consume(endpoint: Endpoint, name: str, answers: Answers) -> list[bytes]:
    """A kafka-python consumer group of one reads every topic from the start; every
    Metadata and FindCoordinator answer is recorded."""
    from kafka import KafkaConsumer

    def record_metadata(cluster) -> None:
        answers.metadata.append({b.port for b in cluster.brokers()})

    with _recording(answers):
        consumer = KafkaConsumer(
            **endpoint.python(),
            group_id=f"kp-{name}",
            auto_offset_reset="earliest",
            fetch_max_wait_ms=100,
            request_timeout_ms=10_000,
        )
        consumer._client.cluster.add_listener(record_metadata)
        got: list[bytes] = []
        try:
            consumer.subscribe(list(TOPICS))
            deadline = time.monotonic() + 40
            while len(got) < EXPECTED and time.monotonic() < deadline:
                for batch in consumer.poll(500).values():
                    got.extend(r.value for r in batch)
            consumer.commit()
        finally:
            consumer.close()
    return got


def _kcat_answers(stderr: str, answers: Answers) -> None:
    """The answers in kcat's debug lines: a Metadata answer's brokers come one per line,
    numbered `#i/n`. An answer is read by that numbering, not by the lines between two
    requests: librdkafka's threads log a request in the middle of another answer's lines."""
    ports: set[int] = set()
    for index, count, port in _KCAT_BROKER.findall(stderr):
        if index == "0":
            ports = set()
        ports.add(int(port))
        if int(index) == int(count) - 1:
            answers.metadata.append(ports)
            ports = set()
    answers.coordinators.extend(int(p) for p in _KCAT_COORDINATOR.findall(stderr))


def kcat_produce(endpoint: Endpoint, name: str, answers: Answers) -> None:
    """kcat produces RECORDS lines to every topic."""
    for topic in TOPICS:
        lines = "".join(f"{name}-{topic}-{i}\n" for i in range(RECORDS))
        done = subprocess.run(
            ["kcat", *endpoint.kcat(), "-d", "metadata", "-t", topic, "-P"],
            input=lines,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        _kcat_answers(done.stderr, answers)


def kcat_consume(endpoint: Endpoint, name: str, answers: Answers) -> list[bytes]:
    """kcat reads every topic in a consumer group (`-G`) until it has them all."""
    done = subprocess.run(
        ["kcat", *endpoint.kcat(), "-d", "metadata,cgrp", "-X", "auto.offset.reset=earliest"]
        + ["-G", f"kcat-{name}", *TOPICS, "-c", str(EXPECTED), "-f", "%s\n", "-q"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    _kcat_answers(done.stderr, answers)
    assert done.returncode == 0, done.stderr[-3000:]
    return [line.encode() for line in done.stdout.split()]


CLIENTS = {
    "kafka-python": (kafka_python_produce, kafka_python_consume),
    "kcat": (kcat_produce, kcat_consume),
}
ENDPOINTS = ("east", "west", "west-sasl")
EXPECTED = len(CLIENTS) * len(ENDPOINTS) * len(TOPICS) * RECORDS


def test_kafka_python_and_kcat_of_each_group_and_listener_see_only_theirs(agent, secure_cluster):
    from confluent_kafka.admin import AdminClient, NewTopic

    key = secure_cluster.key
    both = ["--listener", "PLAINTEXT://127.0.0.1:0", "--listener", "SASL_PLAINTEXT://127.0.0.1:0"]
    starting = {
        "east-1": agent(key, extra=["--agent-group", "east"], wait=False),
        "east-2": agent(key, extra=["--agent-group", "east"], wait=False),
        "west-plain": agent(key, extra=["--agent-group", "west"], wait=False),
        "west-both": agent(key, extra=["--agent-group", "west", *both], wait=False),
        "west-sasl": agent(key, extra=["--agent-group", "west", "--require-sasl"], wait=False),
    }
    for process in starting.values():
        process.wait_ready()
    dual = listener_ports(starting["west-both"])
    views = {
        "east": {starting["east-1"].port, starting["east-2"].port},
        "west": {starting["west-plain"].port, dual["PLAINTEXT"]},
        "west-sasl": {starting["west-sasl"].port, dual["SASL_PLAINTEXT"]},
    }
    endpoints = {
        "east": Endpoint(starting["east-2"].bootstrap),
        "west": Endpoint(starting["west-plain"].bootstrap),
        "west-sasl": Endpoint(starting["west-sasl"].bootstrap, ADMIN_USER, ADMIN_PASSWORD),
    }
    wait_for_views(
        {
            **{name: (e.confluent(), views[name]) for name, e in endpoints.items()},
            "west via the dual agent": (
                Endpoint(f"127.0.0.1:{dual['PLAINTEXT']}").confluent(),
                views["west"],
            ),
            "west-sasl via the dual agent": (
                Endpoint(
                    f"127.0.0.1:{dual['SASL_PLAINTEXT']}", ADMIN_USER, ADMIN_PASSWORD
                ).confluent(),
                views["west-sasl"],
            ),
        }
    )

    # Each topic made through one group or listener kind; every client uses all three.
    for topic, endpoint in zip(TOPICS, endpoints.values(), strict=True):
        admin = AdminClient(endpoint.confluent())
        admin.create_topics([NewTopic(topic, 3)])[topic].result(30)

    runs = [(client, name) for client in CLIENTS for name in ENDPOINTS]
    answers = {run: Answers() for run in runs}
    for client, name in runs:
        CLIENTS[client][0](endpoints[name], f"{client}-{name}", answers[client, name])
    produced = sorted(
        f"{client}-{name}-{topic}-{i}".encode()
        for client, name in runs
        for topic in TOPICS
        for i in range(RECORDS)
    )
    for client, name in runs:
        got = CLIENTS[client][1](endpoints[name], f"{client}-{name}", answers[client, name])
        assert sorted(got) == produced, (client, name, len(got))
    for (client, name), seen in answers.items():
        seen.assert_only(views[name], f"{client} of {name}")
