"""Group members driven by real Kafka clients, each in its own thread, and the shared
scenario: three members share the partitions, a fourth joins, one leaves, and every
message is consumed exactly once across the group.

Each member commits synchronously after every batch it processes and when partitions
are revoked, so a clean rebalance never replays or skips a record.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable

SESSION_TIMEOUT_MS = 6000
HEARTBEAT_MS = 500
# The rebalance timeout (max.poll.interval.ms) bounds how long a rebalance may wait for
# a member; the clients' 5-minute default would make a stuck test slow to fail.
REBALANCE_TIMEOUT_MS = 15000


def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str) -> float:
    """Poll until `predicate()`; returns the seconds it took."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"not within {timeout_s}s: {what}")
        time.sleep(0.05)
    return time.monotonic() - started


class Member(threading.Thread):
    """A consumer in the group; `assigned` is its current partitions, `records` every
    (partition, offset) it processed."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str, **options) -> None:
        super().__init__(name=name, daemon=True)
        self.bootstrap, self.group, self.topic, self.options = bootstrap, group, topic, options
        self.client_id = name
        self.assigned: frozenset[int] = frozenset()
        self.records: list[tuple[int, int]] = []
        self.errors: list[str] = []
        self.stopping = threading.Event()
        self.closed = threading.Event()

    def stop(self, timeout_s: float = 20.0) -> None:
        """Leave the group (the client's clean close) and wait for it."""
        self.stopping.set()
        self.join(timeout_s)
        assert not self.is_alive(), f"{self.name} did not close"

    def run(self) -> None:
        try:
            self.consume()
        except Exception as exc:  # surfaced by the scenario's checks
            self.errors.append(repr(exc))
        finally:
            self.assigned = frozenset()
            self.closed.set()

    def consume(self) -> None:
        raise NotImplementedError

    def assigned_to(self, consumer, partitions: list[int]) -> None:
        """Called by the client's rebalance callback with each new assignment."""

    def consumer_kwargs(self) -> dict:
        """Keyword arguments for confluent-kafka's Consumer besides its config."""
        return {}


class ConfluentMember(Member):
    # Group settings of the classic protocol (the KIP-848 one keeps them broker-side).
    GROUP_SETTINGS = {
        "session.timeout.ms": SESSION_TIMEOUT_MS,
        "heartbeat.interval.ms": HEARTBEAT_MS,
    }

    def subscribe(self, consumer, commit: Callable[[], None]) -> None:
        consumer.subscribe(
            [self.topic],
            on_assign=lambda c, tps: self.assigned_to(c, [tp.partition for tp in tps]),
            on_revoke=lambda *_: commit(),
        )

    def consume(self) -> None:
        from confluent_kafka import Consumer, KafkaException

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "client.id": self.client_id,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                **self.GROUP_SETTINGS,
                "max.poll.interval.ms": REBALANCE_TIMEOUT_MS,
                "fetch.wait.max.ms": 100,
                "topic.metadata.refresh.interval.ms": 2000,
                **self.options,
            },
            **self.consumer_kwargs(),
        )

        def commit() -> None:
            try:
                consumer.commit(asynchronous=False)
            except KafkaException as exc:
                # _DESTROY: the revoke's commit inside close() raced the handle's
                # teardown; the run's check of the committed offsets covers what it held.
                closing = self.stopping.is_set() and "_DESTROY" in str(exc)
                if "NO_OFFSET" not in str(exc) and not closing:
                    self.errors.append(f"commit: {exc}")

        self.subscribe(consumer, commit)
        try:
            while not self.stopping.is_set():
                batch = consumer.consume(100, 0.2)
                good = [m for m in batch if not m.error()]
                self.records.extend((m.partition(), m.offset()) for m in good)
                if good:
                    commit()
                self.assigned = frozenset(tp.partition for tp in consumer.assignment())
        finally:
            consumer.close()


class Ownership:
    """Who owns each partition, as the members' own rebalance callbacks say: a partition
    assigned to one member while another still holds it is a `violations` entry."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owners: dict[int, str] = {}
        self.violations: list[str] = []
        self.releases = 0  # partitions revoked or lost, all members together

    def assigned(self, member: str, partitions: list[int]) -> None:
        with self.lock:
            for p in partitions:
                holder = self.owners.get(p)
                if holder is not None and holder != member:
                    self.violations.append(f"{p} assigned to {member} while {holder} owns it")
                self.owners[p] = member

    def released(self, member: str, partitions: list[int]) -> None:
        with self.lock:
            self.releases += len(partitions)
            for p in partitions:
                if self.owners.get(p) == member:
                    del self.owners[p]


class ConsumerProtocolMember(ConfluentMember):
    """confluent-kafka with KIP-848's `group.protocol=consumer`: the coordinator assigns,
    the callbacks get the partitions added and taken away (incremental). Session timeout
    and heartbeat interval are the cluster's (librdkafka refuses them client-side)."""

    GROUP_SETTINGS = {"group.protocol": "consumer"}

    def __init__(self, *args, ownership: Ownership | None = None, **options) -> None:
        super().__init__(*args, **options)
        self.ownership = ownership or Ownership()

    def subscribe(self, consumer, commit: Callable[[], None]) -> None:
        def on_assign(c, tps) -> None:
            self.ownership.assigned(self.name, [tp.partition for tp in tps])

        def on_revoke(c, tps) -> None:
            commit()  # before the partitions go: the next owner starts from here
            self.ownership.released(self.name, [tp.partition for tp in tps])

        def on_lost(c, tps) -> None:
            self.ownership.released(self.name, [tp.partition for tp in tps])

        consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)


class KafkaPythonMember(Member):
    def consume(self) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer

        # kafka-python commits synchronously before it rejoins when auto-commit is on
        # (a blocking commit from a rebalance listener is not allowed in its IO thread).
        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            client_id=self.client_id,
            auto_offset_reset="earliest",
            enable_auto_commit=True,
            auto_commit_interval_ms=60000,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            max_poll_interval_ms=REBALANCE_TIMEOUT_MS,
            fetch_max_wait_ms=100,
            metadata_max_age_ms=2000,
            **self.options,
        )
        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                pass

            def on_partitions_assigned(self, assigned):
                member.assigned_to(consumer, [tp.partition for tp in assigned])

        consumer.subscribe([self.topic], listener=Listener())
        try:
            while not self.stopping.is_set():
                batch = consumer.poll(timeout_ms=200)
                got = [(tp.partition, r.offset) for tp, rs in batch.items() for r in rs]
                self.records.extend(got)
                if got:
                    consumer.commit()
                self.assigned = frozenset(tp.partition for tp in consumer.assignment())
        finally:
            consumer.close()


class AiokafkaMember(Member):
    def consume(self) -> None:
        asyncio.run(self._consume())

    async def _consume(self) -> None:
        from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
        from aiokafka.errors import IllegalStateError, KafkaError

        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            client_id=self.client_id,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_MS,
            max_poll_interval_ms=REBALANCE_TIMEOUT_MS,
            rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
            fetch_max_wait_ms=100,
            metadata_max_age_ms=2000,
            **self.options,
        )
        member = self

        class CommitOnRevoke(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked):
                if not revoked:
                    return
                try:
                    await consumer.commit()
                except KafkaError as exc:
                    member.errors.append(f"commit: {exc!r}")

            async def on_partitions_assigned(self, assigned):
                member.assigned_to(consumer, [tp.partition for tp in assigned])

        await consumer.start()
        consumer.subscribe([self.topic], listener=CommitOnRevoke())
        try:
            while not self.stopping.is_set():
                batch = await consumer.getmany(timeout_ms=200)
                got = [(tp.partition, r.offset) for tp, rs in batch.items() for r in rs]
                self.records.extend(got)
                if got:
                    try:
                        await consumer.commit()
                    except IllegalStateError:
                        pass  # revoked meanwhile: the listener committed them
                self.assigned = frozenset(tp.partition for tp in consumer.assignment())
        finally:
            await consumer.stop()


class BackgroundProducer(threading.Thread):
    """Produces round-robin over the partitions until stopped; `produced` holds the
    (partition, offset) of every acknowledged record."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, *, per_tick: int = 12):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.partitions, self.per_tick = (
            bootstrap,
            topic,
            partitions,
            per_tick,
        )
        self.produced: list[tuple[int, int]] = []
        self.failed: list[str] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Producer

        producer = Producer(
            {"bootstrap.servers": self.bootstrap, "linger.ms": 5, "message.timeout.ms": 30000}
        )

        def delivered(err, msg):
            if err is not None:
                self.failed.append(str(err))
            else:
                self.produced.append((msg.partition(), msg.offset()))

        n = 0
        while not self.stopping.is_set():
            for _ in range(self.per_tick):
                producer.produce(
                    self.topic,
                    value=b"m%d" % n,
                    partition=n % self.partitions,
                    on_delivery=delivered,
                )
                n += 1
            producer.poll(0.1)
        assert producer.flush(30) == 0

    def finish(self) -> set[tuple[int, int]]:
        self.stopping.set()
        self.join(40)
        assert not self.failed, self.failed[:3]
        return set(self.produced)


def balanced(members: list[Member], partitions: int) -> bool:
    """Every member holds something, nobody holds a partition twice, all are held."""
    held = [m.assigned for m in members]
    return (
        all(held)
        and sum(len(h) for h in held) == partitions
        and frozenset().union(*held) == frozenset(range(partitions))
    )


def consumed_exactly_once(members: list[Member], produced: set[tuple[int, int]]) -> None:
    seen = Counter(r for m in members for r in m.records)
    duplicates = [r for r, n in seen.items() if n > 1]
    missing = produced - set(seen)
    assert not missing, f"{len(missing)} records never consumed, e.g. {sorted(missing)[:5]}"
    assert not duplicates, f"{len(duplicates)} records consumed twice, e.g. {duplicates[:5]}"


# Under the cooperative protocol members keep consuming while they rejoin, so a commit
# may carry the generation that just ended: Kafka refuses it (the next commit covers it).
REBALANCE_COMMIT_RACES = ("ILLEGAL_GENERATION", "REBALANCE_IN_PROGRESS")


def run_group_scenario(
    bootstrap: str,
    topic: str,
    make: Callable[[int], Member],
    *,
    partitions: int = 6,
    cooperative: bool = False,
) -> dict[str, float]:
    """Three members share `partitions`; a fourth joins; one leaves; every produced record
    is consumed exactly once. Returns how long each rebalance took."""
    producer = BackgroundProducer(bootstrap, topic, partitions)
    members = [make(i) for i in range(3)]
    everyone = list(members)
    try:
        for m in members:
            m.start()
        producer.start()
        wait_until(lambda: balanced(members, partitions), 30, "three members share the partitions")
        assert all(len(m.assigned) == 2 for m in members), [m.assigned for m in members]

        fourth = make(3)
        everyone.append(fourth)
        members.append(fourth)
        fourth.start()
        join_s = wait_until(
            lambda: balanced(members, partitions),
            SESSION_TIMEOUT_MS / 1000,
            "rebalance after a fourth member joined",
        )

        leaving = members.pop(1)
        started = time.monotonic()
        leaving.stop()
        leave_s = wait_until(
            lambda: balanced(members, partitions),
            SESSION_TIMEOUT_MS / 1000,
            "rebalance after a member left",
        ) + (time.monotonic() - started)

        produced = producer.finish()
        wait_until(
            lambda: set(r for m in everyone for r in m.records) >= produced,
            30,
            "every produced record consumed",
        )
    finally:
        producer.stopping.set()
        for m in everyone:
            if m.is_alive():
                m.stop()
    errors = [e for m in everyone for e in m.errors]
    if cooperative:
        errors = [e for e in errors if not any(race in e for race in REBALANCE_COMMIT_RACES)]
    assert not errors, errors[:5]
    consumed_exactly_once(everyone, produced)
    return {"join_s": join_s, "leave_s": leave_s, "records": len(produced)}
