"""Group administration through Kafka admin clients (librdkafka's AdminClient and
kafka-python's KafkaAdminClient) and through the REST API, against a live agent."""

from __future__ import annotations

import pytest

from tests import factories
from tests.agents.groups.members import ConfluentMember, balanced, wait_until
from tests.agents.groups.test_clients import create_topic
from tests.agents.zone_cluster import broker_ports

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka, pytest.mark.timeout(120)]


def produce(bootstrap: str, topic: str, n: int, partitions: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        producer.produce(topic, value=b"v%d" % i, partition=i % partitions)
    assert producer.flush(30) == 0


def test_confluent_admin_lists_describes_alters_and_deletes_groups(agent, cluster):
    from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    a = agent(cluster.key)
    create_topic(a.bootstrap, "ledger", 3)
    produce(a.bootstrap, "ledger", 30, 3)
    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    members = [ConfluentMember(f"ledger-{i}", a.bootstrap, "auditors", "ledger") for i in range(2)]
    for m in members:
        m.start()
    try:
        wait_until(lambda: balanced(members, 3), 30, "two members share three partitions")
        wait_until(lambda: sum(len(m.records) for m in members) == 30, 20, "all read")

        listed = admin.list_consumer_groups().result(15)
        assert {g.group_id: g.state for g in listed.valid} == {
            "auditors": ConsumerGroupState.STABLE
        }
        described = admin.describe_consumer_groups(["auditors"])["auditors"].result(15)
        assert described.state == ConsumerGroupState.STABLE
        assert described.partition_assignor == "range"
        assert described.coordinator.port == a.port
        held = sorted(
            tp.partition
            for member in described.members
            for tp in member.assignment.topic_partitions
        )
        assert held == [0, 1, 2]
        assert {member.client_id for member in described.members} == {"ledger-0", "ledger-1"}

        with pytest.raises(Exception, match="NON_EMPTY_GROUP"):
            admin.delete_consumer_groups(["auditors"])["auditors"].result(15)
        # A live member's commits carry its generation; a generation-less one is refused.
        refused = admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions("auditors", [TopicPartition("ledger", 0, 1)])]
        )["auditors"]
        try:
            errors = [tp.error for tp in refused.result(15).topic_partitions]
        except Exception as exc:  # librdkafka versions differ in how they surface it
            errors = [exc]
        assert "UNKNOWN_MEMBER_ID" in repr(errors)
    finally:
        for m in members:
            m.stop()

    committed = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("auditors", [TopicPartition("ledger", p) for p in range(3)])]
    )["auditors"].result(15)
    assert [tp.offset for tp in committed.topic_partitions] == [10, 10, 10]

    # Once Empty, offsets may be set from outside (kafka-consumer-groups --reset-offsets).
    admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("auditors", [TopicPartition("ledger", 0, 3)])]
    )["auditors"].result(15)
    reset = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("auditors")])[
        "auditors"
    ].result(15)
    assert {tp.partition: tp.offset for tp in reset.topic_partitions} == {0: 3, 1: 10, 2: 10}
    empty = admin.describe_consumer_groups(["auditors"])["auditors"].result(15)
    assert empty.state == ConsumerGroupState.EMPTY and not empty.members

    admin.delete_consumer_groups(["auditors"])["auditors"].result(15)
    assert admin.list_consumer_groups().result(15).valid == []
    gone = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("auditors", [TopicPartition("ledger", 0)])]
    )["auditors"].result(15)
    assert gone.topic_partitions[0].offset < 0
    with pytest.raises(Exception, match="GROUP_ID_NOT_FOUND"):
        admin.delete_consumer_groups(["auditors"])["auditors"].result(15)


def test_kafka_python_admin_manages_offsets_members_and_groups(agent, cluster):
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.admin import MemberToRemove
    from kafka.structs import OffsetAndMetadata

    a = agent(cluster.key)
    create_topic(a.bootstrap, "stock", 2)
    produce(a.bootstrap, "stock", 20, 2)
    admin = KafkaAdminClient(bootstrap_servers=a.bootstrap, request_timeout_ms=15000)
    stock0, stock1 = TopicPartition("stock", 0), TopicPartition("stock", 1)

    def error_names(results: dict) -> list[str]:
        return [error.__name__ for error in results.values()]

    static = ConfluentMember(
        "static-0", a.bootstrap, "warehouse", "stock", **{"group.instance.id": "pod-0"}
    )
    static.start()
    try:
        wait_until(lambda: balanced([static], 2), 30, "the static member holds both partitions")
        wait_until(lambda: len(static.records) == 20, 20, "all read")
        # A simple (assign-only) group commits offsets without joining.
        altered = admin.alter_group_offsets("simple", {stock0: OffsetAndMetadata(7, "note", -1)})
        assert error_names(altered) == ["NoError"]
        assert {g["group_id"] for g in admin.list_groups()} == {"warehouse", "simple"}
        described = admin.describe_groups(["warehouse"])["warehouse"]
        assert described["group_state"] == "Stable"
        assert [m["group_instance_id"] for m in described["members"]] == ["pod-0"]

        # Both groups' offsets in one OffsetFetch (v8, KIP-709).
        offsets = admin.list_group_offsets({"warehouse": None, "simple": None})
        assert (offsets["simple"][stock0].offset, offsets["simple"][stock0].metadata) == (7, "note")
        assert {tp.partition: o.offset for tp, o in offsets["warehouse"].items()} == {0: 10, 1: 10}

        # KIP-496: offsets of a topic the live group subscribes to stay.
        refused = admin.delete_group_offsets("warehouse", [stock0])
        assert error_names(refused) == ["GroupSubscribedToTopicError"]

    finally:
        static.stop()
    # A static member does not leave when it closes (KIP-345): it keeps its place for a
    # restart until its session expires — or an operator removes it by instance id.
    assert admin.describe_groups(["warehouse"])["warehouse"]["group_state"] == "Stable"
    removed = admin.remove_group_members("warehouse", [MemberToRemove(group_instance_id="pod-0")])
    assert error_names(removed) == ["NoError"]
    assert admin.describe_groups(["warehouse"])["warehouse"]["group_state"] == "Empty"

    assert error_names(admin.delete_group_offsets("warehouse", [stock0])) == ["NoError"]
    assert set(admin.list_group_offsets({"warehouse": None})["warehouse"]) == {stock1}

    results = dict(admin.delete_groups(["warehouse", "simple", "never-existed"]))
    assert results == {
        "warehouse": "OK",
        "simple": "OK",
        "never-existed": "GroupIdNotFoundError",
    }
    assert admin.list_groups() == []
    admin.close()


def test_the_rest_api_shows_members_assignments_and_lag_then_deletes(agent, cluster, client):

    a = agent(cluster.key)
    create_topic(a.bootstrap, "events", 2)
    produce(a.bootstrap, "events", 40, 2)
    org = cluster.cluster.organization
    admin_key = factories.make_api_key(org)
    reader_key = factories.make_api_key(org, role="member")
    url = f"/api/v1/clusters/{cluster.public_id}/groups/"

    def get(path: str, key: str = admin_key):
        return client.get(path, HTTP_AUTHORIZATION=f"Bearer {key}")

    member = ConfluentMember("events-0", a.bootstrap, "indexer", "events")
    member.start()
    try:
        wait_until(lambda: balanced([member], 2), 30, "the member holds both partitions")
        wait_until(lambda: len(member.records) == 40, 20, "all read")
        # Reports go out every 3 s and on changes: one may show the member still joining
        # (PreparingRebalance); the next shows the group Stable.
        wait_until(
            lambda: (g := get(url).json()[0])["members"] and g["state"] == "Stable",
            10,
            "the agent reports the member in a Stable group",
        )
        [live] = get(url).json()
        assert live["state"] == "Stable" and live["protocol"] == "range"
        assert [m["client_id"] for m in live["members"]] == ["events-0"]
        assert live["members"][0]["assignment"] == [{"topic": "events", "partitions": [0, 1]}]
        assert {p["client_id"] for p in live["partitions"]} == {"events-0"}
        assert (
            client.delete(url + "indexer/", HTTP_AUTHORIZATION=f"Bearer {admin_key}").status_code
            == 409
        )
    finally:
        member.stop()
    produce(a.bootstrap, "events", 10, 2)  # written after the group stopped reading: lag

    wait_until(lambda: get(url).json()[0]["state"] == "Empty", 10, "the group is reported Empty")
    [group] = get(url).json()
    assert group["group_id"] == "indexer" and group["protocol_type"] == "consumer"
    assert [
        (p["topic"], p["partition"], p["committed_offset"], p["high_watermark"], p["lag"])
        for p in group["partitions"]
    ] == [("events", 0, 20, 25, 5), ("events", 1, 20, 25, 5)]
    assert all(p["lag_seconds"] is not None and p["lag_seconds"] >= 0 for p in group["partitions"])
    assert group["total_lag"] == 10

    detail = get(url + "indexer/").json()
    assert detail["total_lag"] == 10
    assert (
        client.delete(url + "indexer/", HTTP_AUTHORIZATION=f"Bearer {reader_key}").status_code
        == 403
    )
    assert (
        client.delete(url + "indexer/", HTTP_AUTHORIZATION=f"Bearer {admin_key}").status_code == 204
    )
    assert get(url).json() == []
    assert get(url + "indexer/").status_code == 404


@pytest.mark.parametrize("agents", [1, 2])
def test_a_group_with_only_committed_offsets_is_listed_right_after_the_commit(
    agent, cluster, agents
):
    """Kafka lists a group an assign-only consumer committed to as Empty as soon as the
    commit is acknowledged; so does Floe, to a client asking every broker of the
    Metadata answer (AdminClient does). Its coordinator holds the lease of a group
    nobody joined: it lists it, as no other agent does."""
    from confluent_kafka import Consumer, ConsumerGroupState, TopicPartition
    from confluent_kafka.admin import AdminClient

    started = [agent(cluster.key) for _ in range(agents)]
    ports = {a.port for a in started}
    wait_until(
        lambda: all(broker_ports(a.bootstrap, "probe") == ports for a in started),
        30,
        "every agent in every Metadata answer",
    )
    create_topic(started[0].bootstrap, "ledger", 3)
    admin = AdminClient({"bootstrap.servers": started[0].bootstrap})
    groups = [f"assigned-{n}" for n in range(6)]  # on two agents, spread over both
    for group in groups:
        consumer = Consumer({"bootstrap.servers": started[0].bootstrap, "group.id": group})
        try:
            consumer.commit(offsets=[TopicPartition("ledger", 1, 7)], asynchronous=False)
        finally:
            consumer.close()
        listed = admin.list_consumer_groups().result(15)
        assert not listed.errors, listed.errors
        states = {g.group_id: g.state for g in listed.valid}
        assert states.get(group) == ConsumerGroupState.EMPTY, (group, states)
    listed = admin.list_consumer_groups().result(15)
    assert sorted(g.group_id for g in listed.valid) == groups  # each listed once
