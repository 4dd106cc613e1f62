"""A share group member's share sessions are per agent (KIP-932: per broker): closing its
session with one agent releases what it acquired there, not what it holds through its
session with another agent, which still acknowledges (librdkafka's 0179 with partitions
led by two agents: its close sent the acknowledgements of one partition after the other
session's close, and got INVALID_RECORD_STATE)."""

from __future__ import annotations

import pytest

from core.kafka import ApiKey
from tests.agents.share.conftest import produce, share_topic
from tests.agents.test_wire import Wire

pytestmark = pytest.mark.django_db(transaction=True)


def _fetch(wire: Wire, member: str, topic_id, partition: int) -> list[tuple[int, int, int]]:
    answer = wire.call(
        ApiKey.SHARE_FETCH,
        1,
        {"group_id": "sg", "member_id": member, "share_session_epoch": 0, "max_wait_ms": 3000,
         "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 100, "batch_size": 100,
         "topics": [{"topic_id": topic_id,
                     "partitions": [{"partition_index": partition, "acknowledgement_batches": []}]}],
         "forgotten_topics_data": []},
    )  # fmt: skip
    assert answer["error_code"] == 0, answer
    return [
        (a["first_offset"], a["last_offset"], a["delivery_count"])
        for t in answer["responses"]
        for p in t["partitions"]
        for a in p["acquired_records"]
    ]


def _accept(wire: Wire, member: str, topic_id, partition: int, epoch: int, last: int) -> int:
    """ShareAcknowledge of offsets 0..last (ACCEPT): the partition's error code."""
    answer = wire.call(
        ApiKey.SHARE_ACKNOWLEDGE,
        1,
        {"group_id": "sg", "member_id": member, "share_session_epoch": epoch,
         "topics": [{"topic_id": topic_id, "partitions": [
             {"partition_index": partition, "acknowledgement_batches": [
                 {"first_offset": 0, "last_offset": last, "acknowledge_types": [1]}]}]}]},
    )  # fmt: skip
    assert answer["error_code"] == 0, answer
    ((part,),) = [t["partitions"] for t in answer["responses"]]
    return part["error_code"]


def test_closing_one_agents_session_leaves_the_other_sessions_records_held(agent, cluster):
    a, b = agent(cluster.key), agent(cluster.key)
    share_topic(a.bootstrap, "work", partitions=2)
    produce(a.bootstrap, "work", 3, partition=0)
    produce(a.bootstrap, "work", 3, partition=1)
    on_a, on_b, other = Wire(a.bootstrap), Wire(b.bootstrap), Wire(b.bootstrap)
    try:
        joined = on_a.call(
            ApiKey.SHARE_GROUP_HEARTBEAT,
            1,
            {"group_id": "sg", "member_id": "m1", "member_epoch": 0,
             "subscribed_topic_names": ["work"]},
        )  # fmt: skip
        assert joined["error_code"] == 0, joined
        member = joined["member_id"]
        (assigned,) = joined["assignment"]["topic_partitions"]
        topic_id = assigned["topic_id"]
        assert _fetch(on_a, member, topic_id, 0) == [(0, 2, 1)]
        assert _fetch(on_b, member, topic_id, 1) == [(0, 2, 1)]
        # The member closes its session with b first (its last acknowledgements with it)…
        assert _accept(on_b, member, topic_id, 1, -1, 2) == 0
        # …then acknowledges what it holds through its session with a, still open.
        assert _accept(on_a, member, topic_id, 0, 1, 2) == 0
        # Closing a's session releases what is still held there (nothing now), and
        # nothing of partition 0 comes back: it was accepted.
        assert _accept(on_a, member, topic_id, 0, -1, 2) != 0
        assert _fetch(other, member, topic_id, 0) == []
    finally:
        for wire in (on_a, on_b, other):
            wire.close()
