"""A member's last ShareFetch answer can arrive after its application stopped polling:
librdkafka's poll returns at its timeout while the ShareFetch still waits at the agent
(fetch.wait.max.ms), a record committed then is acquired for the member, and the member
closes without handing it to the application. Its share session's close releases the
record with the delivery counted, so the next member gets it first at delivery count 2 —
what librdkafka's 0174 tripped on when it stopped its consumers with records in flight.
Kept counted on purpose: librdkafka sends no acknowledgements at close in implicit mode,
so the records the closing member did deliver come back the same way, and an uncounted
release (Kafka's current code) made 0174 count those as first deliveries twice (20,008 of
20,000 in its second case). What the agent can tell: a member that has left acquires
nothing more, not even in a ShareFetch already waiting (librdkafka sends the leave first,
its session's close only once that ShareFetch is answered)."""

from __future__ import annotations

import threading
import time

import pytest

from metadata_store.models import SharePartition
from metadata_store.share_state import ACQUIRED
from tests.agents.share.conftest import (
    Member,
    poll_until,
    produce,
    share_consumer,
    share_topic,
)

pytestmark = pytest.mark.django_db(transaction=True)


def _held(group: str) -> list[list]:
    """The group's acquired ranges in the store ([first, last, state, count, member, …])."""
    return [
        r
        for row in SharePartition.objects.filter(group_id=group)
        for r in row.in_flight
        if r[2] == ACQUIRED
    ]


def _wait(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_a_record_acquired_after_the_last_poll_comes_back_counted(agent, cluster):
    a = agent(cluster.key)
    share_topic(a.bootstrap, "work")
    # Its ShareFetch waits up to 8 s at the agent for records; its polls return sooner.
    closer = share_consumer(a.bootstrap, "sg", "work", **{"fetch.wait.max.ms": 8000})
    other = share_consumer(a.bootstrap, "sg", "work")  # joins now, polls only after the close
    try:
        joined = time.monotonic() + 20
        while not SharePartition.objects.filter(group_id="sg").exists():
            assert time.monotonic() < joined, "closer never sent a ShareFetch"
            assert len(closer.poll(0.2)) == 0
        # Its ShareFetch is waiting at the agent now; the application polls no more.
        produce(a.bootstrap, "work", 1)
        assert _wait(lambda: [r[:4] for r in _held("sg")] == [[0, 0, ACQUIRED, 1]], 6.0), _held(
            "sg"
        )
        closer.close()  # its share session's close: the record was never delivered
        closer = None
        got = poll_until([other], 1)[id(other)]
        assert [(m.offset(), m.delivery_count()) for m in got] == [(0, 2)]
    finally:
        for consumer in (closer, other):
            if consumer is not None:
                consumer.close()


def test_a_member_that_left_acquires_nothing_while_its_last_share_fetch_waits(agent, cluster):
    """librdkafka's close sends the leave while its last ShareFetch still waits at the
    agent: a record committed then is not acquired for the member that left (it would
    reach no application and come back counted), but first delivered to the others."""
    a = agent(cluster.key)
    share_topic(a.bootstrap, "work")
    leaver = Member(a.bootstrap, "sg", "work")
    other = Member(a.bootstrap, "sg", "work")
    try:
        assert leaver.fetch(max_records=100, max_bytes=1_000_000)[0] == []  # session open
        answered: list = []
        waiting = threading.Thread(
            target=lambda: answered.append(
                leaver.fetch_all(max_records=100, max_bytes=1_000_000, partitions=1,
                                 max_wait_ms=10_000)
            )
        )  # fmt: skip
        waiting.start()
        time.sleep(0.5)  # its ShareFetch waits at the agent (the test holds either way)
        left = leaver.leave(via=other.wire)  # its own connection waits for the ShareFetch
        assert left["error_code"] == 0 and left["member_epoch"] == -1
        produce(a.bootstrap, "work", 1)
        waiting.join(15)
        assert len(answered) == 1 and all(not acquired for _, acquired, _ in answered[0]), answered
        assert _held("sg") == []
        assert other.fetch(max_records=100, max_bytes=1_000_000)[0] == [(0, 0, 1)]
    finally:
        leaver.close()
        other.close()
