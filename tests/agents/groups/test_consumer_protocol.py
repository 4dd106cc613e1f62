"""KIP-848 consumer groups (`agents.groups.consumer`) against Kafka's rules, without
sockets: each test drives ConsumerGroupHeartbeat and OffsetCommit validation directly on
a coordinator whose leases are all held (saves still go to a fake control plane)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from agents.groups.assignors import range_assign, uniform_assign
from agents.groups.consumer import HeartbeatRequest
from agents.groups.consumer_state import MemberState
from agents.topics import TopicInfo
from core.kafka.errors import ErrorCode as E
from tests.agents.groups.test_coordinator import coordinator, join, request

pytestmark = pytest.mark.timeout(30)

TOPICS = {
    name: TopicInfo(name, uuid.uuid5(uuid.NAMESPACE_DNS, name), n)
    for name, n in (("orders", 6), ("payments", 2), ("audit-1", 2), ("audit-2", 1))
}


def tid(name: str) -> str:
    return str(TOPICS[name].topic_id)


async def lookup(names: set[str], everything: bool) -> dict:
    found = {n: TOPICS.get(n) for n in names}
    if everything:
        found.update(TOPICS)
    return found


class Member:
    """A well-behaved member: heartbeats what it owns, gives up what it is not given."""

    def __init__(self, coord, member_id: str, *, topics=("orders",), regex=None, assignor=None):
        self.coord, self.member_id = coord, member_id
        self.topics, self.regex, self.assignor = list(topics), regex, assignor
        self.epoch = 0
        self.owned: set[tuple[str, int]] = set()
        self.last: dict = {}

    def request(self, **kw) -> HeartbeatRequest:
        joining = self.epoch == 0
        fields = dict(
            group_id="g",
            member_id=self.member_id,
            member_epoch=self.epoch,
            instance_id=None,
            rack_id=None,
            rebalance_timeout_ms=30000 if joining else -1,
            topic_names=self.topics if joining else None,
            topic_regex=self.regex if joining else None,
            server_assignor=self.assignor if joining else None,
            owned=set(self.owned),
        )
        fields.update(kw)
        return HeartbeatRequest(**fields)

    async def beat(self, **kw) -> dict:
        answer = await self.coord.consumer.heartbeat(self.request(**kw), lookup)
        self.last = answer
        if answer["error_code"] == 0:
            self.epoch = answer["member_epoch"]
            if answer["assignment"] is not None:
                self.owned = {
                    (str(t["topic_id"]), p)
                    for t in answer["assignment"]["topic_partitions"]
                    for p in t["partitions"]
                }
        return answer


def no_overlap(members) -> None:
    seen: dict = {}
    for m in members:
        for tp in m.owned:
            assert tp not in seen, f"{tp} owned by {seen[tp]} and {m.member_id}"
            seen[tp] = m.member_id


async def settle(members, rounds: int = 6) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)  # background regex resolutions
        for m in members:
            assert (await m.beat())["error_code"] == 0, m.last
            no_overlap(members)


def test_members_join_and_share_the_partitions_evenly():
    async def run():
        coord = coordinator()
        a = Member(coord, "a")
        first = await a.beat()
        assert first["error_code"] == 0 and first["member_id"] == "a"
        assert first["member_epoch"] == 1 and first["heartbeat_interval_ms"] == 5000
        assert a.owned == {(tid("orders"), p) for p in range(6)}
        b, c = Member(coord, "b"), Member(coord, "c")
        await settle([a, b, c])
        assert sorted(len(m.owned) for m in (a, b, c)) == [2, 2, 2]
        group = coord.consumer.groups["g"]
        assert group.state.value == "Stable"
        assert {m.member_epoch for m in group.members.values()} == {group.assignment_epoch}
        # Steady heartbeats change nothing and save nothing.
        saves = len([c for c in coord.client.calls if c[0] == "groups/save"])
        await settle([a, b, c], rounds=2)
        assert len([c for c in coord.client.calls if c[0] == "groups/save"]) == saves

    asyncio.run(run())


def test_a_partition_moves_only_after_its_owner_gave_it_up():
    async def run():
        coord = coordinator()
        a = Member(coord, "a")
        await a.beat()
        b = Member(coord, "b")
        joined = await b.beat()
        # b's target holds partitions a still owns: b gets none of them yet.
        assert joined["member_epoch"] == 2 and b.owned == set()
        group = coord.consumer.groups["g"]
        assert group.members["b"].state is MemberState.UNRELEASED
        # a is told to keep only its half, at its old epoch (it must revoke first).
        kept = await a.beat()
        assert kept["member_epoch"] == 1 and len(a.owned) == 3
        assert group.members["a"].state is MemberState.UNREVOKED
        # Until a acknowledges, b still gets nothing.
        assert (await b.beat())["error_code"] == 0 and b.owned == set()
        acked = await a.beat()  # heartbeats without the revoked partitions
        assert acked["member_epoch"] == 2 and len(a.owned) == 3
        await b.beat()
        assert len(b.owned) == 3 and not (a.owned & b.owned)

    asyncio.run(run())


def test_a_member_that_does_not_revoke_is_not_given_a_new_epoch():
    async def run():
        coord = coordinator()
        a, b = Member(coord, "a"), Member(coord, "b")
        await a.beat()
        await b.beat()
        everything = set(a.owned)
        await a.beat()  # told to give half up
        still = await a.beat(owned=everything)  # but it still owns everything
        assert still["member_epoch"] == 1
        await b.beat()
        assert b.owned == set()

    asyncio.run(run())


def test_stale_and_future_epochs_are_fenced_and_unknown_members_refused():
    async def run():
        coord = coordinator()
        a, b = Member(coord, "a"), Member(coord, "b")
        await settle([a, b])
        assert (await a.beat(member_epoch=a.epoch + 1))["error_code"] == E.FENCED_MEMBER_EPOCH
        # The previous epoch is accepted only with owned partitions it was given.
        prev = coord.consumer.groups["g"].members["a"].previous_member_epoch
        assert (await a.beat(member_epoch=prev))["error_code"] == 0
        assert (await a.beat(member_epoch=prev, owned=None))["error_code"] == (
            E.FENCED_MEMBER_EPOCH
        )
        ghost = Member(coord, "ghost")
        ghost.epoch = 3
        assert (await ghost.beat())["error_code"] == E.UNKNOWN_MEMBER_ID
        # v1: the client names itself; an empty member id is refused.
        empty = Member(coord, "")
        assert (await empty.beat())["error_code"] == E.INVALID_REQUEST
        # v0: the coordinator names it.
        v0 = await coord.consumer.heartbeat(Member(coord, "").request(version=0), lookup)
        assert v0["error_code"] == 0 and v0["member_id"]

    asyncio.run(run())


def test_a_leaving_member_frees_its_partitions_for_the_others():
    async def run():
        coord = coordinator()
        a, b, c = Member(coord, "a"), Member(coord, "b"), Member(coord, "c")
        await settle([a, b, c])
        left = await b.beat(member_epoch=-1)
        assert left["error_code"] == 0 and left["member_epoch"] == -1
        assert "b" not in coord.consumer.groups["g"].members
        await settle([a, c])
        assert sorted(len(m.owned) for m in (a, c)) == [3, 3]
        # A member that left is unknown.
        b.epoch = 5
        assert (await b.beat())["error_code"] == E.UNKNOWN_MEMBER_ID

    asyncio.run(run())


def test_a_silent_member_is_removed_after_the_session_timeout():
    async def run():
        coord = coordinator()
        coord.consumer.settings = {"consumer_session_timeout_ms": 300}
        a, b = Member(coord, "a"), Member(coord, "b")
        await settle([a, b])
        for _ in range(8):  # a keeps heartbeating, b stops
            await asyncio.sleep(0.1)
            await a.beat()
        assert list(coord.consumer.groups["g"].members) == ["a"]
        await settle([a])
        assert a.owned == {(tid("orders"), p) for p in range(6)}

    asyncio.run(run())


def test_regex_subscriptions_are_evaluated_by_the_coordinator():
    async def run():
        coord = coordinator()
        a = Member(coord, "a", topics=("orders",), regex="audit-.*")
        await a.beat()
        # The literal topics at once; the regex's matches at a later heartbeat, once the
        # coordinator resolved it in the background (as Kafka does).
        assert a.owned == {(tid("orders"), p) for p in range(6)}
        epoch = coord.consumer.groups["g"].assignment_epoch
        for _ in range(3):
            await asyncio.sleep(0)
        # Resolved: a new target at once, before anyone heartbeats.
        assert coord.consumer.groups["g"].assignment_epoch == epoch + 1
        await settle([a])
        assert {tp for tp in a.owned if tp[0] != tid("orders")} == {
            (tid("audit-1"), 0),
            (tid("audit-1"), 1),
            (tid("audit-2"), 0),
        }
        # Left and subscribed again: resolved afresh, the matches a heartbeat later.
        await a.beat(member_epoch=-1)
        again = Member(coord, "a2", topics=("orders",), regex="audit-.*")
        await again.beat()
        assert {t for t, _ in again.owned} == {tid("orders")}
        await settle([again])
        assert len(again.owned) == 9
        bad = Member(coord, "b", topics=(), regex="audit-(")
        assert (await bad.beat())["error_code"] == E.INVALID_REGULAR_EXPRESSION
        unsupported = Member(coord, "c", assignor="sticky")
        assert (await unsupported.beat())["error_code"] == E.UNSUPPORTED_ASSIGNOR

    asyncio.run(run())


def test_the_range_assignor_when_members_ask_for_it():
    async def run():
        coord = coordinator()
        a = Member(coord, "a", topics=("orders", "payments"), assignor="range")
        b = Member(coord, "b", topics=("orders", "payments"), assignor="range")
        await settle([a, b])
        assert coord.consumer.groups["g"].assignor == "range"
        assert sorted(p for t, p in a.owned if t == tid("orders")) == [0, 1, 2]
        assert sorted(p for t, p in a.owned if t == tid("payments")) == [0]

    asyncio.run(run())


def test_assignors_balance_and_stick():
    orders = tid("orders")
    subs = {m: {orders} for m in ("a", "b", "c")}
    first = uniform_assign({"a": {orders}, "b": {orders}}, {orders: 7}, {})
    assert sorted(len(v) for v in first.values()) == [3, 4]
    second = uniform_assign(subs, {orders: 7}, first)
    assert sorted(len(v) for v in second.values()) == [2, 2, 3]
    # Stickiness: a and b each keep partitions they had; only what c needs moves.
    moved = sum(len(first[m] - second[m]) for m in ("a", "b"))
    assert moved == 2
    ranges = range_assign(subs, {orders: 7}, {})
    assert sorted(p for _, p in ranges["a"]) == [0, 1, 2]


def test_offset_commits_need_the_members_current_or_previous_epoch():
    async def run():
        coord = coordinator()
        a, b = Member(coord, "a"), Member(coord, "b")
        await settle([a, b])
        member = coord.consumer.groups["g"].members["a"]
        assert coord.validate_commit("g", "a", None, member.member_epoch) is None
        assert coord.validate_commit("g", "a", None, member.previous_member_epoch) is None
        assert coord.validate_commit("g", "a", None, member.member_epoch + 1) == (
            E.STALE_MEMBER_EPOCH
        )
        assert coord.validate_commit("g", "nobody", None, 1) == E.UNKNOWN_MEMBER_ID
        assert coord.validate_commit("g", "", None, -1) == E.UNKNOWN_MEMBER_ID  # has members

    asyncio.run(run())


def test_one_group_id_speaks_one_protocol():
    async def run():
        coord = coordinator()
        a = Member(coord, "a")
        await a.beat()
        refused = coord.join(request())
        assert refused["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
        classic = coordinator()
        await join(classic)
        answer = await classic.consumer.heartbeat(Member(classic, "x").request(), lookup)
        assert answer["error_code"] == E.GROUP_ID_NOT_FOUND

    asyncio.run(run())


def test_a_new_coordinator_loads_the_group_as_saved():
    async def run():
        coord = coordinator()
        a, b = Member(coord, "a"), Member(coord, "b")
        await settle([a, b])
        saved = [body for name, body in coord.client.calls if name == "groups/save"][-1]
        other = coordinator()
        other._load("g", 2, saved)
        group = other.consumer.groups["g"]
        assert group.group_epoch == coord.consumer.groups["g"].group_epoch
        a.coord = b.coord = other
        # The members go on with their epochs and partitions: nothing moves.
        before = (set(a.owned), set(b.owned))
        await settle([a, b], rounds=2)
        assert (a.owned, b.owned) == before

    asyncio.run(run())


def test_a_static_member_is_unique_and_comes_back_to_its_partitions():
    async def run():
        coord = coordinator()
        a, other = Member(coord, "a"), Member(coord, "other")
        await settle([a, other])
        await a.beat(instance_id="i1")
        held, epoch = set(a.owned), coord.consumer.groups["g"].group_epoch
        twin = Member(coord, "twin")
        refused = await twin.beat(instance_id="i1")
        assert refused["error_code"] == E.UNRELEASED_INSTANCE_ID
        assert (await a.beat(member_epoch=-2))["member_epoch"] == -2
        back = Member(coord, "back")
        answer = await back.beat(instance_id="i1")
        assert answer["error_code"] == 0 and back.owned == held
        assert coord.consumer.groups["g"].group_epoch == epoch  # nothing moved
        assert "a" not in coord.consumer.groups["g"].members

    asyncio.run(run())
