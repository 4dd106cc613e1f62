"""The consumer-group scenario with every common client: three members share six
partitions, a fourth joins, one leaves — each rebalance within the session timeout —
and every record is consumed exactly once."""

from __future__ import annotations

import pytest

from tests.agents.groups.members import (
    AiokafkaMember,
    ConfluentMember,
    KafkaPythonMember,
    run_group_scenario,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka, pytest.mark.timeout(120)]


def create_topic(bootstrap: str, name: str, partitions: int = 6) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def test_confluent_kafka_consumers_share_partitions_and_rebalance(agent, cluster):
    a = agent(cluster.key)
    create_topic(a.bootstrap, "orders")
    result = run_group_scenario(
        a.bootstrap,
        "orders",
        lambda i: ConfluentMember(f"rdk-{i}", a.bootstrap, "billing", "orders"),
    )
    print(result)


def test_kafka_python_consumers_share_partitions_and_rebalance(agent, cluster):
    a = agent(cluster.key)
    create_topic(a.bootstrap, "kp")
    run_group_scenario(
        a.bootstrap, "kp", lambda i: KafkaPythonMember(f"kp-{i}", a.bootstrap, "kp-group", "kp")
    )


def test_aiokafka_consumers_share_partitions_and_rebalance(agent, cluster):
    a = agent(cluster.key)
    create_topic(a.bootstrap, "aio")
    run_group_scenario(
        a.bootstrap, "aio", lambda i: AiokafkaMember(f"aio-{i}", a.bootstrap, "aio-group", "aio")
    )


def test_mixed_clients_share_one_group_with_the_roundrobin_assignor(agent, cluster):
    from aiokafka.coordinator.assignors.roundrobin import (
        RoundRobinPartitionAssignor as AioRoundRobin,
    )
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    a = agent(cluster.key)
    create_topic(a.bootstrap, "mixed")

    def make(i: int):
        kind = ["confluent", "kafka-python", "aiokafka", "confluent"][i]
        name = f"{kind}-{i}"
        if kind == "confluent":
            return ConfluentMember(
                name,
                a.bootstrap,
                "mixed-group",
                "mixed",
                **{"partition.assignment.strategy": "roundrobin"},
            )
        if kind == "kafka-python":
            return KafkaPythonMember(
                name,
                a.bootstrap,
                "mixed-group",
                "mixed",
                partition_assignment_strategy=[RoundRobinPartitionAssignor],
            )
        return AiokafkaMember(
            name, a.bootstrap, "mixed-group", "mixed", partition_assignment_strategy=[AioRoundRobin]
        )

    run_group_scenario(a.bootstrap, "mixed", make)


def test_the_cooperative_sticky_assignor_rebalances_incrementally(agent, cluster):
    a = agent(cluster.key)
    create_topic(a.bootstrap, "coop")
    run_group_scenario(
        a.bootstrap,
        "coop",
        lambda i: ConfluentMember(
            f"coop-{i}",
            a.bootstrap,
            "coop-group",
            "coop",
            **{"partition.assignment.strategy": "cooperative-sticky"},
        ),
        cooperative=True,
    )
