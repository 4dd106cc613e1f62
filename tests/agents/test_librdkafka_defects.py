"""Defects librdkafka's own test suite found (issue 31), each reproduced with a real
client: what librdkafka does against Apache Kafka works against Floe."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = [pytest.mark.kafka, pytest.mark.django_db(transaction=True)]

# Kafka's offset metadata is an arbitrary string: librdkafka's 0099 puts a NUL in it
# (confluent-kafka's Python layer cannot pass one; kafka-python can).
CONTROL_METADATA = "plain\x01\x1f\x7f é ✓"
NUL_METADATA = "before\x00after" + CONTROL_METADATA


def _topic(bootstrap: str, name: str, partitions: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions)])[name].result(15)


def test_an_assign_only_consumer_commits_metadata_that_comes_back_byte_for_byte(agent, cluster):
    a = agent(cluster.key)
    _topic(a.bootstrap, "meta")
    consumer = Consumer(
        {"bootstrap.servers": a.bootstrap, "group.id": "meta-g", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition("meta", 0), TopicPartition("meta", 1)])
        committed = consumer.commit(
            offsets=[
                TopicPartition("meta", 0, 3, "plain"),
                TopicPartition("meta", 1, 5, CONTROL_METADATA),
            ],
            asynchronous=False,
        )
        assert [tp.error for tp in committed] == [None, None]
        back = consumer.committed([TopicPartition("meta", 0), TopicPartition("meta", 1)], 10)
        assert [(tp.offset, tp.metadata) for tp in back] == [(3, "plain"), (5, CONTROL_METADATA)]
    finally:
        consumer.close()


def test_kafka_python_commits_and_fetches_metadata_with_control_bytes(agent, cluster):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP
    from kafka.structs import OffsetAndMetadata

    a = agent(cluster.key)
    _topic(a.bootstrap, "meta-kp", 1)
    consumer = KafkaConsumer(
        bootstrap_servers=a.bootstrap, group_id="meta-kp-g", enable_auto_commit=False
    )
    try:
        tp = KTP("meta-kp", 0)
        consumer.assign([tp])
        consumer.commit({tp: OffsetAndMetadata(7, NUL_METADATA, -1)})
        deadline = time.monotonic() + 10
        got = consumer.committed(tp, metadata=True)
        while got is None and time.monotonic() < deadline:
            time.sleep(0.2)
            got = consumer.committed(tp, metadata=True)
        assert got is not None and (got.offset, got.metadata) == (7, NUL_METADATA)
    finally:
        consumer.close()


def _watermarks(bootstrap: str, topic: str, isolation: str) -> tuple[int, int]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "wm", "isolation.level": isolation}
    )
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
    finally:
        consumer.close()


def test_the_last_stable_offset_has_moved_when_commit_transaction_returns(agent, cluster):
    """librdkafka's 0103 (do_test_wmark_isolation_level): 100 plain records, then a
    transaction of 100. While it is open read_committed's end is 100; when
    commit_transaction returns, both isolation levels answer 201 (the marker included) at
    once — the agent's cache of the partition's offsets answered 100 for about a second."""
    a = agent(cluster.key)
    _topic(a.bootstrap, "lso", 1)
    plain = Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 5})
    for i in range(100):
        plain.produce("lso", value=b"p%d" % i, partition=0)
    assert plain.flush(15) == 0
    txn = Producer({"bootstrap.servers": a.bootstrap, "transactional.id": "lso-t", "linger.ms": 5})
    txn.init_transactions(15)
    txn.begin_transaction()
    for i in range(100):
        txn.produce("lso", value=b"t%d" % i, partition=0)
    assert txn.flush(15) == 0
    assert _watermarks(a.bootstrap, "lso", "read_committed")[1] == 100
    assert _watermarks(a.bootstrap, "lso", "read_uncommitted")[1] == 200
    txn.commit_transaction(15)
    assert _watermarks(a.bootstrap, "lso", "read_committed")[1] == 201
    assert _watermarks(a.bootstrap, "lso", "read_uncommitted")[1] == 201


def test_delete_records_answers_each_partition_on_its_own(agent, cluster):
    """librdkafka's 0081: partitions asked past their end or with no offset at all
    (OFFSET_INVALID, -1001) among valid ones, over three topics — the valid ones are
    deleted, the others answer OFFSET_OUT_OF_RANGE (every partition failed with
    REQUEST_TIMED_OUT)."""
    from confluent_kafka import KafkaError

    a = agent(cluster.key)
    producer = Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 5})
    for t in range(3):
        _topic(a.bootstrap, f"del{t}", 3)
        for p in range(3):
            for i in range(10):
                producer.produce(f"del{t}", value=b"%d" % i, partition=p)
    assert producer.flush(15) == 0
    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    asked = [
        *(TopicPartition("del0", p, -1) for p in range(3)),  # OFFSET_END: everything
        TopicPartition("del1", 0, -1),
        TopicPartition("del1", 2, 5),
        TopicPartition("del2", 0),  # no offset: OFFSET_INVALID
        TopicPartition("del2", 1, 11),  # past the end
    ]
    results = {}
    for tp, future in admin.delete_records(asked, request_timeout=15).items():
        try:
            results[(tp.topic, tp.partition)] = future.result(20).low_watermark
        except Exception as exc:  # noqa: BLE001 — the error is what is checked
            results[(tp.topic, tp.partition)] = exc.args[0].code()
    out_of_range = KafkaError.OFFSET_OUT_OF_RANGE
    assert results == {
        ("del0", 0): 10,
        ("del0", 1): 10,
        ("del0", 2): 10,
        ("del1", 0): 10,
        ("del1", 2): 5,
        ("del2", 0): out_of_range,
        ("del2", 1): out_of_range,
    }


def test_list_consumer_groups_gives_each_groups_type(agent, cluster):
    """librdkafka's 0081: ListGroups v5 answers each group's type (KIP-848), and a
    types filter without `classic` lists none of Floe's classic groups."""
    from confluent_kafka import ConsumerGroupType

    a = agent(cluster.key)
    _topic(a.bootstrap, "typed", 1)
    consumer = Consumer(
        {"bootstrap.servers": a.bootstrap, "group.id": "typed-g", "enable.auto.commit": False}
    )
    try:
        consumer.commit(offsets=[TopicPartition("typed", 0, 1)], asynchronous=False)
    finally:
        consumer.close()
    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    listed = admin.list_consumer_groups(request_timeout=15).result(20).valid
    assert [(g.group_id, g.type) for g in listed] == [("typed-g", ConsumerGroupType.CLASSIC)]
    only_new = admin.list_consumer_groups(
        types={ConsumerGroupType.CONSUMER}, request_timeout=15
    ).result(20)
    assert only_new.valid == []


def test_create_topics_takes_replica_assignments_for_their_partition_count(agent, cluster):
    """librdkafka's 0081 creates topics with explicit replica assignments: a leaderless
    broker takes their partition count and ignores placement (INVALID_REQUEST before);
    assignments that Kafka would refuse are refused alike. (kafka-python's admin: the
    confluent-kafka binding cannot send assignments without a partition count.)"""
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewTopic as KafkaNewTopic
    from kafka.errors import InvalidReplicationAssignmentError

    a = agent(cluster.key)
    admin = KafkaAdminClient(bootstrap_servers=a.bootstrap, request_timeout_ms=15000)
    try:
        placed = KafkaNewTopic(
            "placed", -1, -1, replica_assignments={0: [1, 2], 1: [2, 3], 2: [3, 1]}
        )
        created = admin.create_topics([placed])
        assert [(t["name"], t["error_code"]) for t in created["topics"]] == [("placed", 0)]
        lopsided = KafkaNewTopic("lopsided", -1, -1, replica_assignments={0: [1, 2], 1: [2]})
        with pytest.raises(InvalidReplicationAssignmentError):
            admin.create_topics([lopsided])
    finally:
        admin.close()
    described = AdminClient({"bootstrap.servers": a.bootstrap}).list_topics("placed", timeout=10)
    assert sorted(described.topics["placed"].partitions) == [0, 1, 2]


def test_broker_configs_are_kept_for_the_cluster_and_the_settings_ones_refused(agent, cluster):
    """0081: AlterConfigs / IncrementalAlterConfigs on a BROKER resource. A dynamic broker
    config set through one agent is described by another; the configs made from the
    cluster's settings stay read-only; AlterConfigs replaces the whole set."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource

    first, second = agent(cluster.key), agent(cluster.key)
    admin = AdminClient({"bootstrap.servers": first.bootstrap})
    other = AdminClient({"bootstrap.servers": second.bootstrap})
    broker = str(admin.list_topics(timeout=10).controller_id)

    def incremental(*entries: ConfigEntry) -> None:
        resource = ConfigResource("BROKER", broker, incremental_configs=list(entries))
        admin.incremental_alter_configs([resource])[resource].result(10)

    def described(client: AdminClient) -> dict:
        resource = ConfigResource("BROKER", str(client.list_topics(timeout=10).controller_id))
        return client.describe_configs([resource])[resource].result(10)

    set_op, append_op = AlterConfigOpType.SET, AlterConfigOpType.APPEND
    incremental(
        ConfigEntry("sasl.kerberos.min.time.before.relogin", "58000", incremental_operation=set_op)
    )
    incremental(ConfigEntry("floe.test.list", "a,b", incremental_operation=set_op))
    incremental(ConfigEntry("floe.test.list", "c", incremental_operation=append_op))
    seen = described(other)
    relogin = seen["sasl.kerberos.min.time.before.relogin"]
    assert (relogin.value, relogin.source, relogin.is_read_only) == (
        "58000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
        False,
    )
    assert seen["floe.test.list"].value == "a,b,c"
    assert seen["default.replication.factor"].value == "3"  # the settings' ones are still there

    with pytest.raises(KafkaException) as refused:
        incremental(ConfigEntry("num.partitions", "7", incremental_operation=set_op))
    assert refused.value.args[0].name() == "INVALID_CONFIG"
    assert "cluster's settings" in refused.value.args[0].str()

    # AlterConfigs (not incremental) replaces the whole set, as Kafka does.
    replace = ConfigResource("BROKER", broker, set_config={"log.cleaner.threads": "2"})
    admin.alter_configs([replace])[replace].result(10)
    seen = described(admin)
    assert seen["log.cleaner.threads"].value == "2"
    assert "sasl.kerberos.min.time.before.relogin" not in seen
    assert "floe.test.list" not in seen
