"""A compaction swap under consumers tailing through a real agent (issue 28): the small-file
compaction job (Spark, in process) rewrites the files the agent's tail index points at
while confluent-kafka consumers tail and a producer writes; the swap reaches the agent
through the tail feed, which drops the partitions' entries. The replaced files are then
deleted at once (as the deleter does after its grace period) and the agent reads
without a read cache, so a plan naming one would fail: consumers get every record once,
one that starts inside the swapped offsets reads the compacted files, and the agent plans
the tail from its index again afterwards."""

from __future__ import annotations

import re
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from django.db import connection

from jobs.segment_io import store_for
from metadata_store.models import SegmentFile
from tests.agents.test_confluent_kafka import create_topic
from tests.agents.test_tail_feed import drain, drain_until, plans, tailing
from tests.factories import make_cluster
from tests.jobs import driver
from virtualclusters.jobs import services as jobs_services
from virtualclusters.jobs.models import JobRun

pytestmark = [pytest.mark.kafka, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

TOPIC = "swapped"
PARTITIONS = 2


def metric(agent, name: str) -> float:
    found = re.search(rf"^{name} ([0-9.e+]+)$", agent.metrics(), re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def produce_round(producer: Producer, sent: list[bytes], label: str) -> None:
    """A few records on every partition, flushed: the agent writes one file of them."""
    for i in range(4):
        value = f"{label}-{i}".encode()
        producer.produce(TOPIC, value, partition=i % PARTITIONS)
        sent.append(value)
    assert producer.flush(20) == 0


def test_a_compaction_swap_under_tailing_consumers(
    agent, transactional_db, spark, jobs_settings, bucket_url
):
    cluster, key = make_cluster("tail-swap", auto_create_topics=False)
    a = agent(key, extra=["--cache-bytes", "0"])  # every read goes to the bucket
    create_topic(a.bootstrap, TOPIC, partitions=PARTITIONS)
    consumers = [tailing(a.bootstrap, TOPIC, PARTITIONS) for _ in range(2)]
    got: list[list] = [[] for _ in consumers]
    drain(consumers, got, 1.0)
    producer = Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 0})
    sent: list[bytes] = []
    # Until the agent plans the tail from its index (the feed is live: an earlier test
    # may have left the control plane's relay reconnecting), so that it holds both
    # partitions from here on.
    deadline = time.monotonic() + 30
    while not plans(a).get("tail_index", 0) and time.monotonic() < deadline:
        produce_round(producer, sent, f"warm{len(sent)}")
        drain(consumers, got, 0.3)
    assert plans(a).get("tail_index", 0) > 0
    late_start = len(sent) // PARTITIONS + 12  # inside the rounds the swap rewrites
    for n in range(12):  # twelve more small files: compaction is due from eight
        produce_round(producer, sent, f"before{n}")
        drain(consumers, got, 0.05)
    drain_until(consumers, got, len(sent))
    inputs = list(
        SegmentFile.objects.filter(cluster=cluster, state="live", level=0).values_list(
            "key", flat=True
        )
    )
    assert len(inputs) >= 12

    # The job runs (Spark in this process) while the producer writes and consumers tail.
    stop = threading.Event()

    def keep_producing() -> None:
        during = Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 0})
        n = 0
        while not stop.is_set() and n < 30:  # the index holds 64 runs a partition
            produce_round(during, sent, f"during{n}")
            n += 1
            stop.wait(0.3)

    result: list[JobRun] = []

    def compact() -> None:
        try:
            run = jobs_services.job_dispatch(cluster=cluster, kind=JobRun.Kind.COMPACTION)
            assert run is not None, "compaction should be due"
            result.append(driver.job_run_execute(run_id=run.id))
        finally:
            connection.close()

    invalidated = metric(a, "floe_tail_index_invalidated_total")
    writer = threading.Thread(target=keep_producing)
    job = threading.Thread(target=compact)
    writer.start()
    job.start()
    try:
        while job.is_alive():
            drain(consumers, got, 0.2)
        job.join()
    finally:
        stop.set()
        writer.join()
    run = result[0]
    assert run.state == "succeeded", run.error
    assert run.details["swapped"] is True, run.details
    replaced = set(
        SegmentFile.objects.filter(cluster=cluster, state="replaced").values_list("key", flat=True)
    )
    assert set(inputs) <= replaced
    # The swap reaches the agent through the feed: both partitions' entries dropped.
    deadline = time.monotonic() + 10
    while (
        metric(a, "floe_tail_index_invalidated_total") < invalidated + PARTITIONS
        and time.monotonic() < deadline
    ):
        drain(consumers, got, 0.1)
    store_for(bucket_url).delete_many(sorted(replaced))  # no grace: gone now

    # A consumer that starts inside the swapped offsets, and the tailing ones, read on.
    late = Consumer(
        {"bootstrap.servers": a.bootstrap, "group.id": "late", "enable.auto.commit": False}
    )
    late.assign([TopicPartition(TOPIC, p, late_start) for p in range(PARTITIONS)])
    late_got: list[list] = [[]]
    index_plans = plans(a).get("tail_index", 0)
    for n in range(10):
        produce_round(producer, sent, f"after{n}")
        drain([*consumers, late], [*got, *late_got], 0.1)
    skipped = late_start * PARTITIONS
    drain_until([*consumers, late], [*got, *late_got], len(sent) - skipped)
    drain_until(consumers, got, len(sent))
    for consumer in (*consumers, late):
        consumer.close()

    for out in got:
        values = [v for _, _, v in out]
        assert len(values) == len(set(values)) == len(sent)  # every record, once
        for p in range(PARTITIONS):
            offsets = [o for part, o, _ in out if part == p]
            assert offsets == list(range(len(offsets)))
    for p in range(PARTITIONS):
        offsets = [o for part, o, _ in late_got[0] if part == p]
        assert offsets == list(range(late_start, late_start + len(offsets))), p
    assert len(late_got[0]) == len(sent) - skipped
    # Nothing was read from a replaced file, and the tail is planned by the agent again.
    assert metric(a, "floe_fetch_read_errors_total") == 0, a.logs()[-2000:]
    assert plans(a).get("tail_index", 0) - index_plans > 10
