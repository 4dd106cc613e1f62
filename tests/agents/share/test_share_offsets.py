"""DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets (KIP-932)
against a real agent. confluent-kafka's AdminClient has no share-group offset calls, so
they go on the wire as kafka-share-groups.sh sends them; the records come from
confluent-kafka's ShareConsumer."""

from __future__ import annotations

import pytest
from confluent_kafka import AcknowledgeType

from core.kafka import ApiKey
from core.kafka.errors import ErrorCode as E
from tests.agents.share.conftest import poll_until, produce, share_consumer, share_topic
from tests.agents.test_wire import Wire

pytestmark = pytest.mark.django_db(transaction=True)


def _describe(wire: Wire, group: str, topics=None, version: int = 1) -> dict:
    body = {"groups": [{"group_id": group, "topics": topics}]}
    (answer,) = wire.call(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, version, body)["groups"]
    return answer


def _starts(answer: dict) -> list[tuple]:
    return [
        (t["topic_name"], p["partition_index"], p["start_offset"], p["lag"], p["error_code"])
        for t in answer["topics"]
        for p in t["partitions"]
    ]


def _alter(wire: Wire, group: str, topic: str, *starts: tuple[int, int]) -> dict:
    partitions = [{"partition_index": i, "start_offset": o} for i, o in starts]
    return wire.call(
        ApiKey.ALTER_SHARE_GROUP_OFFSETS,
        0,
        {"group_id": group, "topics": [{"topic_name": topic, "partitions": partitions}]},
    )


def _delete(wire: Wire, group: str, *topics: str) -> dict:
    return wire.call(
        ApiKey.DELETE_SHARE_GROUP_OFFSETS,
        0,
        {"group_id": group, "topics": [{"topic_name": t} for t in topics]},
    )


def test_offsets_are_described_then_altered_and_deleted_once_the_group_is_empty(agent, cluster):
    a = agent(cluster.key)
    share_topic(a.bootstrap, "work")
    wire = Wire(a.bootstrap)
    c = share_consumer(a.bootstrap, "sg", "work", **{"share.acknowledgement.mode": "explicit"})
    try:
        versions = {
            v["api_key"]: (v["min_version"], v["max_version"])
            for v in wire.call(ApiKey.API_VERSIONS, 3, {})["api_keys"]
        }
        assert [versions.get(k) for k in (90, 91, 92)] == [(0, 1), (0, 0), (0, 0)]
        produce(a.bootstrap, "work", 10)
        got = poll_until([c], 10)[id(c)]
        for m in got[:4]:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        c.commit_sync()
        # 4 accepted: the start offset moved to 4; 6 not done with (held by the member).
        assert _starts(_describe(wire, "sg")) == [("work", 0, 4, 6, 0)]
        named = _describe(wire, "sg", [{"topic_name": "work", "partitions": [0, 5]}], version=0)
        assert [(p["start_offset"], p["error_code"]) for p in named["topics"][0]["partitions"]] == [
            (4, 0),
            (-1, E.UNKNOWN_TOPIC_OR_PARTITION),
        ]
        assert _describe(wire, "nope")["error_code"] == E.GROUP_ID_NOT_FOUND
        assert _alter(wire, "sg", "work", (0, 8))["error_code"] == E.NON_EMPTY_GROUP
        assert _delete(wire, "sg", "work")["error_code"] == E.NON_EMPTY_GROUP
    finally:
        c.close()  # leaves the group without acknowledging: it is empty now

    answer = _alter(wire, "sg", "work", (0, 8), (3, 1))
    assert answer["error_code"] == 0
    assert [
        (p["partition_index"], p["error_code"]) for p in answer["responses"][0]["partitions"]
    ] == [
        (0, 0),
        (3, E.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert _alter(wire, "sg", "work", (0, -2))["responses"][0]["partitions"][0]["error_code"] == (
        E.INVALID_REQUEST
    )
    assert _starts(_describe(wire, "sg")) == [("work", 0, 8, 2, 0)]
    c = share_consumer(a.bootstrap, "sg", "work")
    try:
        got = poll_until([c], 2)[id(c)]
        assert [(m.offset(), m.delivery_count()) for m in got] == [(8, 1), (9, 1)]
        assert poll_until([c], 1, 1.0)[id(c)] == []
    finally:
        c.close()

    answer = _delete(wire, "sg", "work", "missing")
    assert answer["error_code"] == 0
    assert [(t["topic_name"], t["error_code"]) for t in answer["responses"]] == [
        ("work", 0),
        ("missing", E.UNKNOWN_TOPIC_OR_PARTITION),
    ]
    assert _describe(wire, "sg")["topics"] == []
    assert _delete(wire, "sg", "work")["responses"][0]["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
    # Forgotten: the group reads from where share.auto.offset.reset says (earliest) again.
    c = share_consumer(a.bootstrap, "sg", "work")
    try:
        got = poll_until([c], 10)[id(c)]
        assert sorted(m.offset() for m in got) == list(range(10))
    finally:
        c.close()
        wire.close()


def test_a_group_never_seen_is_created_by_alter_and_starts_there(agent, cluster):
    """kafka-share-groups.sh --reset-offsets before any member joined (as Kafka)."""
    a = agent(cluster.key)
    share_topic(a.bootstrap, "work", group="other")
    produce(a.bootstrap, "work", 5)
    wire = Wire(a.bootstrap)
    try:
        assert _delete(wire, "fresh", "work")["error_code"] == E.GROUP_ID_NOT_FOUND
        assert _alter(wire, "fresh", "work", (0, 3))["error_code"] == 0
        c = share_consumer(a.bootstrap, "fresh", "work")
        try:
            got = poll_until([c], 2)[id(c)]
            assert [m.offset() for m in got] == [3, 4]
        finally:
            c.close()
    finally:
        wire.close()
