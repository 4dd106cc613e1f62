"""Lightning topics against real agents, a real control plane and real Kafka clients:
the topic type config, produce acknowledged from the journal (offset -1), records
readable once sequenced, exactly once, and the refusal of transactions."""

from __future__ import annotations

import time

import pytest

from core.journal_keys import parse_entry_key
from core.storage import open_store
from metadata_store.models import SegmentFile
from tests.agents.clients import confluent_consume

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka]


def _create(bootstrap: str, name: str, partitions: int, configs: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=configs)])
    futures[name].result(15)


def _described(bootstrap: str, name: str) -> dict[str, str]:
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    entries = admin.describe_configs([resource])[resource].result(15)
    return {name: entry.value for name, entry in entries.items()}


def test_a_lightning_topic_acks_from_the_journal_and_its_records_are_read_once_in_order(
    agent, cluster, bucket_url
):
    """An idempotent confluent-kafka producer on a topic created with WarpStream's
    `warpstream.topic.type=lightning`: DescribeConfigs says floe.topic.type=lightning,
    every delivery report has no offset (the answer's base offset is -1: not known when
    acknowledged; confluent-kafka says None), the files are journal entries, and every
    record is read back once, in the order sent."""
    from confluent_kafka import Producer

    a = agent(cluster.key)
    _create(a.bootstrap, "fast", 2, {"warpstream.topic.type": "lightning"})
    assert _described(a.bootstrap, "fast")["floe.topic.type"] == "lightning"

    reports: list = []
    producer = Producer(
        {
            "bootstrap.servers": a.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 2,
            "message.timeout.ms": 30000,
            # librdkafka numbers a batch's messages from its base offset even when it
            # is -1 (-1, 0, 1, …): one message a batch keeps every report honest.
            "batch.num.messages": 1,
        }
    )
    sent = {0: [], 1: []}
    for n in range(100):
        value = f"{n}".encode()
        sent[n % 2].append(value)
        producer.produce(
            "fast",
            value=value,
            partition=n % 2,
            on_delivery=lambda err, msg: reports.append(err or msg.offset()),
        )
        producer.poll(0)
    assert producer.flush(30) == 0
    assert reports == [None] * 100, [r for r in reports if r is not None][:3]

    for partition in (0, 1):
        read = confluent_consume(a.bootstrap, "fast", [partition], 50, timeout=20)
        assert [m.value() for m in read] == sent[partition]
        assert [m.offset() for m in read] == list(range(50))

    keys = list(SegmentFile.objects.values_list("key", flat=True))
    assert keys and all(parse_entry_key(k) is not None for k in keys), keys[:3]
    store = open_store(bucket_url)
    markers = [i.key for i in store.list(f"{cluster.public_id}/journals/")]
    assert len(markers) == 1, markers


def test_the_cluster_default_makes_new_topics_lightning_and_a_standard_topic_stays_so(
    agent, cluster
):
    """With the cluster's default_topic_type lightning, a topic without the config acks
    with -1 and describes as lightning; one created standard acks with its offset."""
    from tests.agents.clients import confluent_produce

    cluster.cluster.default_topic_type = "lightning"
    cluster.cluster.save(update_fields=["default_topic_type"])
    a = agent(cluster.key)
    _create(a.bootstrap, "plain", 1, {"floe.topic.type": "standard"})
    _create(a.bootstrap, "quick", 1, {})
    assert _described(a.bootstrap, "quick")["floe.topic.type"] == "lightning"
    assert _described(a.bootstrap, "plain")["floe.topic.type"] == "standard"
    messages = [(None, b"x", None)] * 3
    assert (
        confluent_produce(a.bootstrap, "quick", messages, partition=0, **{"batch.num.messages": 1})
        == [(0, None)] * 3
    )
    assert confluent_produce(a.bootstrap, "plain", messages, partition=0) == [
        (0, 0),
        (0, 1),
        (0, 2),
    ]


def test_kafka_python_gets_offset_minus_one_and_a_transaction_is_refused_by_topic_type(
    agent, cluster
):
    """kafka-python's future resolves with offset -1; a transactional confluent-kafka
    producer's send to a lightning topic fails with POLICY_VIOLATION."""
    from confluent_kafka import KafkaError, KafkaException, Producer
    from kafka import KafkaProducer

    a = agent(cluster.key)
    _create(a.bootstrap, "bolt", 1, {"floe.topic.type": "lightning"})
    producer = KafkaProducer(bootstrap_servers=a.bootstrap, request_timeout_ms=15000)
    try:
        metadata = producer.send("bolt", b"v", partition=0).get(timeout=15)
    finally:
        producer.close(5)
    assert metadata.offset == -1

    reports: list = []
    txn = Producer({"bootstrap.servers": a.bootstrap, "transactional.id": "t1"})
    txn.init_transactions(15)
    txn.begin_transaction()
    txn.produce("bolt", b"in a txn", partition=0, on_delivery=lambda e, m: reports.append(e))
    txn.flush(15)
    with pytest.raises(KafkaException):
        txn.commit_transaction(15)
    assert reports and reports[0] is not None
    # librdkafka shows the code; the answer's error_message (Produce v8+) names the type.
    assert reports[0].code() == KafkaError.POLICY_VIOLATION, reports[0]
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and SegmentFile.objects.count() < 1:
        time.sleep(0.1)
    assert SegmentFile.objects.count() == 1  # only kafka-python's record was written
