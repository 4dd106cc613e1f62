"""A migration's lease and its groups, end to end (issue 38): Tansu as the source, Floe
agents with the jobs role as copiers, real confluent-kafka clients.

- A copier held past its lease (its calls to the control plane held by a proxy, as a
  paused process's would be) is fenced: a second copier takes the migration over, the
  first one's late commit is refused (409) and it stops; the mirror's records equal the
  source's, none lost, none twice.
- A consumer calling `committed()` for a group on Floe every 3 s, from before the
  migration starts, does not stop the group's offsets being copied; a consumer that
  joins the group in Floe makes it Floe's: never overwritten again.
"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from metadata_store.models import Lease, Partition
from tests.agents.clients import fetch_watermarks
from tests.agents.faults import FaultyProxy
from tests.agents.tansu import Tansu
from tests.agents.test_migration import _commit_group, _migrate, _read_all
from virtualclusters.mirror.models import MigrationTopic

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

LEASE_S = 10  # the copiers' lease (--migration-lease-s): the smallest allowed
HOLD_S = LEASE_S + 12  # past the lease, and past the second copier's next lease poll (2 s)


@pytest.fixture
def tansu(tmp_path):
    source = Tansu(tmp_path / "tansu.log").start()
    yield source
    source.stop()


class Producing:
    """Records produced to the source in the background, keyed by their number, until
    `stop()`; `count` is how many the source acknowledged."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, per_s: int) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.topic, self.partitions, self.per_s = topic, partitions, per_s
        self.count = 0
        self.errors: list = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Producing:
        self._thread.start()
        return self

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            for _ in range(self.per_s // 10):
                self.producer.produce(
                    self.topic,
                    key=b"k%d" % i,
                    value=b"%07d" % i * 16,
                    partition=i % self.partitions,
                    on_delivery=lambda err, _msg: self.errors.append(err) if err else None,
                )
                i += 1
            self.producer.poll(0)
            time.sleep(0.1)
        assert self.producer.flush(30) == 0
        self.count = i

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(40)
        self.producer = None  # (gone: no reconnecting to a stopped source)
        assert not self.errors, self.errors[:3]
        return self.count


def _wait_equal(source: str, floe: str, topic: str, partitions: int, timeout_s: float) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        want = fetch_watermarks(source, topic, partitions)
        # (Asked before the copier made the topic, Floe would auto-create it: the client
        # asks for that.)
        have: dict = {}
        if MigrationTopic.objects.filter(name=topic, state="mirroring").exists():
            try:
                have = fetch_watermarks(floe, topic, partitions)
            except Exception as exc:  # noqa: BLE001 - a partition not answering yet
                have = {"error": repr(exc)}
        if have == want:
            return want
        assert time.monotonic() < deadline, (
            f"not equal: source {want}, floe {have}; migration: "
            f"{list(MigrationTopic.objects.values('name', 'state', 'error', 'partitions'))}"
        )
        time.sleep(0.5)


def test_a_copier_held_past_its_lease_is_fenced_and_the_mirror_stays_equal(
    agent, cluster, tansu, live_server
):
    topic, partitions = "events", 3
    admin = AdminClient({"bootstrap.servers": tansu.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)
    producing = Producing(tansu.bootstrap, topic, partitions, per_s=300).start()

    held_until = [0.0]

    def hold(path: str, _body: bytes) -> float:
        """The first agent's copier calls, held while armed, as a paused process's: its
        commits until the end, its reports and lease requests a second longer (its late
        commit reaches the store first)."""
        left = held_until[0] - time.monotonic()
        if left <= 0:
            return 0.0
        if path.endswith("/mirror/commit"):
            return left
        if "/migrations/" in path:
            return left + 1.0
        return 0.0

    proxy = FaultyProxy(live_server.url, hold=hold)
    lease = ["--migration-lease-s", str(LEASE_S)]
    try:
        first = agent(cluster.key, control_plane_url=proxy.url, extra=lease)
        api, url, migration = _migrate(
            cluster, {"source_bootstrap": tansu.bootstrap, "topics": topic}
        )
        deadline = time.monotonic() + 30
        while not Partition.objects.filter(topic__name=topic, high_watermark__gt=100).exists():
            assert time.monotonic() < deadline, api.get(f"{url}{migration}/").json()
            time.sleep(0.1)
        assert api.get(f"{url}{migration}/").json()["lease_agent"] == first.agent_id
        second = agent(cluster.key, extra=lease)

        held_until[0] = time.monotonic() + HOLD_S  # the first copier stands still
        armed = time.monotonic()
        deadline = time.monotonic() + HOLD_S
        while api.get(f"{url}{migration}/").json()["lease_agent"] != second.agent_id:
            if time.monotonic() > deadline:
                from django.db import connection

                with connection.cursor() as c:
                    c.execute("select clock_timestamp()")
                    now = c.fetchone()
                open("/tmp/mirrorg-diag.txt", "w").write(
                    f"{now}\n{list(Lease.objects.values())}\n{proxy.answered}\n{second.logs()}\n"
                    f"FIRST\n{first.logs()}"
                )
                raise AssertionError("the second copier never took over")
            time.sleep(0.2)
        taken_over = time.monotonic()
        print(f"taken over {taken_over - armed:.1f} s after the first copier was held")
        # The first copier's held commit reaches the store after the takeover: refused.
        deadline = held_until[0] + 10
        while ("/agent/v1/mirror/commit", 409) not in proxy.answered:
            assert time.monotonic() < deadline, proxy.answered[-10:]
            time.sleep(0.2)
        assert taken_over < held_until[0]
        deadline = time.monotonic() + 10  # it drops the lease (logged) and stops copying
        while "superseded" not in first.logs():
            assert time.monotonic() < deadline, first.logs()[-3000:]
            time.sleep(0.2)
        refused_at = len(proxy.answered)

        count = producing.stop()
        want = _wait_equal(tansu.bootstrap, second.bootstrap, topic, partitions, 60)
        assert sum(end for _, end in want.values()) == count
        ends = {p: want[p][1] for p in range(partitions)}
        assert _read_all(second.bootstrap, topic, partitions, ends) == _read_all(
            tansu.bootstrap, topic, partitions, ends
        )
        # The first copier committed nothing after its refusal.
        assert ("/agent/v1/mirror/commit", 200) not in proxy.answered[refused_at:]
        assert api.get(f"{url}{migration}/").json()["lease_agent"] == second.agent_id
    finally:
        producing.stop() if producing._thread.is_alive() else None
        proxy.close()


class CommittedPoller:
    """A consumer of `group` on Floe that only asks for its committed offsets (OffsetFetch)
    every 3 s, as a lag exporter or an early-created consumer would; never joins."""

    def __init__(self, bootstrap: str, group: str, topic: str, partitions: int) -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        self.partitions = [TopicPartition(topic, p) for p in range(partitions)]
        self.seen: list[tuple[float, dict[int, int]]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> CommittedPoller:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    answer = self.consumer.committed(self.partitions, timeout=10)
                    self.seen.append((time.monotonic(), {tp.partition: tp.offset for tp in answer}))
                except Exception as exc:  # noqa: BLE001 - kept and shown
                    self.errors.append(repr(exc))
                self._stop.wait(3)
        finally:
            self.consumer.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(20)


def test_a_group_read_on_floe_all_along_is_copied_and_one_joined_there_is_not_overwritten(
    agent, cluster, tansu
):
    topic, partitions, group = "payments", 3, "billing-1"
    admin = AdminClient({"bootstrap.servers": tansu.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)
    producer = Producer({"bootstrap.servers": tansu.bootstrap, "linger.ms": 5})
    for i in range(900):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % partitions)
    assert producer.flush(30) == 0
    source_offsets = {0: 120, 1: 77, 2: 250}
    _commit_group(tansu.bootstrap, group, topic, source_offsets)

    floe = agent(cluster.key)
    poller = CommittedPoller(floe.bootstrap, group, topic, partitions).start()
    try:
        deadline = time.monotonic() + 15
        while len(poller.seen) < 2:  # it reads the group before the migration exists
            assert time.monotonic() < deadline, poller.errors
            time.sleep(0.2)
        api, url, migration = _migrate(
            cluster, {"source_bootstrap": tansu.bootstrap, "topics": topic, "groups": "billing-.*"}
        )
        want = _wait_equal(tansu.bootstrap, floe.bootstrap, topic, partitions, 60)
        assert all(want[p][1] >= source_offsets[p] for p in source_offsets)
        reached = time.monotonic()  # the mirror holds the group's offsets
        deadline = reached + 30
        while not poller.seen or poller.seen[-1][1] != source_offsets:
            assert time.monotonic() < deadline, (
                poller.seen[-3:],
                poller.errors,
                api.get(f"{url}{migration}/").json()["groups"],
            )
            time.sleep(0.2)
        copied_after = poller.seen[-1][0] - reached
        print(f"the group's offsets seen on Floe {copied_after:.1f} s after the mirror had them")
        detail = api.get(f"{url}{migration}/").json()
        assert detail["groups"][group]["state"] == "copied", detail["groups"]

        # A consumer joins the group in Floe: from then on the group is Floe's.
        member = Consumer(
            {"bootstrap.servers": floe.bootstrap, "group.id": group, "enable.auto.commit": False}
        )
        try:
            member.subscribe([topic])
            deadline = time.monotonic() + 30
            while not member.assignment():
                assert time.monotonic() < deadline, "the consumer never joined"
                member.poll(0.2)
            _commit_group(tansu.bootstrap, group, topic, {0: 300, 1: 300, 2: 300})
            deadline = time.monotonic() + 20
            while not detail["groups"][group]["state"].startswith("active in Floe"):
                assert time.monotonic() < deadline, detail["groups"]
                time.sleep(0.5)
                detail = api.get(f"{url}{migration}/").json()
                member.poll(0)
            assert "a consumer joined at" in detail["groups"][group]["state"]
            seen = poller.seen[-1][1]
            assert seen == source_offsets, seen  # not overwritten
        finally:
            member.close()
    finally:
        poller.stop()
    assert not poller.errors, poller.errors[:3]
