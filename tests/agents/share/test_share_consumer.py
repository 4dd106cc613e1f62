"""confluent-kafka's ShareConsumer (KIP-932) against real agents."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import (
    AcknowledgeType,
    ConsumerGroupType,
    KafkaException,
    Producer,
    ShareConsumer,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from core.kafka import ApiKey
from core.kafka.errors import ErrorCode as E
from tests.agents.test_wire import Wire

pytestmark = pytest.mark.django_db(transaction=True)


def _topic(bootstrap: str, name: str, partitions: int = 1, group: str = "sg") -> None:
    """The topic, and the group reading it from the start (the default is its end)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions)])[name].result(10)
    _configure(bootstrap, group, **{"share.auto.offset.reset": "earliest"})


def _produce(bootstrap: str, topic: str, count: int, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, partition=partition)
    assert producer.flush(10) == 0


def _consumer(bootstrap: str, group: str, topic: str, **conf) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **conf})
    consumer.subscribe([topic])
    return consumer


def _poll_until(consumers, want: int, seconds: float = 15.0):
    got = {id(c): [] for c in consumers}
    deadline = time.monotonic() + seconds
    while sum(len(v) for v in got.values()) < want and time.monotonic() < deadline:
        for c in consumers:
            for m in c.poll(0.2):
                assert m.error() is None, m.error()
                got[id(c)].append(m)
    return got


def test_two_members_on_one_partition_share_its_records_once_each(agent, cluster):
    a = agent(cluster.key)
    _topic(a.bootstrap, "work")
    one = _consumer(a.bootstrap, "sg", "work", **{"max.poll.records": 20})
    two = _consumer(a.bootstrap, "sg", "work", **{"max.poll.records": 20})
    try:
        _produce(a.bootstrap, "work", 200)
        got = _poll_until([one, two], 200)
        offsets = [m.offset() for ms in got.values() for m in ms]
        assert sorted(offsets) == list(range(200))
        assert all(m.delivery_count() == 1 for ms in got.values() for m in ms)
        assert all(got.values()), "both members get records"
    finally:
        one.close()
        two.close()


def test_release_redelivers_at_count_two_and_reject_never(agent, cluster):
    a = agent(cluster.key)
    _topic(a.bootstrap, "work")
    c = _consumer(a.bootstrap, "sg", "work", **{"share.acknowledgement.mode": "explicit"})
    try:
        _produce(a.bootstrap, "work", 4)
        first = _poll_until([c], 4)[id(c)]
        assert [m.offset() for m in first] == [0, 1, 2, 3]
        kinds = [AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT,
                 AcknowledgeType.ACCEPT]  # fmt: skip
        for m, kind in zip(first, kinds, strict=True):
            c.acknowledge(m, kind)
        c.commit_sync()
        again = _poll_until([c], 1)[id(c)]
        assert [(m.offset(), m.delivery_count()) for m in again] == [(1, 2)]
        c.acknowledge(again[0], AcknowledgeType.ACCEPT)
        c.commit_sync()
        assert _poll_until([c], 1, 1.5)[id(c)] == []
    finally:
        c.close()


def _configure(bootstrap: str, group: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in configs.items()
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(10)


def test_a_member_that_leaves_gives_its_records_to_the_others(agent, cluster):
    a = agent(cluster.key)
    _topic(a.bootstrap, "work")
    explicit = {"share.acknowledgement.mode": "explicit"}
    leaver = _consumer(a.bootstrap, "sg", "work", **explicit)
    stayer = _consumer(a.bootstrap, "sg", "work", **explicit)
    try:
        _produce(a.bootstrap, "work", 5)
        held = _poll_until([leaver], 5)[id(leaver)]
        assert len(held) == 5
        leaver.close()  # without acknowledging
        again = _poll_until([stayer], 5)[id(stayer)]
        assert sorted((m.offset(), m.delivery_count()) for m in again) == [(i, 2) for i in range(5)]
    finally:
        stayer.close()


def test_an_expired_lock_redelivers_and_the_delivery_limit_archives(agent, cluster):
    """(With the group configs that set them, described and checked.)"""
    a = agent(cluster.key)
    _topic(a.bootstrap, "work")
    _configure(
        a.bootstrap,
        "sg",
        **{"share.record.lock.duration.ms": "1000", "share.delivery.count.limit": "2"},
    )
    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    described = admin.describe_configs([ConfigResource(ResourceType.GROUP, "sg")])
    configs = next(iter(described.values())).result(10)
    assert configs["share.delivery.count.limit"].value == "2"
    assert configs["share.heartbeat.interval.ms"].is_default
    with pytest.raises(KafkaException, match="between 2 and 10"):
        _configure(a.bootstrap, "sg", **{"share.delivery.count.limit": "50"})
    explicit = {"share.acknowledgement.mode": "explicit"}
    slow = _consumer(a.bootstrap, "sg", "work", **explicit)
    other = _consumer(a.bootstrap, "sg", "work", **explicit)
    try:
        _produce(a.bootstrap, "work", 1)
        got = _poll_until([slow], 1)[id(slow)]
        assert [(m.offset(), m.delivery_count()) for m in got] == [(0, 1)]
        # `slow` never acknowledges: after the lock's second the record is the other's.
        again = _poll_until([other], 1, 8.0)[id(other)]
        assert [(m.offset(), m.delivery_count()) for m in again] == [(0, 2)]
        other.acknowledge(again[0], AcknowledgeType.RELEASE)
        other.commit_sync()
        # Delivered twice, the limit: released, it is archived and never comes back.
        assert _poll_until([other], 1, 1.5)[id(other)] == []
    finally:
        slow.close()
        other.close()


def _share_fetches(process) -> float:
    """How many ShareFetch requests an agent answered (its /metrics)."""
    total = 0.0
    for line in process.metrics().splitlines():
        if line.startswith("floe_requests_total{") and 'api="SHARE_FETCH"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_members_on_two_agents_lose_nothing_when_one_is_killed(agent, cluster):
    a, b = agent(cluster.key), agent(cluster.key)
    _topic(a.bootstrap, "work")
    _configure(a.bootstrap, "sg", **{"share.record.lock.duration.ms": "1000"})
    explicit = {"share.acknowledgement.mode": "explicit"}
    both = f"{a.bootstrap},{b.bootstrap}"
    members = [
        _consumer(both, "sg", "work", **explicit, **{"client.id": f"m{i}", "max.poll.records": 20})
        for i in range(2)
    ]
    _produce(a.bootstrap, "work", 150)
    delivered: list[tuple[int, int]] = []
    accepted: set[int] = set()
    redelivered_accepted: list[int] = []
    killed = False
    deadline = time.monotonic() + 30
    try:
        while len({o for o, _ in delivered}) < 150 and time.monotonic() < deadline:
            for c in members:
                batch = [m for m in c.poll(0.2) if m.error() is None]
                for m in batch:
                    if m.offset() in accepted:
                        redelivered_accepted.append(m.offset())
                    delivered.append((m.offset(), m.delivery_count()))
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                if not batch:
                    continue
                try:
                    results = c.commit_sync()
                except KafkaException:
                    continue  # not known to be accepted: may come again
                if all(r.error is None for r in results or ()):
                    accepted.update(m.offset() for m in batch)
            if not killed and len(delivered) >= 50:
                assert len({o for o, _ in delivered}) < 150  # mid-stream
                serving = a if _share_fetches(a) >= _share_fetches(b) else b
                serving.kill()
                killed = True
        assert killed
        assert {o for o, _ in delivered} == set(range(150))
        assert redelivered_accepted == []
    finally:
        for c in members:
            c.close()


def test_read_committed_skips_aborted_transactions(agent, cluster):
    a = agent(cluster.key)
    _topic(a.bootstrap, "work")
    _configure(a.bootstrap, "sg", **{"share.isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": a.bootstrap, "transactional.id": "tx"})
    producer.init_transactions(10)
    for commit, values in ((True, [b"c1", b"c2"]), (False, [b"a1", b"a2"]), (True, [b"c3"])):
        producer.begin_transaction()
        for value in values:
            producer.produce("work", value=value, partition=0)
        producer.flush(10)
        (producer.commit_transaction if commit else producer.abort_transaction)(10)
    c = _consumer(a.bootstrap, "sg", "work")
    try:
        got = _poll_until([c], 3)[id(c)]
        assert [m.value() for m in got] == [b"c1", b"c2", b"c3"]
        assert _poll_until([c], 1, 1.5)[id(c)] == []
    finally:
        c.close()


def test_share_groups_are_listed_by_type_and_deleted_once_empty(agent, cluster):
    a = agent(cluster.key)
    _topic(a.bootstrap, "work")
    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    c = _consumer(a.bootstrap, "sg", "work")
    try:
        _poll_until([c], 1, 1.0)  # joined
        # confluent-kafka has no SHARE group type: ListGroups v5 as it is on the wire.
        wire = Wire(a.bootstrap)
        shares = wire.call(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["share"]})
        assert [(g["group_id"], g["group_type"], g["group_state"]) for g in shares["groups"]] == [
            ("sg", "share", "Stable")
        ]
        described = wire.call(
            ApiKey.SHARE_GROUP_DESCRIBE,
            1,
            {"group_ids": ["sg", "nope"], "include_authorized_operations": False},
        )["groups"]
        assert [g["error_code"] for g in described] == [0, E.GROUP_ID_NOT_FOUND]
        (member,) = described[0]["members"]
        assert member["subscribed_topic_names"] == ["work"]
        assert [(t["topic_name"], t["partitions"]) for t in
                member["assignment"]["topic_partitions"]] == [("work", [0])]  # fmt: skip
        classic = admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(10)
        assert [g.group_id for g in classic.valid] == []
        refused = admin.delete_consumer_groups(["sg"])["sg"]
        with pytest.raises(KafkaException, match="NON_EMPTY_GROUP"):
            refused.result(10)
    finally:
        c.close()
    admin.delete_consumer_groups(["sg"])["sg"].result(10)
    assert admin.list_consumer_groups().result(10).valid == []
