"""What the share-group tests share: a topic read from its start by a share group, its
group configs, producers, ShareConsumers polled to a count, and a member speaking
ShareGroupHeartbeat and ShareFetch by hand."""

from __future__ import annotations

import time

from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from core.kafka import ApiKey
from tests.agents.test_wire import Wire


def share_topic(
    bootstrap: str, name: str, partitions: int = 1, group: str = "sg", config=None
) -> None:
    """The topic (with `config`), and the group reading it from the start (the default is
    its end)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, config=config or {})])[name].result(15)
    group_configs_set(bootstrap, group, **{"share.auto.offset.reset": "earliest"})


def group_configs_set(bootstrap: str, group: str, **configs: str) -> None:
    """Set the share group's `configs` (IncrementalAlterConfigs of type GROUP)."""
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


def produce(bootstrap: str, topic: str, count: int, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, partition=partition)
    assert producer.flush(10) == 0


def share_consumer(bootstrap: str, group: str, topic: str, **conf) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **conf})
    consumer.subscribe([topic])
    return consumer


def poll_until(consumers, want: int, seconds: float = 15.0):
    got = {id(c): [] for c in consumers}
    deadline = time.monotonic() + seconds
    while sum(len(v) for v in got.values()) < want and time.monotonic() < deadline:
        for c in consumers:
            for m in c.poll(0.2):
                assert m.error() is None, m.error()
                got[id(c)].append(m)
    return got


VALUE = b"x" * 1024


def produce_one_batch_each(bootstrap: str, topic: str, count: int, partitions: int = 1) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for _ in range(count):
        for partition in range(partitions):
            producer.produce(topic, value=VALUE, partition=partition)
        assert producer.flush(10) == 0  # one record a batch: ~1.1 KB each


class Member:
    """A share group member speaking ShareGroupHeartbeat and ShareFetch v1 by hand."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.wire = Wire(bootstrap)
        self.group = group
        joined = self.wire.call(
            ApiKey.SHARE_GROUP_HEARTBEAT,
            1,
            {"group_id": group, "member_id": f"m-{id(self)}", "member_epoch": 0,
             "subscribed_topic_names": [topic]},
        )  # fmt: skip
        assert joined["error_code"] == 0, joined
        self.member_id = joined["member_id"]
        (assigned,) = joined["assignment"]["topic_partitions"]
        self.topic_id = assigned["topic_id"]
        self.epoch = 0

    def fetch(self, *, max_records: int, max_bytes: int) -> tuple[list[tuple[int, int, int]], int]:
        """(acquired (first, last, delivery count), bytes of record batches answered) of
        partition 0, the only one."""
        (part,) = self.fetch_all(max_records=max_records, max_bytes=max_bytes, partitions=1)
        return part[1], part[2]

    def fetch_all(
        self, *, max_records: int, max_bytes: int, partitions: int, max_wait_ms: int = 2000
    ) -> list[tuple[int, list[tuple[int, int, int]], int]]:
        """Each partition answered: (index, acquired, bytes of record batches)."""
        answer = self.wire.call(
            ApiKey.SHARE_FETCH,
            1,
            {"group_id": self.group, "member_id": self.member_id,
             "share_session_epoch": self.epoch, "max_wait_ms": max_wait_ms, "min_bytes": 1,
             "max_bytes": max_bytes, "max_records": max_records, "batch_size": max_records,
             "topics": [{"topic_id": self.topic_id,
                         "partitions": [{"partition_index": i, "acknowledgement_batches": []}
                                        for i in range(partitions) if self.epoch == 0]}],
             "forgotten_topics_data": []},
        )  # fmt: skip
        assert answer["error_code"] == 0, answer
        self.epoch += 1
        return [
            (part["partition_index"],
             [(a["first_offset"], a["last_offset"], a["delivery_count"])
              for a in part["acquired_records"]],
             len(part["records"] or b""))
            for topic in answer["responses"]
            for part in topic["partitions"]
        ]  # fmt: skip

    def leave(self, via: Wire | None = None) -> dict:
        """ShareGroupHeartbeat -1, over `via` (another connection) or its own."""
        return (via or self.wire).call(
            ApiKey.SHARE_GROUP_HEARTBEAT,
            1,
            {"group_id": self.group, "member_id": self.member_id, "member_epoch": -1,
             "subscribed_topic_names": None},
        )  # fmt: skip

    def close(self) -> None:
        self.wire.close()
