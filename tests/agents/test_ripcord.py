"""Ripcord (`--ripcord`) while the control plane is unreachable: an agent answers what it
can from what it knows — Metadata, ListOffsets, DescribeConfigs, FindCoordinator of the
groups it coordinates, Fetch of what was committed before (its tail index) — keeps a
consumer group's members (heartbeats answered from the coordinator's own state, offset
commits answered with a retriable error and stored once it is back), and says on
/healthz that it is degraded, not unhealthy. The link comes back by itself."""

from __future__ import annotations

import threading
import time

import pytest

from tests.agents.faults import TcpProxy

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka]

OUTAGE_S = 10
PARTITIONS = 3


class _Member(threading.Thread):
    """One member of a confluent-kafka consumer group: what it read and its rebalances."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        super().__init__(daemon=True)
        from confluent_kafka import Consumer

        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 30_000,
                "heartbeat.interval.ms": 500,
                "log_level": 0,
            }
        )
        self.topic = topic
        self.read: list[bytes] = []
        self.rebalances: list[float] = []
        self.assigned = 0
        self.commit_errors: list[str] = []
        self.commits_ok = 0
        self.stop = threading.Event()

    def run(self) -> None:
        def on_assign(_, partitions) -> None:
            self.rebalances.append(time.monotonic())
            self.assigned = len(partitions)

        def on_revoke(_, partitions) -> None:
            self.rebalances.append(time.monotonic())
            self.assigned = 0

        self.consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
        last_commit = time.monotonic()
        try:
            while not self.stop.is_set():
                message = self.consumer.poll(0.2)
                if message is not None and not message.error():
                    self.read.append(message.value())
                if self.assigned and time.monotonic() - last_commit > 1:
                    last_commit = time.monotonic()
                    try:
                        # Explicit offsets: a commit goes out even with nothing new read.
                        positions = self.consumer.position(self.consumer.assignment())
                        for position in positions:
                            position.offset = max(position.offset, 0)
                        self.consumer.commit(offsets=positions, asynchronous=False)
                        self.commits_ok += 1
                    except Exception as exc:  # a KafkaException: what the client saw
                        self.commit_errors.append(str(exc))
        finally:
            self.consumer.close()


def test_with_ripcord_an_agent_serves_its_clients_and_keeps_its_groups_through_an_outage(
    agent, cluster, live_server
):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    proxy = TcpProxy(int(live_server.url.rsplit(":", 1)[1]))
    members: list[_Member] = []
    try:
        a = agent(cluster.key, control_plane_url=proxy.url, extra=["--ripcord"])
        admin = AdminClient({"bootstrap.servers": a.bootstrap, "log_level": 0})
        admin.create_topics([NewTopic("kept", PARTITIONS, 1)])["kept"].result(30)
        producer = Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 0})
        for n in range(30):
            producer.produce("kept", value=b"%d" % n, partition=n % PARTITIONS)
        assert producer.flush(30) == 0
        described = admin.describe_configs([ConfigResource("topic", "kept")])
        before = {k: v.value for k, v in next(iter(described.values())).result(30).items()}

        members = [_Member(a.bootstrap, "kept", "kept-members") for _ in range(3)]
        for member in members:
            member.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
            sum(m.assigned for m in members) != PARTITIONS
            or sum(len(m.read) for m in members) < 30
            or not all(m.commits_ok for m in members if m.assigned)
        ):
            time.sleep(0.2)
        assert sum(m.assigned for m in members) == PARTITIONS
        assert sorted(int(v) for m in members for v in m.read) == list(range(30))
        time.sleep(1)
        settled = [len(m.rebalances) for m in members]
        status, text = a.health()
        assert (status, text) == (200, "ok\n")

        proxy.cut()
        cut = time.monotonic()
        # Metadata, DescribeConfigs, ListOffsets: from what the agent knows, at once.
        fresh = AdminClient({"bootstrap.servers": a.bootstrap, "log_level": 0})
        listed = fresh.list_topics("kept", timeout=10)
        assert len(listed.topics["kept"].partitions) == PARTITIONS
        described = fresh.describe_configs([ConfigResource("topic", "kept")])
        during = {k: v.value for k, v in next(iter(described.values())).result(10).items()}
        assert during == before
        reader = Consumer(
            {
                "bootstrap.servers": a.bootstrap,
                "group.id": "outage-reader",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 100,
                "log_level": 0,
            }
        )
        try:
            # Watermarks however old answer once the link has been down 2 s (a moment's
            # down is a slow answer as often as an outage).
            time.sleep(max(0.0, cut + 2.5 - time.monotonic()))
            low, high = reader.get_watermark_offsets(TopicPartition("kept", 0), timeout=10)
            assert (low, high) == (0, 10)
            # Fetch: what was committed before the outage, from the tail index.
            reader.assign([TopicPartition("kept", p, 0) for p in range(PARTITIONS)])
            got: list[bytes] = []
            until = time.monotonic() + 10
            while len(got) < 30 and time.monotonic() < until:
                message = reader.poll(0.2)
                if message is not None and not message.error():
                    got.append(message.value())
            assert sorted(int(v) for v in got) == list(range(30))
        finally:
            reader.close()
        status, text = a.health()
        assert status == 200 and "degraded: ripcord active" in text, (status, text)
        assert time.monotonic() - cut < OUTAGE_S, "the checks took the outage's length"
        time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - cut)))
        failed_commits = sum(len(m.commit_errors) for m in members)
        proxy.restore()
        restored = time.monotonic()

        # Back: commits are stored again, and nobody rebalanced at any point.
        ok_before = [m.commits_ok for m in members]
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not all(
            m.commits_ok > ok for m, ok in zip(members, ok_before, strict=True) if m.assigned
        ):
            time.sleep(0.2)
        back_s = time.monotonic() - restored
        assert all(
            m.commits_ok > ok for m, ok in zip(members, ok_before, strict=True) if m.assigned
        ), [m.commit_errors[-3:] for m in members]
        time.sleep(2)
        assert [len(m.rebalances) for m in members] == settled, "a member was dropped"
        assert failed_commits > 0, "commits during the outage were answered as stored"
        assert all("COORDINATOR_LOAD_IN_PROGRESS" in e for m in members for e in m.commit_errors)
        deadline = time.monotonic() + 10
        while a.health() != (200, "ok\n") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert a.health() == (200, "ok\n")
        print(
            f"outage {OUTAGE_S}s: {failed_commits} commits answered retriable, none stored; "
            f"members' commits stored again {back_s:.1f}s after; 0 rebalances"
        )
    finally:
        for member in members:
            member.stop.set()
        for member in members:
            member.join(30)
        proxy.close()
