"""Listeners kept apart: in one cluster a plaintext agent, a SASL-only agent and an agent
serving both (`--listener` twice); a client is only ever told addresses of the listener
kind it is connected through — in Metadata, FindCoordinator and DescribeCluster — and
plaintext and SASL clients (confluent-kafka and kafka-python) produce and consume at the
same time, in consumer groups whose coordinator may be an agent they cannot talk to; and
the whole client matrix (aiokafka, kcat, kafkajs, confluent-kafka, kafka-python) passes
for a plaintext and a SASL client running side by side against one cluster."""

from __future__ import annotations

import threading
import time

import pytest

from agents.groups.ring import GROUP_KEY, score
from tests.agents.client_matrix import MATRIX
from tests.agents.clients import Endpoint
from tests.agents.security.clients import confluent_config, kafka_python_config
from tests.agents.security.conftest import (
    ADMIN_PASSWORD,
    ADMIN_USER,
    broker_ports,
    listener_ports,
    wait_for_views,
)
from tests.agents.zone_cluster import metric

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

RECORDS = 30


def group_owned_by(agent_id: str, others: list[str], prefix: str) -> str:
    """A group id whose free lease the rendezvous hash offers to `agent_id`."""
    everyone = [agent_id, *others]
    for n in range(1000):
        group = f"{prefix}-{n}"
        if max(everyone, key=lambda a: score(GROUP_KEY, group, a)) == agent_id:
            return group
    raise AssertionError("no such group id")


def confluent_group_consume(config: dict, topic: str, group: str, count: int, out: list):
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            **config,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 40
        while len(out) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                out.append(message.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def kafka_python_group_consume(config: dict, topic: str, group: str, count: int, out: list):
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        topic,
        **config,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
    )
    try:
        deadline = time.monotonic() + 40
        while len(out) < count and time.monotonic() < deadline:
            for records in consumer.poll(500).values():
                out.extend(r.value for r in records)
        consumer.commit()
    finally:
        consumer.close()


def produce(config: dict, topic: str, tag: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({**config, "linger.ms": 5, "message.timeout.ms": 30000})
    failed = []
    for i in range(RECORDS):
        producer.produce(
            topic, f"{tag}-{i}".encode(), on_delivery=lambda e, m: e and failed.append(e)
        )
    assert producer.flush(30) == 0
    assert not failed, failed[:3]


def coordinator_port(config: dict, group: str) -> int:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(config)
    described = admin.describe_consumer_groups([group], request_timeout=10)[group].result(15)
    return described.coordinator.port


def test_each_client_sees_only_agents_of_its_listener_kind(agent, secure_cluster):
    password = secure_cluster.user("alice")
    plain = agent(secure_cluster.key)
    sasl = agent(secure_cluster.key, extra=["--require-sasl"])
    both = agent(
        secure_cluster.key,
        extra=[
            "--listener",
            "PLAINTEXT://127.0.0.1:0",
            "--listener",
            "SASL_PLAINTEXT://127.0.0.1:0",
        ],
    )
    both_ports = listener_ports(both)
    assert both.port == both_ports["PLAINTEXT"]  # the first listener is the primary
    plain_ports = {plain.port, both_ports["PLAINTEXT"]}
    sasl_ports = {sasl.port, both_ports["SASL_PLAINTEXT"]}

    def plain_config(bootstrap: str) -> dict:
        return {"bootstrap.servers": bootstrap, "client.id": "plain"}

    def sasl_config(bootstrap: str) -> dict:
        return confluent_config(bootstrap, "alice", password, **{"client.id": "sasl"})

    wait_for_views(
        {
            "plain via plain": (plain_config(plain.bootstrap), plain_ports),
            "plain via both": (plain_config(f"127.0.0.1:{both_ports['PLAINTEXT']}"), plain_ports),
            "sasl via sasl": (sasl_config(sasl.bootstrap), sasl_ports),
            "sasl via both": (sasl_config(f"127.0.0.1:{both_ports['SASL_PLAINTEXT']}"), sasl_ports),
        }
    )

    # DescribeCluster (KIP-700) agrees with Metadata.
    from confluent_kafka.admin import AdminClient

    for config, expected in (
        (plain_config(plain.bootstrap), plain_ports),
        (sasl_config(sasl.bootstrap), sasl_ports),
    ):
        admin = AdminClient(config)  # kept: a collected client fails its futures
        described = admin.describe_cluster(request_timeout=10).result(15)
        assert {node.port for node in described.nodes} == expected

    # Groups whose coordinator (the lease holder) is an agent the client cannot talk to:
    # the SASL-only agent for plaintext clients, the plaintext one for SASL clients.
    ids = [plain.agent_id, sasl.agent_id, both.agent_id]
    plain_group = group_owned_by(sasl.agent_id, [plain.agent_id, both.agent_id], "pg")
    sasl_group = group_owned_by(plain.agent_id, [sasl.agent_id, both.agent_id], "sg")
    assert len(set(ids)) == 3

    # Both kinds at once: producers then consumers of each kind, concurrently.
    kp_sasl = kafka_python_config(sasl.bootstrap, "alice", password)
    kp_plain = {"bootstrap_servers": plain.bootstrap, "request_timeout_ms": 10_000}
    got: dict[str, list] = {"plain": [], "sasl": [], "kp-plain": [], "kp-sasl": []}
    errors: list[BaseException] = []

    def run(target, *args) -> threading.Thread:
        def body():
            try:
                target(*args)
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)

        thread = threading.Thread(target=body, daemon=True)
        thread.start()
        return thread

    threads = [
        run(produce, plain_config(plain.bootstrap), "lt-plain", "p"),
        run(produce, sasl_config(sasl.bootstrap), "lt-sasl", "s"),
    ]
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    threads = [
        run(
            confluent_group_consume,
            plain_config(plain.bootstrap),
            "lt-sasl",
            plain_group,
            RECORDS,
            got["plain"],
        ),
        run(
            confluent_group_consume,
            sasl_config(sasl.bootstrap),
            "lt-plain",
            sasl_group,
            RECORDS,
            got["sasl"],
        ),
        run(
            kafka_python_group_consume,
            kp_plain,
            "lt-plain",
            plain_group + "-kp",
            RECORDS,
            got["kp-plain"],
        ),
        run(
            kafka_python_group_consume,
            kp_sasl,
            "lt-sasl",
            sasl_group + "-kp",
            RECORDS,
            got["kp-sasl"],
        ),
    ]
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    assert sorted(got["plain"]) == sorted(f"s-{i}".encode() for i in range(RECORDS))
    assert sorted(got["sasl"]) == sorted(f"p-{i}".encode() for i in range(RECORDS))
    assert sorted(got["kp-plain"]) == sorted(f"p-{i}".encode() for i in range(RECORDS))
    assert sorted(got["kp-sasl"]) == sorted(f"s-{i}".encode() for i in range(RECORDS))

    # FindCoordinator named an agent of the client's kind, though the group's lease went
    # to one of the other kind (its front relayed).
    assert coordinator_port(plain_config(plain.bootstrap), plain_group) in plain_ports
    assert coordinator_port(sasl_config(sasl.bootstrap), sasl_group) in sasl_ports
    assert sum(metric(a, "floe_group_relays_total", outcome="ok") for a in (plain, sasl, both))
    # …and the views never mixed.
    assert broker_ports(plain_config(plain.bootstrap)) == plain_ports
    assert broker_ports(sasl_config(sasl.bootstrap)) == sasl_ports


def run_matrix_side_by_side(endpoints: list[Endpoint]) -> dict[str, dict[str, tuple]]:
    """Every check of the client matrix for each endpoint, one thread per endpoint, the
    threads meeting at a barrier before each check so the same check runs for every
    endpoint at once. Returns {check: {kind: (start, end)}}; raises the first failure."""
    barrier = threading.Barrier(len(endpoints), timeout=120)
    spans: dict[str, dict[str, tuple]] = {name: {} for name in MATRIX}
    errors: list[tuple[str, str, BaseException]] = []

    def body(endpoint: Endpoint) -> None:
        for name, check in MATRIX.items():
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                return  # another endpoint failed: its error is the one reported
            start = time.monotonic()
            try:
                check(endpoint, f"{endpoint.kind}-")
            except BaseException as exc:  # reported by the main thread
                errors.append((endpoint.kind, name, exc))
                barrier.abort()
                return
            spans[name][endpoint.kind] = (start, time.monotonic())

    threads = [threading.Thread(target=body, args=(e,), daemon=True) for e in endpoints]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert not any(thread.is_alive() for thread in threads), "the matrix did not finish"
    if errors:
        kind, name, exc = errors[0]
        raise AssertionError(f"{name} failed for the {kind} client: {exc!r}") from exc
    return spans


def test_plaintext_and_sasl_clients_pass_the_client_matrix_at_the_same_time(agent, secure_cluster):
    plain = agent(secure_cluster.key)
    sasl = agent(secure_cluster.key, extra=["--require-sasl"])
    endpoints = [Endpoint(plain.bootstrap), Endpoint(sasl.bootstrap, ADMIN_USER, ADMIN_PASSWORD)]
    wait_for_views(
        {e.kind: (e.confluent(), {int(e.bootstrap.rsplit(":", 1)[1])}) for e in endpoints}
    )
    spans = run_matrix_side_by_side(endpoints)
    for name, by_kind in spans.items():  # every check ran for both, overlapping in time
        (p_start, p_end), (s_start, s_end) = by_kind["plaintext"], by_kind["sasl"]
        assert p_start < s_end and s_start < p_end, name
    # Each client still sees only its own listener kind.
    assert broker_ports(endpoints[0].confluent()) == {plain.port}
    assert broker_ports(endpoints[1].confluent()) == {sasl.port}
