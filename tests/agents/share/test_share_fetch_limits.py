"""ShareFetch's MaxRecords and MaxBytes (KIP-932) on the wire against a real agent: a
fetch acquires at most MaxRecords records and answers at most MaxBytes of batches — but
its first batch (KIP-74) — and what it acquired past them goes back uncounted, at once,
for any member."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer

from core.kafka import ApiKey
from tests.agents.share.conftest import Member, produce_one_batch_each, share_topic

pytestmark = pytest.mark.django_db(transaction=True)


def test_max_records_and_max_bytes_bound_what_a_fetch_acquires_and_answers(agent, cluster):
    a = agent(cluster.key)
    share_topic(a.bootstrap, "work")
    produce_one_batch_each(a.bootstrap, "work", 10)
    one = Member(a.bootstrap, "sg", "work")
    two = None
    try:
        assert one.fetch(max_records=3, max_bytes=50_000_000)[0] == [(0, 2, 1)]
        acquired, size = one.fetch(max_records=100, max_bytes=2_500)
        assert acquired == [(3, 4, 1)]  # two ~1.1 KB batches fit, the third does not
        assert 2_000 < size <= 2_500
        # Smaller than one batch: the first batch still goes out (KIP-74).
        acquired, size = one.fetch(max_records=100, max_bytes=10)
        assert acquired == [(5, 5, 1)] and size > 1_024
        # What went back past MaxBytes is anyone's at once, never delivered yet.
        two = Member(a.bootstrap, "sg", "work")
        assert two.fetch(max_records=100, max_bytes=50_000_000)[0] == [(6, 9, 1)]
    finally:
        one.close()
        if two is not None:
            two.close()


def test_the_partitions_of_a_session_take_turns_at_the_limits(agent, cluster):
    """Two busy partitions, MaxBytes for two batches: each fetch starts one partition
    further, so both are read rather than the first one alone."""
    a = agent(cluster.key)
    share_topic(a.bootstrap, "work", partitions=2)
    produce_one_batch_each(a.bootstrap, "work", 6, partitions=2)
    member = Member(a.bootstrap, "sg", "work")
    try:
        got: dict[int, int] = {0: 0, 1: 0}
        for _ in range(4):
            for index, acquired, _size in member.fetch_all(
                max_records=100, max_bytes=2_500, partitions=2
            ):
                got[index] += sum(last - first + 1 for first, last, _ in acquired)
        assert got == {0: 4, 1: 4}
    finally:
        member.close()


def test_max_bytes_zero_acquires_nothing_and_waits(agent, cluster):
    """MaxBytes 0 answers no records and acquires none (as Kafka: librdkafka's 0180 pins
    that fetch.max.bytes=0 gets nothing) — not even the first batch KIP-74 lets through
    otherwise; the fetch waits out its MaxWaitMs rather than answering at once (a client
    would spin), and the records stay whole for the next fetch."""
    a = agent(cluster.key)
    share_topic(a.bootstrap, "work")
    produce_one_batch_each(a.bootstrap, "work", 3)
    member = Member(a.bootstrap, "sg", "work")
    try:
        started = time.monotonic()
        parts = member.fetch_all(max_records=100, max_bytes=0, partitions=1)
        assert all(not acquired and not size for _, acquired, size in parts), parts
        assert time.monotonic() - started >= 1.5  # its MaxWaitMs, 2 s
        assert member.fetch(max_records=100, max_bytes=50_000_000)[0] == [(0, 2, 1)]
    finally:
        member.close()


def _last_offset(records: bytes) -> int:
    """The last offset the v2 record batches hold (-1 for none)."""
    pos, last = 0, -1
    while pos + 27 <= len(records):
        base = int.from_bytes(records[pos : pos + 8], "big", signed=True)
        length = int.from_bytes(records[pos + 8 : pos + 12], "big", signed=True)
        last = base + int.from_bytes(records[pos + 23 : pos + 27], "big", signed=True)
        pos += 12 + length
    return last


def test_every_acquired_offset_answered_comes_with_its_record(agent, cluster):
    """Two partitions of 2 MB each acquired at once: the agent's reads (1 MB a round)
    cannot bring all of it, and what it did not bring goes back instead of being
    answered as acquired without a record — which a client acknowledges as a GAP,
    archiving it unseen (librdkafka's 0172 waited for released records forever)."""
    a = agent(cluster.key)
    share_topic(a.bootstrap, "big", partitions=2)
    producer = Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 0})
    for _ in range(20):
        for partition in (0, 1):
            producer.produce("big", value=b"y" * 100_000, partition=partition)
        assert producer.flush(10) == 0
    member = Member(a.bootstrap, "sg", "big")
    try:
        seen: dict[int, set[int]] = {0: set(), 1: set()}
        for _ in range(6):
            answer = member.wire.call(
                ApiKey.SHARE_FETCH,
                1,
                {"group_id": "sg", "member_id": member.member_id,
                 "share_session_epoch": member.epoch, "max_wait_ms": 500, "min_bytes": 1,
                 "max_bytes": 50_000_000, "max_records": 40, "batch_size": 40,
                 "topics": [{"topic_id": member.topic_id,
                             "partitions": [{"partition_index": i, "acknowledgement_batches": []}
                                            for i in (0, 1) if member.epoch == 0]}],
                 "forgotten_topics_data": []},
            )  # fmt: skip
            member.epoch += 1
            for part in answer["responses"][0]["partitions"] if answer["responses"] else ():
                top = _last_offset(part["records"] or b"")
                for acquired in part["acquired_records"]:
                    assert acquired["last_offset"] <= top, (part["partition_index"], acquired)
                    seen[part["partition_index"]].update(
                        range(acquired["first_offset"], acquired["last_offset"] + 1)
                    )
        assert seen == {0: set(range(20)), 1: set(range(20))}
    finally:
        member.close()
