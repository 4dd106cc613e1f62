"""Through a real agent: produce with librdkafka, compact, key-compact, and read back
with confluent-kafka and kafka-python at the original offsets."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from metadata_store.models import Partition, SegmentFile
from tests.factories import make_cluster
from tests.jobs import driver
from virtualclusters.jobs import services as jobs_services
from virtualclusters.jobs.models import JobRun

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]


def create_topics(bootstrap: str, *topics: NewTopic) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics(list(topics), operation_timeout=10).values():
        future.result(15)


def produce_in_rounds(bootstrap: str, rounds: list[list[tuple[str, int, bytes, bytes]]]) -> None:
    """Each round is flushed on its own, so the agent writes a file per round."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    failures = []
    for messages in rounds:
        for topic, partition, key, value in messages:
            producer.produce(
                topic,
                key=key,
                value=value,
                partition=partition,
                on_delivery=lambda err, msg: err and failures.append(err),
            )
        assert producer.flush(20) == 0
    assert not failures, failures[:3]


def confluent_read(bootstrap: str, topic: str, partitions: int) -> list[tuple]:
    """(partition, offset, key, value) of every message up to the high watermarks."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "jobs-e2e", "enable.auto.commit": False}
    )
    ends = {
        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
        for p in range(partitions)
    }
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out, done = [], {p for p, end in ends.items() if end == 0}
    deadline = time.monotonic() + 30
    while len(done) < partitions and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            raise KafkaException(msg.error())
        out.append((msg.partition(), msg.offset(), msg.key(), msg.value()))
        if msg.offset() + 1 >= ends[msg.partition()]:
            done.add(msg.partition())
    consumer.close()
    assert len(done) == partitions, f"did not reach the end of {topic}"
    return sorted(out)


def kafka_python_read(bootstrap: str, topic: str, partitions: int) -> list[tuple]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100
    )
    tps = [KpTopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning()
    ends = consumer.end_offsets(tps)
    out = []
    deadline = time.monotonic() + 30
    while any(consumer.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            out.extend((r.partition, r.offset, r.key, r.value) for r in records)
    consumer.close()
    return sorted(out)


def run_job(cluster, kind: str) -> JobRun:
    run = jobs_services.job_dispatch(cluster=cluster, kind=kind)
    assert run is not None, f"{kind} should be due"
    run = driver.job_run_execute(run_id=run.id)
    assert run.state == "succeeded", run.error
    assert run.details.get("swapped") is True, run.details
    return run


def test_clients_read_the_same_records_after_compaction_and_the_latest_per_key_after_key_compaction(
    agent, transactional_db, spark, jobs_settings
):
    cluster, key = make_cluster("e2e", auto_create_topics=False)
    a = agent(key)
    create_topics(
        a.bootstrap,
        NewTopic("clicks", num_partitions=2, replication_factor=1),
        NewTopic(
            "state",
            num_partitions=1,
            replication_factor=1,
            config={"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0"},
        ),
    )
    rounds = [
        [("clicks", i % 2, f"c{r}-{i}".encode(), f"click {r}/{i}".encode() * 10) for i in range(6)]
        + [
            ("state", 0, f"key-{(r * 3 + i) % 7}".encode(), f"value {r}/{i}".encode())
            for i in range(3)
        ]
        for r in range(30)
    ]
    produce_in_rounds(a.bootstrap, rounds)
    clicks = confluent_read(a.bootstrap, "clicks", 2)
    state = confluent_read(a.bootstrap, "state", 1)
    assert len(clicks) == 180 and len(state) == 90
    files_before = SegmentFile.objects.filter(cluster=cluster, state="live").count()
    assert files_before >= 30

    run_job(cluster, JobRun.Kind.COMPACTION)

    files_after = SegmentFile.objects.filter(cluster=cluster, state="live").count()
    assert files_after * 10 <= files_before
    assert confluent_read(a.bootstrap, "clicks", 2) == clicks
    assert kafka_python_read(a.bootstrap, "clicks", 2) == clicks
    assert confluent_read(a.bootstrap, "state", 1) == state

    run_job(cluster, JobRun.Kind.KEY_COMPACTION)

    latest = {}
    for _, offset, k, value in state:
        latest[k] = (0, offset, k, value)
    expected = sorted(latest.values())
    assert len(expected) == 7
    assert confluent_read(a.bootstrap, "state", 1) == expected
    assert kafka_python_read(a.bootstrap, "state", 1) == expected
    assert Partition.objects.get(topic__cluster=cluster, topic__name="state").high_watermark == 90
    assert confluent_read(a.bootstrap, "clicks", 2) == clicks  # other topics untouched
