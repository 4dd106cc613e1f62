"""Share groups in the metadata store: the share-partition state's rules (acquire,
acknowledge, release, lock expiry, the delivery-count limit) as pure values, and the
agent-API calls `share/heartbeat` and `share/fetch` against the real database — one call
acquires a range, a batch of acknowledgements is applied in the same call, and a member
that leaves has its records released for the others."""

from __future__ import annotations

import pytest

from core.kafka.errors import ErrorCode as E
from metadata_store.models import Partition, SharePartition
from metadata_store.share_state import (
    ACCEPT,
    ACKNOWLEDGED,
    ACQUIRED,
    ARCHIVED,
    AVAILABLE,
    REJECT,
    RELEASE,
    InvalidRecordState,
    ShareState,
)

LIMIT = 3


def acquire(state: ShareState, member: str, n: int, until: int = 1_000, now: int = 0):
    return state.acquire(member, n, until=until, deadline_ms=now + 100, max_in_flight=1_000)


# -- the state, pure -----------------------------------------------------------------------


def test_two_members_acquire_disjoint_ranges_at_delivery_count_one():
    state = ShareState(0, 0)
    assert acquire(state, "a", 5, until=8) == [(0, 4, 1)]
    assert acquire(state, "b", 5, until=8) == [(5, 7, 1)]
    assert acquire(state, "a", 5, until=8) == []
    assert state.count(ACQUIRED) == 8


def test_accepting_at_the_head_moves_the_start_offset():
    state = ShareState(10, 10)
    acquire(state, "a", 4, until=20)
    state.acknowledge("a", 10, 11, [ACCEPT], LIMIT)
    state.compact()
    assert (state.start, state.end) == (12, 14)
    assert state.ranges == [[12, 13, ACQUIRED, 1, "a", 100]]


def test_release_redelivers_with_delivery_count_two_and_reject_never():
    state = ShareState(0, 0)
    acquire(state, "a", 2, until=2)
    state.acknowledge("a", 0, 1, [RELEASE, REJECT], LIMIT)
    state.compact()
    assert acquire(state, "b", 10, until=2) == [(0, 0, 2)]
    state.acknowledge("b", 0, 0, [ACCEPT], LIMIT)
    state.compact()
    assert (state.start, state.end, state.ranges) == (2, 2, [])


def test_an_expired_lock_makes_records_available_and_the_limit_archives_them():
    state = ShareState(0, 0)
    for delivery in range(1, LIMIT + 1):
        assert acquire(state, "a", 1, until=1, now=delivery * 1_000) == [(0, 0, delivery)]
        assert state.expire(delivery * 1_000 + 100, LIMIT)
    state.compact()
    assert state.ranges == [] and state.start == 1  # archived at the limit


def test_a_member_acknowledging_what_another_holds_is_refused_and_changes_nothing():
    state = ShareState(0, 0)
    acquire(state, "a", 3, until=3)
    before = [list(r) for r in state.ranges]
    with pytest.raises(InvalidRecordState):
        state.acknowledge("b", 0, 2, [ACCEPT], LIMIT)
    with pytest.raises(InvalidRecordState):
        state.acknowledge("a", 2, 5, [ACCEPT], LIMIT)
    assert state.ranges == before


def test_per_offset_types_split_and_merge_back():
    state = ShareState(0, 0)
    acquire(state, "a", 6, until=6)
    state.acknowledge("a", 0, 5, [ACCEPT, ACCEPT, RELEASE, ACCEPT, REJECT, RELEASE], LIMIT)
    state.compact()
    assert state.start == 2
    assert [r[2] for r in state.ranges] == [AVAILABLE, ACKNOWLEDGED, ARCHIVED, AVAILABLE]
    assert acquire(state, "b", 10, until=6) == [(2, 2, 2), (5, 5, 2)]


def test_a_leaving_member_releases_only_its_own_records():
    state = ShareState(0, 0)
    acquire(state, "a", 2, until=4)
    acquire(state, "b", 2, until=4)
    assert state.release_member("a", LIMIT)
    assert [(r[0], r[1], r[2]) for r in state.ranges] == [(0, 1, AVAILABLE), (2, 3, ACQUIRED)]


def test_records_given_back_are_uncounted_and_at_the_tail_never_acquired():
    state = ShareState(0, 0)
    acquire(state, "a", 2, until=10)
    state.acknowledge("a", 0, 1, [RELEASE], LIMIT)
    assert acquire(state, "a", 6, until=10) == [(0, 1, 2), (2, 5, 1)]
    state.give_back("b", 0, 5)  # not b's: nothing changes
    assert state.count(ACQUIRED) == 6
    state.give_back("a", 1, 5)  # past the fetch's MaxBytes
    state.compact()
    assert (state.start, state.end) == (0, 2)
    assert [r[:4] for r in state.ranges] == [[0, 0, ACQUIRED, 2], [1, 1, AVAILABLE, 1]]
    assert acquire(state, "b", 10, until=10) == [(1, 1, 2), (2, 9, 1)]


def test_in_flight_records_are_bounded():
    state = ShareState(0, 0)
    assert state.acquire("a", 500, until=10_000, deadline_ms=1, max_in_flight=300) == [(0, 299, 1)]


# -- the agent API, against the database ---------------------------------------------------


def _produce(cluster, topic_id: str, count: int) -> None:
    Partition.objects.filter(topic_id=topic_id, index=0).update(high_watermark=count)


def _join(agent_api, group: str, member: str, topics: list[str]) -> dict:
    return agent_api(
        "share/heartbeat",
        {"group_id": group, "member_id": member, "member_epoch": 0, "topics": topics},
    )


@pytest.mark.django_db
def test_members_get_every_partition_and_acquire_in_one_call(agent_api, alice):
    topic_id = agent_api.create_topic("jobs", 2)
    a = _join(agent_api, "g", "ma", ["jobs"])
    b = _join(agent_api, "g", "mb", ["jobs"])
    for answer in (a, b):
        assert answer["error_code"] == 0
        assert answer["assignment"] == [{"topic_id": topic_id, "partitions": [0, 1]}]
    assert b["member_epoch"] > a["member_epoch"]
    # auto.offset.reset latest: records produced once the group reads the partition.
    first = agent_api(
        "share/fetch",
        {"group_id": "g", "member_id": "ma",
         "partitions": [{"topic_id": topic_id, "partition": 0, "acquire": True}]},
    )  # fmt: skip
    assert first["partitions"][0]["acquired"] == []
    _produce(alice["cluster"], topic_id, 10)
    got_a = agent_api(
        "share/fetch",
        {"group_id": "g", "member_id": "ma", "max_records": 6,
         "partitions": [{"topic_id": topic_id, "partition": 0, "acquire": True}]},
    )  # fmt: skip
    got_b = agent_api(
        "share/fetch",
        {"group_id": "g", "member_id": "mb", "max_records": 6,
         "partitions": [{"topic_id": topic_id, "partition": 0, "acquire": True}]},
    )  # fmt: skip
    assert got_a["partitions"][0]["acquired"] == [[0, 5, 1]]
    assert got_b["partitions"][0]["acquired"] == [[6, 9, 1]]
    assert got_a["lock_ms"] == 30_000
    # Acknowledge and acquire in one call; b's records released when its share session
    # closes (a leave alone releases nothing: its session's last acknowledgements may
    # still come, as Kafka's).
    again = agent_api(
        "share/fetch",
        {"group_id": "g", "member_id": "ma",
         "partitions": [{"topic_id": topic_id, "partition": 0, "acquire": True,
                         "acks": [{"first": 0, "last": 5, "types": [ACCEPT]}]}]},
    )  # fmt: skip
    assert again["partitions"][0]["acquired"] == []
    left = agent_api("share/heartbeat", {"group_id": "g", "member_id": "mb", "member_epoch": -1})
    assert left["member_epoch"] == -1
    still = agent_api(
        "share/fetch",
        {"group_id": "g", "member_id": "ma",
         "partitions": [{"topic_id": topic_id, "partition": 0, "acquire": True}]},
    )  # fmt: skip
    assert still["partitions"][0]["acquired"] == []
    closed = agent_api(
        "share/fetch",
        {"group_id": "g", "member_id": "mb", "partitions": [], "release": True},
    )
    assert closed["partitions"] == []
    taken = agent_api(
        "share/fetch",
        {"group_id": "g", "member_id": "ma",
         "partitions": [{"topic_id": topic_id, "partition": 0, "acquire": True}]},
    )  # fmt: skip
    assert taken["partitions"][0]["acquired"] == [[6, 9, 2]]
    row = SharePartition.objects.get(group_id="g", partition__index=0)
    assert row.start_offset == 6 and row.end_offset == 10


@pytest.mark.django_db
def test_acknowledging_records_not_held_is_invalid_record_state(agent_api, alice):
    topic_id = agent_api.create_topic("jobs")
    _join(agent_api, "g", "ma", ["jobs"])
    answer = agent_api(
        "share/fetch",
        {"group_id": "g", "member_id": "ma",
         "partitions": [{"topic_id": topic_id, "partition": 0,
                         "acks": [{"first": 0, "last": 3, "types": [ACCEPT]}]}]},
    )  # fmt: skip
    assert answer["partitions"][0]["ack_error_code"] == E.INVALID_RECORD_STATE


@pytest.mark.django_db
def test_an_unknown_member_heartbeat_and_another_clusters_topic(agent_api, bob_agent_api):
    theirs = bob_agent_api.create_topic("jobs")
    answer = agent_api(
        "share/heartbeat", {"group_id": "g", "member_id": "nobody", "member_epoch": 3}
    )
    assert answer["error_code"] == E.UNKNOWN_MEMBER_ID
    fetched = agent_api(
        "share/fetch",
        {"group_id": "g", "member_id": "ma",
         "partitions": [{"topic_id": theirs, "partition": 0, "acquire": True}]},
    )  # fmt: skip
    assert fetched["partitions"][0]["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    assert not SharePartition.objects.exists()


@pytest.mark.django_db
def test_a_bad_body_is_a_400(agent_api):
    response = agent_api.raw(
        "share/fetch",
        {"group_id": "g", "member_id": "m",
         "partitions": [{"topic_id": "x", "partition": 0,
                         "acks": [{"first": 0, "last": 1, "types": [9]}]}]},
    )  # fmt: skip
    assert response.status_code == 400


@pytest.mark.django_db
def test_share_offsets_are_described_altered_and_deleted_in_the_clusters_own_groups(
    agent_api, bob_agent_api
):
    topic_id = agent_api.create_topic("jobs")
    bob_agent_api.create_topic("jobs")
    _join(agent_api, "g", "ma", ["jobs"])
    agent_api("share/heartbeat", {"group_id": "g", "member_id": "ma", "member_epoch": -1})
    altered = agent_api(
        "share/offsets/alter",
        {"group_id": "g", "topics": [{"topic_name": "jobs",
                                      "partitions": [{"partition_index": 0, "start_offset": 4}]}]},
    )  # fmt: skip
    assert altered["error_code"] == 0
    assert altered["responses"][0]["topic_id"] == topic_id
    described = agent_api("share/offsets/describe", {"groups": [{"group_id": "g"}]})
    assert described["groups"][0]["topics"][0]["partitions"][0]["start_offset"] == 4
    # Bob's cluster has a topic of the same name but no group g: none of alice's state.
    theirs = bob_agent_api("share/offsets/describe", {"groups": [{"group_id": "g"}]})
    assert theirs["groups"][0]["error_code"] == E.GROUP_ID_NOT_FOUND
    assert (
        bob_agent_api("share/offsets/delete", {"group_id": "g", "topics": ["jobs"]})["error_code"]
        == E.GROUP_ID_NOT_FOUND
    )
    assert SharePartition.objects.get(group_id="g").start_offset == 4
