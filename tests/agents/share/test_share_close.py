"""A share consumer's close on the wire: it leaves the group (ShareGroupHeartbeat -1) and
closes its share session with its last acknowledgements (ShareAcknowledge -1), in either
order — librdkafka sends the leave while a long-polling ShareFetch delays the session's
close. As Kafka's, the leave releases nothing, so the acknowledgements that follow it
still find the member's records (librdkafka's 0178 got INVALID_RECORD_STATE); the
session's close releases what is left unacknowledged, for the others at once."""

from __future__ import annotations

import pytest

from core.kafka import ApiKey
from tests.agents.share.conftest import Member, produce_one_batch_each, share_topic

pytestmark = pytest.mark.django_db(transaction=True)

ACCEPT = 1


def test_acknowledgements_after_the_leave_count_and_the_session_close_releases(agent, cluster):
    a = agent(cluster.key)
    share_topic(a.bootstrap, "work")
    produce_one_batch_each(a.bootstrap, "work", 6)
    leaver = Member(a.bootstrap, "sg", "work")
    other = None
    try:
        assert leaver.fetch(max_records=100, max_bytes=50_000_000)[0] == [(0, 5, 1)]
        left = leaver.leave()
        assert left["error_code"] == 0 and left["member_epoch"] == -1
        closed = leaver.wire.call(
            ApiKey.SHARE_ACKNOWLEDGE,
            1,
            {"group_id": "sg", "member_id": leaver.member_id, "share_session_epoch": -1,
             "topics": [{"topic_id": leaver.topic_id, "partitions": [
                 {"partition_index": 0, "acknowledgement_batches": [
                     {"first_offset": 0, "last_offset": 2, "acknowledge_types": [ACCEPT]}]}]}]},
        )  # fmt: skip
        assert closed["error_code"] == 0, closed
        (part,) = closed["responses"][0]["partitions"]
        assert part["error_code"] == 0, part  # the old code: INVALID_RECORD_STATE
        # 0-2 accepted; 3-5, never acknowledged, released by the session's close.
        other = Member(a.bootstrap, "sg", "work")
        assert other.fetch(max_records=100, max_bytes=50_000_000)[0] == [(3, 5, 2)]
    finally:
        leaver.close()
        if other is not None:
            other.close()
