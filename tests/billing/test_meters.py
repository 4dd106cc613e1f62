"""The meters against real produce: written bytes to the byte, storage over time,
cluster time from the agents' lifetime; running them twice changes nothing."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlparse

import pytest
from confluent_kafka import Producer
from django.db.models import Sum

from billing.meters import (
    meter_cluster_time,
    meter_reads,
    meter_stored,
    meter_stored_topics,
    meter_written,
    meters_run,
)
from billing.models import ActiveInterval, UsageHour, UsageTopicHour
from core.kafka.records import iter_batches, uncompressed_size
from core.segment import read_index
from metadata_store.models import SegmentFile
from tests.metadata_store.conftest import AgentApi

pytestmark = pytest.mark.django_db(transaction=True)


def produce(bootstrap: str, topic: str, count: int, **config) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})
    failures = []
    for n in range(count):
        producer.produce(
            topic,
            key=f"k{n}".encode(),
            value=(f"value {n} " * 20).encode(),
            on_delivery=lambda err, msg: err and failures.append(err),
        )
        producer.poll(0)
    assert producer.flush(20) == 0
    assert not failures


def bucket_batch_bytes(bucket_url: str) -> tuple[int, int]:
    """(record-batch bytes, files) as the bucket holds them: the ground truth."""
    files = [p for p in Path(urlparse(bucket_url).path).rglob("*") if p.is_file()]
    return sum(e.length for f in files for e in read_index(f.read_bytes())), len(files)


def bucket_logical_bytes(bucket_url: str) -> int:
    """The bucket's batches with their records decompressed."""
    total = 0
    for path in Path(urlparse(bucket_url).path).rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for e in read_index(data):
                batch = data[e.position : e.position + e.length]
                total += uncompressed_size(batch, next(iter_batches(batch))[2])
    return total


def uncompressed(cluster) -> int:
    return (
        UsageHour.objects.filter(cluster_public_id=cluster.public_id).aggregate(
            n=Sum("bytes_written_uncompressed")
        )["n"]
        or 0
    )


def written(cluster) -> tuple[int, int]:
    sums = UsageHour.objects.filter(cluster_public_id=cluster.public_id).aggregate(
        b=Sum("bytes_written"), f=Sum("files_written")
    )
    return sums["b"] or 0, sums["f"] or 0


def test_written_bytes_equal_the_committed_batches_to_the_byte(
    agent, cluster, bucket_url, settings
):
    settings.FLOE_BILLING_METER_LAG_S = 0
    a = agent(cluster.key)
    produce(a.bootstrap, "plain", 300)
    produce(a.bootstrap, "squeezed", 300, **{"compression.type": "lz4"})
    produce(a.bootstrap, "plain", 1, **{"compression.type": "gzip"})
    expected = bucket_batch_bytes(bucket_url)
    assert expected[0] > 0

    meters_run()
    assert written(cluster.cluster) == expected
    meters_run()  # again: nothing new, nothing counted twice
    assert written(cluster.cluster) == expected
    # The per-topic breakdown adds up to the same bytes.
    by_topic = dict(
        UsageTopicHour.objects.filter(cluster_public_id=cluster.public_id)
        .values("topic")
        .annotate(n=Sum("bytes_written"))
        .values_list("topic", "n")
    )
    assert set(by_topic) == {"plain", "squeezed"}
    assert sum(by_topic.values()) == expected[0]
    # The logical (uncompressed) bytes, as the agent reports them on its next heartbeat.
    logical = bucket_logical_bytes(bucket_url)
    assert logical > expected[0]  # lz4 and gzip shrank something
    deadline = time.monotonic() + 10
    while uncompressed(cluster.cluster) != logical and time.monotonic() < deadline:
        time.sleep(0.5)
        meters_run()
    assert uncompressed(cluster.cluster) == logical


def test_a_file_too_young_waits_for_the_next_run(agent, cluster, bucket_url, settings):
    settings.FLOE_BILLING_METER_LAG_S = 3600
    a = agent(cluster.key)
    produce(a.bootstrap, "t", 10)
    assert meter_written() == 0
    settings.FLOE_BILLING_METER_LAG_S = 0
    assert meter_written() == bucket_batch_bytes(bucket_url)[1]
    assert written(cluster.cluster) == bucket_batch_bytes(bucket_url)


def test_storage_is_weighted_by_time_and_falls_after_retention(
    agent, cluster, bucket_url, settings
):
    settings.FLOE_BILLING_TOPIC_SAMPLE_S = 60
    a = agent(cluster.key)
    produce(a.bootstrap, "t", 50)
    live = sum(SegmentFile.objects.filter(cluster=cluster.cluster).values_list("size", flat=True))
    t0 = datetime(2026, 3, 1, 9, 59, 30, tzinfo=UTC)
    meter_stored_topics(now=t0)
    meter_stored_topics(now=t0 + timedelta(seconds=30))  # too soon: no sample
    meter_stored_topics(now=t0 + timedelta(seconds=60))
    topic_stored = UsageTopicHour.objects.filter(topic="t").aggregate(n=Sum("stored_byte_seconds"))
    assert topic_stored["n"] == bucket_batch_bytes(bucket_url)[0] * 60
    meter_stored(now=t0)  # the first sample only sets the mark
    meter_stored(now=t0 + timedelta(seconds=60))  # 30 s in 09:00, 30 s in 10:00
    meter_stored(now=t0 + timedelta(seconds=60))  # twice: nothing more
    rows = dict(
        UsageHour.objects.filter(cluster_public_id=cluster.public_id).values_list(
            "hour", "stored_byte_seconds"
        )
    )
    assert rows == {
        datetime(2026, 3, 1, 9, tzinfo=UTC): live * 30,
        datetime(2026, 3, 1, 10, tzinfo=UTC): live * 30,
    }
    # Retention replaces the files: the next minute stores nothing.
    SegmentFile.objects.filter(cluster=cluster.cluster).update(state=SegmentFile.State.REPLACED)
    meter_stored(now=t0 + timedelta(seconds=120))
    assert (
        UsageHour.objects.get(
            cluster_public_id=cluster.public_id, hour=datetime(2026, 3, 1, 10, tzinfo=UTC)
        ).stored_byte_seconds
        == live * 30
    )


def test_cluster_time_covers_the_agents_lifetime(agent, cluster):
    a = agent(cluster.key)
    produce(a.bootstrap, "t", 1)
    a.stop()
    meter_cluster_time()
    meter_cluster_time()
    agent_row = cluster.cluster.agents.get()
    starts = list(
        ActiveInterval.objects.filter(cluster_public_id=cluster.public_id).values_list(
            "start", flat=True
        )
    )
    first = agent_row.started_at.replace(
        minute=agent_row.started_at.minute // 15 * 15, second=0, microsecond=0
    )
    last = agent_row.last_heartbeat.replace(
        minute=agent_row.last_heartbeat.minute // 15 * 15, second=0, microsecond=0
    )
    assert starts == [first + timedelta(minutes=15 * n) for n in range(len(starts))]
    assert starts[-1] == last


def committed_batch_bytes(bucket_url: str, cluster) -> int:
    """Record-batch bytes of the files the metadata store committed, read from the bucket."""
    root = Path(urlparse(bucket_url).path)
    return sum(
        e.length
        for key in SegmentFile.objects.filter(cluster=cluster, level=0).values_list(
            "key", flat=True
        )
        for e in read_index((root / key).read_bytes())
    )


def test_a_killed_agent_and_a_retried_commit_count_only_what_was_committed(
    agent, cluster, bucket_url, settings
):
    settings.FLOE_BILLING_METER_LAG_S = 0
    a = agent(cluster.key, batch_timeout_ms=5)
    producer = Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 1,
                         "message.timeout.ms": 3000})  # fmt: skip
    for n in range(3000):
        producer.produce("t", value=b"v" * 200)
        if n % 100 == 0:
            producer.poll(0.01)
    a.kill()  # mid-produce: some segments committed, maybe one PUT and never committed
    producer.flush(5)
    meters_run()
    committed = committed_batch_bytes(bucket_url, cluster.cluster)
    assert committed > 0
    assert written(cluster.cluster)[0] == committed

    # The agent's retry of a commit it already made (same file key) is one row: no change.
    file = SegmentFile.objects.filter(cluster=cluster.cluster, level=0).first()
    entries = read_index((Path(urlparse(bucket_url).path) / file.key).read_bytes())
    body = {
        "file_key": file.key,
        "size": file.size,
        "batches": [
            {"topic_id": str(e.topic_id), "partition": e.partition, "pos": e.position,
             "len": e.length, "records": e.record_count, "base_ts": e.base_timestamp,
             "max_ts": e.max_timestamp}
            for e in entries
        ],
    }  # fmt: skip
    AgentApi(cluster.key)("commit", body)
    meters_run()
    assert written(cluster.cluster)[0] == committed


def test_reads_count_the_growth_of_the_agents_counters_once(alice):
    api = AgentApi(alice["agent_key"])

    def heartbeat(agent_id, gets, read):
        api("heartbeat", {"agent_id": agent_id,
                          "stats": {"get_requests": gets, "client_bytes_by_zone": {"": read}}})  # fmt: skip

    def reads():
        row = UsageHour.objects.filter(cluster_public_id=alice["cluster"].public_id).aggregate(
            g=Sum("object_gets"), r=Sum("bytes_read")
        )
        return row["g"] or 0, row["r"] or 0

    heartbeat("agt-1", 10, 1000)
    meter_reads()
    heartbeat("agt-1", 10, 1000)  # the same report again
    meter_reads()
    meter_reads()
    assert reads() == (10, 1000)
    heartbeat("agt-1", 25, 1500)
    heartbeat("agt-2", 1, 10)
    meter_reads()
    assert reads() == (26, 1510)
    heartbeat("agt-1", 3, 30)  # restarted under the same id: counts from zero
    meter_reads()
    assert reads() == (29, 1540)


def test_a_resent_duplicate_batch_is_metered_once(alice, settings):
    """An idempotent producer's batch sent again (its answer was lost) lands in a second
    file: it gets its original offset and no index row, and the meter counts its bytes
    once — where they were first committed — not again for the second file."""
    settings.FLOE_BILLING_METER_LAG_S = 0
    api = AgentApi(alice["agent_key"])
    tid = api.create_topic("orders")
    pid = api("init-producer-id", {"transactional_id": None})["producer_id"]
    prefix = f"{alice['cluster'].public_id}/segments/"

    def entry(pos: int, length: int, seq: int) -> dict:
        return {"topic_id": tid, "partition": 0, "pos": pos, "len": length, "records": 5,
                "producer_id": pid, "producer_epoch": 0, "base_sequence": seq}  # fmt: skip

    api("commit", {"file_key": prefix + "a.seg", "size": 1000, "batches": [entry(0, 300, 0)]})
    meters_run()
    assert written(alice["cluster"]) == (300, 1)
    resent = api(
        "commit",
        {"file_key": prefix + "b.seg", "size": 1000,
         "batches": [entry(0, 300, 0), entry(300, 200, 5)]},
    )  # fmt: skip
    assert [b.get("duplicate", False) for b in resent["batches"]] == [True, False]
    meters_run()
    meters_run()  # twice: nothing changes
    assert written(alice["cluster"]) == (500, 2)
