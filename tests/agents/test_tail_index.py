"""The tail index against the metadata store's own plan (issue 28).

The store's notifications are read from a real LISTEN connection, relayed by a real
relay (``feed_relay.Relay``) and applied by the agent's own ``TailFeed``; each step
changes the store through its real calls (commits, DeleteRecords, retention, a
compaction swap, transactions committed and aborted) or the feed (a reconnect loses what
was in flight). Whenever the index has caught up with the feed, its plan for any request
is the store's plan for it, or None. Answers are shared through the agent's own read path
(``read_path.fill``, as a Fetch is), over the real bytes of every committed batch: a shared
answer given out later is the answer the store's plan gives then.
"""

from __future__ import annotations

import asyncio
import itertools
import struct
from types import SimpleNamespace
from typing import Any

import msgspec
import psycopg
import pytest
from django.db import connection, transaction
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from agents import read_path, tail_index
from agents.partition_offsets import PartitionOffsets
from agents.tail_feed import TailFeed
from agents.write_path import CommitWatch
from core.kafka.records import RecordInput, encode_batch
from metadata_store import retention, rewrites, store, tail_feed
from metadata_store.agent_api import schemas
from metadata_store.agent_api.feed_relay import NAMES_SQL, Relay
from tests.metadata_store.conftest import AgentApi, batch
from tests.metadata_store.test_transactions import Txn

pytestmark = pytest.mark.django_db(transaction=True)
PARTITIONS = 2
_names = itertools.count()


class Feed:
    """The store's notifications → a relay → the agent's feed and index."""

    def __init__(self, cluster_id: int) -> None:
        self.cluster_id = cluster_id
        self.relay = Relay(lookup=self.lookup)
        self.relay.restart(live=True)
        self.watch = CommitWatch()
        self.feed = TailFeed(None, self.watch)  # type: ignore[arg-type]
        params = connection.get_connection_params()
        kept = {k: v for k, v in params.items() if isinstance(v, str | int) and v != ""}
        kept.pop("client_encoding", None)
        self.listener = psycopg.connect(**kept, autocommit=True)
        self.names = psycopg.connect(**kept, autocommit=True)
        self.listener.add_notify_handler(lambda note: self.relay.add(note.payload))
        self.listener.execute("LISTEN floe_tail")
        self.catch_up()  # the agent's first poll: a reset to the relay's position

    async def lookup(self, pids: list[int]) -> list:
        """As the relay's own (``Relay.run``)."""
        return self.names.execute(NAMES_SQL, [pids]).fetchall()

    def close(self) -> None:
        self.listener.close()
        self.names.close()

    def position(self) -> tuple[str, int]:
        """The relay's (epoch, seq) once every notification committed so far reached it."""
        self.listener.execute("SELECT 1")  # delivers what the backend holds
        return self.relay.epoch, self.relay.seq

    def catch_up_to(self, epoch: str, seq: int) -> None:
        """Only the notifications up to `(epoch, seq)` reach the index: one that lags the
        feed. A feed of another epoch (the relay restarted since) is reset instead."""
        self.listener.execute("SELECT 1")
        while not (self.feed.epoch == epoch and self.feed.seq >= seq):
            answer = asyncio.run(
                self.relay.poll_now(self.cluster_id, self.feed.epoch, self.feed.seq)
            )
            if answer is None:
                return
            if not answer["reset"] and self.feed.epoch == epoch:
                kept = [entry for entry in answer["entries"] if entry["seq"] <= seq]
                if len(kept) < len(answer["entries"]):
                    answer = {**answer, "entries": kept, "seq": seq}
            self.feed.take(answer)
            if self.feed.epoch != epoch:
                return

    def catch_up(self) -> None:
        """Every notification committed so far reaches the index."""
        self.listener.execute("SELECT 1")  # delivers what the backend holds
        while True:
            answer = asyncio.run(
                self.relay.poll_now(self.cluster_id, self.feed.epoch, self.feed.seq)
            )
            if answer is None:
                answer = {"epoch": self.relay.epoch, "seq": self.relay.seq, "live": True}
                answer.update(reset=False, entries=[], now_ms=0)
            self.feed.take(answer)
            if not answer["entries"] and not answer["reset"]:
                return


class Bucket:
    """The chunk cache's `read` over the bytes of the files the test committed."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}

    def prefetch(self, *_: object) -> None:
        pass

    async def read(self, key: str, pos: int, length: int) -> list[memoryview]:
        return [memoryview(self.files[key])[pos : pos + length]]


def _records(count: int, value_bytes: int) -> list[RecordInput]:
    return [RecordInput(key=None, value=b"v" * value_bytes, timestamp=1_700_000_000_000)] * count


class World:
    def __init__(self, api: AgentApi, alice: dict) -> None:
        self.api, self.alice = api, alice
        self.cluster = alice["cluster"]
        self.name = f"t{next(_names)}"
        self.topic = api.create_topic(self.name, PARTITIONS)
        self.files = 0
        self.bucket = Bucket()
        self.txn: Txn | None = None
        # The store's plans at past points of the feed: ((epoch, seq), [(request, isolation,
        # plan)]), compared with the index's once it has caught up to just that point.
        self.snapshots: list[tuple[tuple[str, int], list[tuple[list, int, Any]]]] = []
        self.shared: set[tuple[tuple, int]] = set()  # requests whose answers were kept

    def commit(self, parts: list[tuple[int, int, int]]) -> None:
        """One file of real record batches: (partition, records, bytes of each value)."""
        self.files += 1
        batches, data = [], bytearray()
        for partition, records, value_bytes in parts:
            encoded = encode_batch(_records(records, value_bytes))
            batches.append(
                batch(self.topic, partition, records, pos=len(data), length=len(encoded))
            )
            data += encoded + (b"\0" * 7 if records % 2 else b"")  # sometimes a gap: another run
        data += b"\0" * 10
        key = f"{self.cluster.public_id}/segments/{self.name}-{self.files}.seg"
        self.bucket.files[key] = bytes(data)
        self.api("commit", {"file_key": key, "size": len(data), "batches": batches})

    def state(self, partition: int) -> tuple[int, int]:
        answer = self.plan([(partition, 0, 1)], 1, 0)[0]
        return answer["log_start_offset"], answer["high_watermark"]

    def delete_records(self, partition: int, fraction: float) -> None:
        start, high = self.state(partition)
        offset = start + int((high - start) * fraction)
        self.api(
            "delete-records",
            {"partitions": [{"topic_id": self.topic, "partition": partition, "offset": offset}]},
        )

    def retention(self, partition: int, fraction: float) -> None:
        start, high = self.state(partition)
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT p.id FROM floe_partition p WHERE p.topic_id = %s AND p.index = %s",
                [self.topic, partition],
            )
            (pid,) = cursor.fetchone()
        retention.log_start_offsets_advance(moves={pid: start + int((high - start) * fraction)})
        retention.batches_below_log_start_delete(cluster_id=self.cluster.pk)

    def swap(self) -> None:
        """A compaction swap of the topic's oldest live level-0 file, placed anew."""
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT f.id FROM floe_file f WHERE f.cluster_id = %s AND f.level = 0"
                " AND f.state = 'live' AND f.key LIKE %s ORDER BY f.id LIMIT 1",
                [self.cluster.pk, f"%/segments/{self.name}-%"],
            )
            row = cursor.fetchone()
        if row is None:
            return
        planned = rewrites.batch_pointers([row[0]])
        key = f"{self.cluster.public_id}/compacted/{self.name}-{row[0]}.seg"
        placements, data = [], bytearray()
        for p in sorted(planned, key=lambda r: (r[0], r[4])):
            placements.append([p[0], p[4], key, len(data), p[7]])
            moved = bytearray(self.bucket.files[p[5]][p[6] : p[6] + p[7]])
            struct.pack_into(">q", moved, 0, p[3])  # a compacted file's batches carry their offsets
            data += moved
        self.bucket.files[key] = bytes(data)
        pos = len(data)
        with transaction.atomic():
            rewrites.compaction_swap(
                cluster_id=self.cluster.pk,
                input_file_ids=[row[0]],
                planned=planned,
                files=[{"key": key, "size": pos, "batch_count": len(planned)}],
                placements=placements,
            )

    def txn_write(self, partition: int) -> None:
        if self.txn is None:
            self.txn = Txn(self.api, self.alice, transactional_id=f"{self.name}-tx")
        if self.txn.add(self.name, partition) == [0]:
            seq = self.txn.seq.get((self.topic, partition), 0)
            encoded = encode_batch(
                _records(2, 30),
                producer_id=self.txn.pid,
                producer_epoch=self.txn.epoch,
                base_sequence=seq,
                is_transactional=True,
            )
            self.txn.produce(self.topic, partition, 2, length=len(encoded))
            self.bucket.files[self.txn.keys[-1]] = encoded.ljust(1000, b"\0")

    def txn_end(self, committed: bool) -> None:
        if self.txn is not None:
            self.txn.end(committed)

    def request(self, partitions: list[tuple[int, int, int]]) -> list[dict]:
        return [
            {"topic_id": self.topic, "partition": p, "offset": o, "max_bytes": m}
            for p, o, m in partitions
        ]

    def plan(self, partitions: list[tuple[int, int, int]], total: int, isolation: int):
        body = {"partitions": self.request(partitions), "max_bytes": total}
        body["isolation_level"] = isolation
        return self.api("fetch-plan", body)["partitions"]


PART = st.integers(0, PARTITIONS - 1)
STEP = st.one_of(
    st.tuples(
        st.just("commit"),
        st.lists(st.tuples(PART, st.integers(1, 5), st.integers(20, 200)), min_size=1, max_size=4),
    ),
    st.tuples(st.just("delete"), PART, st.floats(0, 1)),
    st.tuples(st.just("retention"), PART, st.floats(0, 1)),
    st.tuples(st.just("swap")),
    st.tuples(st.just("txn_write"), PART),
    st.tuples(st.just("txn_end"), st.booleans()),
    st.tuples(st.just("gap")),
    st.tuples(st.just("check")),
    st.tuples(st.just("snapshot")),
    st.tuples(st.just("snapshot")),  # twice as likely: lagging plans in most examples
)


def _snapshot(world: World, feed: Feed) -> None:
    """The store's plans now, at the feed's position now, for requests at and near each
    partition's tail and log start; `_check` makes the index catch up to just here."""
    position = feed.position()
    plans = []
    for partition in range(PARTITIONS):
        start, high = world.state(partition)
        offsets = {start, (start + high) // 2, *range(max(start, high - 3), high + 2)}
        for offset, max_bytes, isolation in itertools.product(offsets, (1, 150, 10**6), (0, 1)):
            request = world.request([(partition, offset, max_bytes)])
            plans.append(
                (request, isolation, world.plan([(partition, offset, max_bytes)], 10**6, isolation))
            )
    world.snapshots.append((position, plans))


def _check_lagging(world: World, feed: Feed, answered: list[int]) -> None:
    """An index that has applied the feed only up to a past point (it lags the store)
    answers what the store answered at that point, or refuses: never a run committed
    after it (past the high watermark it knows), never a plan that leaves out what was
    committed below it."""
    for position, plans in world.snapshots:
        feed.catch_up_to(*position)
        for request, isolation, theirs in plans:
            mine = feed.feed.plan(request, 10**6, isolation)
            if mine is not None:
                answered[1] += 1
                assert mine == theirs, (position, request, isolation)
    world.snapshots.clear()


def _check(world: World, feed: Feed, answered: list[int]) -> None:
    """Catch up (through every snapshot's point first); then the index's plan of every
    interesting request is the store's."""
    _check_lagging(world, feed, answered)
    feed.catch_up()
    _check_kept(world, feed, answered)  # kept at earlier checks, steps ago
    for partition in range(PARTITIONS):
        start, high = world.state(partition)
        held = feed.feed.index.get((world.topic, partition))
        offsets = {start, high, high + 1, (start + high) // 2}
        if held is not None:
            offsets |= {held.first_offset, held.first_offset + 1, held.high_watermark}
        for offset, max_bytes, isolation in itertools.product(offsets, (1, 150, 10**6), (0, 1)):
            wanted = [(partition, offset, max_bytes)]
            theirs = world.plan(wanted, 10**6, isolation)
            _check_shared(world, feed, wanted, isolation, theirs, answered)
            mine = feed.feed.plan(world.request(wanted), 10**6, isolation)
            # Issue 44: a Fetch waits without a plan exactly when the plan reads nothing.
            at_end = feed.feed.at_end([((world.topic, partition), offset)], isolation == 1)
            assert at_end == (mine is not None and not mine[0]["batches"]), (offset, isolation)
            if mine is not None:
                answered[0] += 1
                assert mine == theirs, (offset, max_bytes)
                _share(world, feed, wanted, isolation)
    _check_kept(world, feed, answered)  # kept just now
    # Both partitions at their tails, in one request sharing a small budget.
    tails = [(p, world.state(p)[1] - 1, 100) for p in range(PARTITIONS)]
    tails = [(p, max(o, world.state(p)[0]), m) for p, o, m in tails]
    for isolation in (0, 1):
        mine = feed.feed.plan(world.request(tails), 150, isolation)
        if mine is not None:
            answered[0] += 1
            assert mine == world.plan(tails, 150, isolation)


def _check_kept(world: World, feed: Feed, answered: list[int]) -> None:
    for wanted, isolation in world.shared:
        theirs = world.plan(list(wanted), 10**6, isolation)
        _check_shared(world, feed, wanted, isolation, theirs, answered)


class _NoControlPlane:
    async def call(self, name: str, body: dict) -> dict:
        raise AssertionError(f"{name}: the tail index planned this Fetch, fill must not ask")


def _agent(world: World, feed: Feed) -> SimpleNamespace:
    """What `read_path.fill` uses of an agent: the feed (its index and shared answers),
    its commit watch, the chunk cache (the world's bucket) and the offsets it learns."""
    return SimpleNamespace(
        tail=feed.feed,
        watch=feed.watch,
        cache=world.bucket,
        client=_NoControlPlane(),
        offsets=PartitionOffsets(),
        config=SimpleNamespace(cache_bytes=1 << 30, zone=""),
        known_zones=set,
    )


def _wanted(world: World, wanted: list) -> list[read_path.Wanted]:
    info = SimpleNamespace(topic_id_str=str(world.topic))
    return [
        read_path.Wanted(info, {"partition": p, "fetch_offset": o, "partition_max_bytes": m})  # type: ignore[arg-type]
        for p, o, m in wanted
    ]


def _encode(items: list[read_path.Wanted]) -> bytes:
    """A Fetch answer's partitions, as the fetch handler's encoder would carry them."""
    fields = ("error_code", "high_watermark", "last_stable_offset", "log_start_offset")
    return msgspec.json.encode(
        [
            {
                "partition": item.partition,
                **{f: item.answer[f] for f in fields},
                "aborted_transactions": item.answer["aborted_transactions"],
                "records": b"".join(item.answer["records"]),
            }
            for item in items
        ]
    )


def _share(world: World, feed: Feed, wanted: list, isolation: int) -> bool:
    """Fetch `wanted` through the agent's read path with a shareable answer, as the fetch
    handler does (`read_path.fill` with `share`): fill keeps it (or gives an answer it kept
    before) when the tail index planned it and it holds records. True when it did."""
    key = _keys(wanted, isolation)
    items = _wanted(world, wanted)
    body = {"max_bytes": 10**6, "min_bytes": 1, "max_wait_ms": 0, "isolation_level": isolation}
    encoded = asyncio.run(
        read_path.fill(
            _agent(world, feed), items, body, consumed=False, share=(key, lambda: _encode(items))
        )  # type: ignore[arg-type]
    )
    if encoded is None:
        return False
    world.shared.add((tuple(wanted), isolation))
    return True


def _keys(wanted: list, isolation: int) -> tuple[tuple, tuple]:
    """A request's keys as the fetch handler makes them: as sent, and sorted."""
    return (tuple(wanted), isolation), ("sorted", tuple(sorted(wanted)), isolation)


def _partitions(encoded: bytes) -> list:
    """An answer's partitions in a canonical order (clients match them by index)."""
    return sorted(msgspec.json.decode(encoded), key=msgspec.json.encode)


def _check_shared(
    world: World, feed: Feed, wanted: list, isolation: int, theirs: list, answered: list[int]
) -> None:
    """A shared answer still given out, after whatever happened since it was kept, is the
    answer the store's plan now gives (read from the same bytes)."""
    hit = feed.feed.shared_answer(_keys(wanted, isolation))
    wanted = list(wanted)
    if hit is not None:
        answered[2] += 1
        items = _wanted(world, wanted)
        asyncio.run(
            read_path._assemble(_agent(world, feed), items, theirs, 10**6, isolation == 1)  # type: ignore[arg-type]
        )
        assert _partitions(hit.body) == _partitions(_encode(items)), (
            wanted,
            isolation,
        )


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(STEP, min_size=3, max_size=14))
def test_a_plan_from_the_tail_index_is_the_stores_or_none(alice, steps):
    feed = Feed(alice["cluster"].pk)  # it hears the topic's creation: empty entries at 0
    world = World(AgentApi(alice["agent_key"]), alice)
    answered = [0, 0, 0]  # plans from the caught-up index, a lagging one, shared answers
    try:
        for step in steps:
            kind = step[0]
            if kind == "commit":
                world.commit(step[1])
            elif kind == "delete":
                world.delete_records(step[1], step[2])
            elif kind == "retention":
                world.retention(step[1], step[2])
            elif kind == "swap":
                world.swap()
            elif kind == "txn_write":
                world.txn_write(step[1])
            elif kind == "txn_end":
                world.txn_end(step[1])
            elif kind == "gap":
                feed.listener.execute("SELECT 1")
                feed.relay.restart(live=True)  # a reconnect: what was in flight is lost
            elif kind == "snapshot":
                _snapshot(world, feed)
            else:
                _check(world, feed, answered)
        _check(world, feed, answered)
        event(f"plans from the index: {min(answered[0], 10) // 5 * 5}+")
        event(f"plans from a lagging index: {min(answered[1], 10) // 5 * 5}+")
        event(f"shared answers given: {min(answered[2], 10) // 5 * 5 if answered[2] else 'none'}")
    finally:
        feed.close()


def test_the_index_answers_at_the_tail_and_refuses_what_it_does_not_hold(alice):
    """Not vacuous: after commits the index plans the tail (equal to the store's), and it
    refuses catch-up below its first run, an offset past its high watermark, a
    partition it never saw, and everything after the feed was reset or a swap."""
    world = World(AgentApi(alice["agent_key"]), alice)
    world.commit([(0, 3, 100)])  # before the feed listens: never held
    feed = Feed(alice["cluster"].pk)
    try:
        world.commit([(0, 2, 100), (1, 2, 50)])
        world.commit([(0, 4, 100)])
        feed.catch_up()
        held = feed.feed.index.get((world.topic, 0))
        assert held is not None and (held.first_offset, held.high_watermark) == (3, 9)
        for offset in (3, 5, 9):
            mine = feed.feed.plan(world.request([(0, offset, 10**6)]), 10**6, 0)
            assert mine is not None and mine == world.plan([(0, offset, 10**6)], 10**6, 0)
        assert feed.feed.plan(world.request([(0, 2, 10**6)]), 10**6, 0) is None  # catch-up
        assert feed.feed.plan(world.request([(0, 10, 10**6)]), 10**6, 0) is None  # past hw
        both = world.request([(0, 9, 100), (1, 0, 100)])
        assert feed.feed.plan(both, 10**6, 0) == world.plan([(0, 9, 100), (1, 0, 100)], 10**6, 0)
        world.swap()
        feed.catch_up()
        assert feed.feed.index.get((world.topic, 0)) is None  # the swap dropped it
        world.commit([(0, 1, 10)])
        feed.catch_up()
        assert feed.feed.plan(world.request([(0, 9, 10**6)]), 10**6, 0) is not None
        feed.relay.restart(live=True)
        feed.catch_up()
        assert len(feed.feed.index) == 0
        assert feed.feed.plan(world.request([(0, 10, 10**6)]), 10**6, 0) is None
    finally:
        feed.close()


def test_a_created_partition_is_held_empty_at_0_until_its_first_run_continues_it(alice):
    """Issue 44: the feed announces a topic's partitions in the creating transaction, so
    the index holds them — empty, at offset 0 — before any run: a consumer waiting on a
    brand-new topic is planned there, as the store plans it. The first run continues the
    entry; a lagging index answers what the store did at its point (never hides a run
    committed before it); a reset drops the seeds as every entry."""
    feed = Feed(alice["cluster"].pk)
    try:
        world = World(AgentApi(alice["agent_key"]), alice)
        feed.catch_up()
        for partition in range(PARTITIONS):
            held = feed.feed.index.get((world.topic, partition))
            assert held is not None and (held.first_offset, held.high_watermark) == (0, 0)
            wanted = [(partition, 0, 10**6)]
            for isolation in (0, 1):
                mine = feed.feed.plan(world.request(wanted), 10**6, isolation)
                assert mine is not None and mine == world.plan(wanted, 10**6, isolation)
        assert feed.feed.plan(world.request([(0, 1, 10**6)]), 10**6, 0) is None  # past hw
        _snapshot(world, feed)  # the store's plans of the empty partitions
        world.commit([(0, 3, 100)])
        _check_lagging(world, feed, [0, 0, 0])  # an index still at the creation
        feed.catch_up()
        held = feed.feed.index.get((world.topic, 0))
        assert held is not None and (held.first_offset, held.high_watermark) == (0, 3)
        for offset in (0, 1, 3):
            wanted = [(0, offset, 10**6)]
            assert feed.feed.plan(world.request(wanted), 10**6, 0) == world.plan(wanted, 10**6, 0)
        # CreatePartitions: the new partition is held empty at 0 too.
        grown = world.api(
            "topics/create-partitions", {"topics": [{"name": world.name, "count": PARTITIONS + 1}]}
        )
        assert grown["topics"][0]["error_code"] == 0, grown
        feed.catch_up()
        held = feed.feed.index.get((world.topic, PARTITIONS))
        assert held is not None and (held.first_offset, held.high_watermark) == (0, 0)
        wanted = [(PARTITIONS, 0, 10**6)]
        assert feed.feed.plan(world.request(wanted), 10**6, 0) == world.plan(wanted, 10**6, 0)
        feed.relay.restart(live=True)  # a gap: whatever it lost, nothing is trusted
        feed.catch_up()
        assert len(feed.feed.index) == 0
    finally:
        feed.close()


def test_a_shared_answer_is_given_while_its_partitions_stand_still_and_never_after(alice):
    """Not vacuous: a kept answer is given out again while nothing touched its partitions
    (another partition's commit does not matter), and refused once a commit, a
    DeleteRecords, a swap or a reset of the feed reaches one of them."""
    world = World(AgentApi(alice["agent_key"]), alice)
    feed = Feed(alice["cluster"].pk)
    answered = [0, 0, 0]
    try:
        world.commit([(0, 3, 100), (1, 2, 50)])
        feed.catch_up()

        def keep(wanted: list) -> None:
            assert feed.feed.plan(world.request(wanted), 10**6, 0) is not None
            assert _share(world, feed, wanted, 0)  # kept by fill

        def given(wanted: list) -> bool:
            before = answered[2]
            _check_shared(world, feed, wanted, 0, world.plan(wanted, 10**6, 0), answered)
            return answered[2] > before

        first = [(0, 0, 10**6)]
        keep(first)
        assert given(first) and given(first)
        world.commit([(1, 2, 50)])  # the other partition
        feed.catch_up()
        assert given(first)
        world.commit([(0, 1, 10)])
        feed.catch_up()
        assert not given(first)
        for change in (
            lambda: world.delete_records(0, 0.5),
            world.swap,
            lambda: feed.relay.restart(live=True),
        ):
            world.commit([(0, 1, 10)])
            feed.catch_up()
            start = world.state(0)[0]
            wanted = [(0, start, 10**6)]
            if feed.feed.plan(world.request(wanted), 10**6, 0) is None:
                continue  # the index does not hold the partition from there
            keep(wanted)
            assert given(wanted)
            change()
            feed.catch_up()
            assert not given(wanted)
        assert answered[2] >= 4
    finally:
        feed.close()


def test_a_whole_answer_is_shared_in_any_order_and_a_cut_one_only_as_asked(alice):
    """librdkafka rotates its partitions' order from one Fetch to the next: an answer that
    holds every partition to its end is given to the same partitions asked in another
    order; one a partition's byte budget cut (KIP-74: the response's first batch goes
    whatever its size, so which partition comes first matters) only to the same order."""
    world = World(AgentApi(alice["agent_key"]), alice)
    feed = Feed(alice["cluster"].pk)
    answered = [0, 0, 0]
    try:
        world.commit([(0, 3, 100), (1, 2, 50)])
        world.commit([(0, 2, 100)])  # partition 0: two runs, so a budget can cut it
        feed.catch_up()

        def given(wanted: list) -> bool:
            before = answered[2]
            _check_shared(world, feed, wanted, 0, world.plan(wanted, 10**6, 0), answered)
            return answered[2] > before

        whole = [(0, 0, 10**6), (1, 0, 10**6)]
        assert not given(whole[::-1])
        assert _share(world, feed, whole, 0)
        assert given(whole[::-1]) and given(whole)
        cut = [(0, 0, 1), (1, 0, 10**6)]  # partition 0: its first run only
        assert _share(world, feed, cut, 0)
        assert given(cut)
        assert not given(cut[::-1])  # there partition 1 comes first and 0 gets nothing
    finally:
        feed.close()


def test_a_lagging_index_answers_what_the_store_did_at_its_point_or_refuses(alice):
    """Not vacuous: an index that has applied the feed up to a first commit but not a
    second plans the first's data as the store did then, and refuses an offset of the
    second; caught up to just after a DeleteRecords it holds nothing of the partition."""
    world = World(AgentApi(alice["agent_key"]), alice)
    feed = Feed(alice["cluster"].pk)
    try:
        world.commit([(0, 3, 100)])
        _snapshot(world, feed)
        world.commit([(0, 2, 100), (1, 2, 50)])
        answered = [0, 0]
        _check_lagging(world, feed, answered)
        held = feed.feed.index.get((world.topic, 0))
        assert held is not None and held.high_watermark == 3
        assert answered[1] > 10
        assert feed.feed.plan(world.request([(0, 4, 10**6)]), 10**6, 0) is None  # past hw
        assert feed.feed.index.get((world.topic, 1)) is None  # not yet brought
        feed.catch_up()
        world.delete_records(0, 0.5)
        _snapshot(world, feed)  # after the delete: the index must drop partition 0 there
        answered = [0, 0]
        _check_lagging(world, feed, answered)
        assert feed.feed.index.get((world.topic, 0)) is None
    finally:
        feed.close()


def test_the_agents_plan_limits_are_the_stores():
    assert tail_index.FETCH_PLAN_MAX_RUNS == store.FETCH_PLAN_MAX_RUNS


class _SlowPlans:
    """A control-plane client whose fetch-plan answers when told to (a unit test's)."""

    def __init__(self) -> None:
        self.calls = 0
        self.release = asyncio.Event()

    async def call(self, name: str, body: dict) -> dict:
        self.calls += 1
        await self.release.wait()
        return {"partitions": [{"asked": body["partitions"][0]["offset"]}]}


def test_identical_control_plane_plans_in_flight_are_one_call():
    """Single flight: Fetches asking the same plan while it is out share one call; a
    different request gets its own, and a cancelled Fetch does not fail the others."""

    async def main() -> None:
        client = _SlowPlans()
        ctx = SimpleNamespace(client=client)
        same = {"partitions": [{"topic_id": "t", "partition": 0, "offset": 5, "max_bytes": 9}]}
        other = {"partitions": [{"topic_id": "t", "partition": 0, "offset": 6, "max_bytes": 9}]}
        tasks = [asyncio.ensure_future(read_path._shared_plan(ctx, same)) for _ in range(5)]
        tasks.append(asyncio.ensure_future(read_path._shared_plan(ctx, other)))
        await asyncio.sleep(0.01)
        tasks[1].cancel()  # a follower leaves
        await asyncio.sleep(0.01)
        client.release.set()
        answers = await asyncio.gather(*tasks, return_exceptions=True)
        assert client.calls == 2
        assert isinstance(answers[1], asyncio.CancelledError)
        assert [a["partitions"][0]["asked"] for i, a in enumerate(answers) if i != 1] == [
            5,
            5,
            5,
            5,
            6,
        ]
        assert not read_path._IN_FLIGHT

    asyncio.run(main())


def _group_commit(world: World, files: list[tuple[str, list[tuple[int, int]]]]) -> None:
    """One group of commits — one floe_commit_files, one transaction — as the web server
    makes of agents' commits: (file key, [(partition, records)]) each batch its own run
    (the partitions alternate)."""
    commits = []
    for key, parts in files:
        batches, pos = [], 0
        for partition, records in parts:
            batches.append(
                msgspec.convert(
                    batch(world.topic, partition, records, pos=pos, length=50), schemas.CommitBatch
                )
            )
            pos += 50
        ids = store.partition_ids(world.cluster.pk, batches)
        commits.append(store.file_commit_prepare(file_key=key, size=pos, batches=batches, ids=ids))
    with connection.cursor() as cursor:
        cursor.execute(store.COMMIT_SQL, store.commit_params(world.cluster.pk, commits))
        rows = store.commit_rows(commits, cursor.fetchall())
    assert all(not any(errors or []) for errors, *_ in rows), rows


def _notes(feed: Feed, act) -> list[str]:
    """The payloads `act` brings on the channel."""
    payloads: list[str] = []
    feed.listener.add_notify_handler(lambda note: payloads.append(note.payload))
    act()
    feed.listener.execute("SELECT 1")  # delivers what the backend holds
    return payloads


def test_a_commit_of_several_files_is_one_notification(alice):
    """Three files of one group commit: one notification, each file's key once before its
    runs, in commit order — and the index plans the tail from it as the store does."""
    world = World(AgentApi(alice["agent_key"]), alice)
    feed = Feed(alice["cluster"].pk)
    try:
        keys = [f"{world.cluster.public_id}/segments/{world.name}-g{i}.seg" for i in range(3)]
        files = [(keys[0], [(0, 2), (1, 3)]), (keys[1], [(1, 1)]), (keys[2], [(0, 4), (1, 2)])]
        payloads = _notes(feed, lambda: _group_commit(world, files))
        assert len(payloads) == 1
        note = tail_feed.parse(payloads[0])
        assert [key for key, _ in note.files] == keys
        assert [len(runs) for _, runs in note.files] == [2, 1, 2]
        assert payloads[0].count(keys[1]) == 1
        feed.catch_up()
        assert feed.feed.index.get((world.topic, 0)) is not None
        for partition, offset in ((0, 2), (0, 5), (1, 3), (1, 5)):
            wanted = [(partition, offset, 10**6)]
            mine = feed.feed.plan(world.request(wanted), 10**6, 0)
            assert mine is not None and mine == world.plan(wanted, 10**6, 0), wanted
    finally:
        feed.close()


@pytest.mark.parametrize("key_chars", ["k", "é"])  # keys of 1 and 2 bytes a character
def test_a_commit_past_8000_bytes_is_split_below_it(alice, key_chars):
    """A group of long-keyed files with many runs passes PostgreSQL's 8000 bytes: its
    notifications each stay below it (else the commit fails), hold every run in commit
    order (a file split between two repeats its key) and are few — not one per file."""
    world = World(AgentApi(alice["agent_key"]), alice)
    feed = Feed(alice["cluster"].pk)
    try:
        prefix = f"{world.cluster.public_id}/segments/{world.name}-"
        keys = [(prefix + f"{i:03d}-").ljust(500, key_chars) for i in range(12)]
        runs = 30  # alternating partitions: every batch its own run
        files = [(key, [(j % 2, 1 + j % 3) for j in range(runs)]) for key in keys]
        payloads = _notes(feed, lambda: _group_commit(world, files))
        sizes = [len(p.encode()) for p in payloads]
        assert max(sizes) < 8000
        assert 1 < len(payloads) <= sum(sizes) // 5000 + 1, sizes
        notes = [tail_feed.parse(p) for p in payloads]
        got: list[tuple[str, int]] = []
        for note in notes:
            for key, file_runs in note.files:
                assert file_runs, "a file's key with no runs"
                got.extend((key, r.base_offset) for r in file_runs)
        assert [key for key, _ in got] == [key for key in keys for _ in range(runs)]
        for partition in (0, 1):
            bases = [
                base
                for (key, base), j in zip(got, itertools.cycle(range(runs)))
                if j % 2 == partition
            ]
            assert bases == sorted(bases) and len(set(bases)) == len(bases)
        feed.catch_up()
        high = world.state(0)[1]
        mine = feed.feed.plan(world.request([(0, high - 1, 10**6)]), 10**6, 0)
        assert mine is not None and mine == world.plan([(0, high - 1, 10**6)], 10**6, 0)
    finally:
        feed.close()
