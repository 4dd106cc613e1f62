"""The group coordinator's state machine against Kafka's rules, without sockets: each
test drives JoinGroup/SyncGroup/Heartbeat/LeaveGroup/OffsetCommit validation directly."""

from __future__ import annotations

import asyncio
import struct

import pytest

from agents.groups.coordinator import FORGET_AFTER_S, GroupCoordinator, JoinRequest
from agents.groups.leases import GroupLeases
from agents.groups.ring import CoordinatorRing, Peer
from agents.groups.state import GroupState
from core.kafka.consumer_protocol import assignment_partitions, subscription_topics
from core.kafka.errors import ErrorCode as E

pytestmark = pytest.mark.timeout(30)


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1)


def assignment(topic: str, *partitions: int) -> bytes:
    out = struct.pack(">hi", 0, 1) + struct.pack(">h", len(topic)) + topic.encode()
    out += struct.pack(">i", len(partitions)) + b"".join(struct.pack(">i", p) for p in partitions)
    return out + struct.pack(">i", -1)


class FakeControlPlane:
    def __init__(self):
        self.calls = []

    async def call(self, name, body, timeout_s=None):
        self.calls.append((name, body))
        if name == "groups/save":
            return {"error_code": 0}
        return {"forget": []}


class HeldLeases(GroupLeases):
    """Every group's lease held (epoch 1): the state machine alone, saves still sent."""

    def epoch(self, group_id: str) -> int:
        return 1


def coordinator(delay_ms: int = 50) -> GroupCoordinator:
    ring = CoordinatorRing(Peer("me", "127.0.0.1", 9092, 1), lambda agent_id: 2)
    client = FakeControlPlane()
    return GroupCoordinator(
        ring,
        client,
        initial_rebalance_delay_ms=delay_ms,
        leases=HeldLeases(client, "me"),
    )


def request(member_id: str = "", *, protocols=None, instance=None, version: int = 5, **kw):
    defaults = dict(
        group_id="g",
        member_id=member_id,
        group_instance_id=instance,
        protocol_type="consumer",
        protocols=protocols or [("range", subscription("t"))],
        session_timeout_ms=6000,
        rebalance_timeout_ms=10000,
        client_id="client",
        client_host="",
        require_known_member_id=version >= 4 and instance is None,
        supports_skip_assignment=version >= 9,
    )
    defaults.update(kw)
    return JoinRequest(**defaults)


async def answer(result):
    return await asyncio.wait_for(result, 5) if isinstance(result, asyncio.Future) else result


async def join(coord: GroupCoordinator, **kw) -> asyncio.Future | dict:
    """Join as a new member the KIP-394 way; returns the parked answer (or the answer)."""
    first = coord.join(request(**kw))
    assert first["error_code"] == E.MEMBER_ID_REQUIRED
    return coord.join(request(first["member_id"], **kw))


async def stable_group(coord: GroupCoordinator, n: int) -> list[dict]:
    """n members joined and synced; returns their JoinGroup answers (leader first)."""
    parked = [await join(coord) for _ in range(n)]
    answers = [await answer(p) for p in parked]
    leader = next(a for a in answers if a["member_id"] == a["leader"])
    plan = {a["member_id"]: assignment("t", i) for i, a in enumerate(answers)}
    syncs = [
        coord.sync("g", a["generation_id"], a["member_id"], None, "consumer", "range", {})
        for a in answers
        if a is not leader
    ]
    done = coord.sync("g", leader["generation_id"], leader["member_id"], None, None, None, plan)
    for s in [*syncs, done]:
        assert (await answer(s))["error_code"] == 0
    assert coord.groups["g"].state is GroupState.STABLE
    return [leader, *(a for a in answers if a is not leader)]


class ForgettingControlPlane(FakeControlPlane):
    """A store with nothing for any group: every report's answer says forget them."""

    async def call(self, name, body, timeout_s=None):
        answer = await super().call(name, body, timeout_s)
        if name == "groups/report":
            return {"forget": [g["group_id"] for g in body["groups"]]}
        return answer


def test_an_empty_group_is_forgotten_only_once_it_has_stayed_empty():
    """A FindCoordinator loads a group and the JoinGroup follows a round trip later: the
    report in between must not give the lease back under the joining member."""

    async def run():
        client = ForgettingControlPlane()
        ring = CoordinatorRing(Peer("me", "127.0.0.1", 9092, 1), lambda agent_id: 2)
        coord = GroupCoordinator(ring, client, leases=HeldLeases(client, "me"))
        coord.leases.on_acquired("g", 1, {})  # the lease taken: loaded, Empty
        await coord.reporter.report_once()
        assert "g" in coord.groups, "forgotten right after it was loaded"
        coord.groups["g"].state_since -= FORGET_AFTER_S + 1
        await coord.reporter.report_once()
        assert "g" not in coord.groups, "an Empty group the store lacks is forgotten"

    asyncio.run(run())


def test_a_join_without_member_id_is_told_to_come_back_with_one():
    async def run():
        coord = coordinator()
        first = coord.join(request(version=4))
        assert first["error_code"] == E.MEMBER_ID_REQUIRED and first["member_id"]
        joined = await answer(coord.join(request(first["member_id"], version=4)))
        assert joined["error_code"] == 0
        assert joined["generation_id"] == 1
        assert joined["leader"] == joined["member_id"] == first["member_id"]
        assert joined["protocol_name"] == "range"
        assert [m["member_id"] for m in joined["members"]] == [first["member_id"]]
        # JoinGroup v3 and older: joined at once, no second round trip.
        old = coordinator()
        assert (await answer(old.join(request(version=3, require_known_member_id=False))))[
            "error_code"
        ] == 0

    asyncio.run(run())


def test_members_share_the_leaders_assignment():
    async def run():
        coord = coordinator()
        leader, *followers = await stable_group(coord, 3)
        assert len(leader["members"]) == 3 and all(f["members"] == [] for f in followers)
        group = coord.groups["g"]
        assert {assignment_partitions(m.assignment)["t"][0] for m in group.members.values()} == {
            0,
            1,
            2,
        }
        # A member asking again in Stable gets its assignment straight back.
        again = coord.sync("g", 1, followers[0]["member_id"], None, None, None, {})
        assert again["error_code"] == 0
        assert again["assignment"] == group.members[followers[0]["member_id"]].assignment

    asyncio.run(run())


def test_a_new_member_makes_the_others_rejoin_through_their_heartbeats():
    async def run():
        coord = coordinator()
        leader, follower = await stable_group(coord, 2)
        newcomer = await join(coord)
        assert coord.groups["g"].state is GroupState.PREPARING_REBALANCE
        for old in (leader, follower):
            assert coord.heartbeat("g", old["member_id"], None, 1) == E.REBALANCE_IN_PROGRESS
        # Commits are still accepted while the group prepares (KIP: heartbeats tell members).
        assert coord.validate_commit("g", leader["member_id"], None, 1) is None
        rejoined = [coord.join(request(old["member_id"])) for old in (leader, follower)]
        answers = [await answer(r) for r in [newcomer, *rejoined]]
        assert {a["generation_id"] for a in answers} == {2}
        assert coord.groups["g"].state is GroupState.COMPLETING_REBALANCE
        # Heartbeats with the old generation are fenced; the current one is fine.
        assert coord.heartbeat("g", leader["member_id"], None, 1) == E.ILLEGAL_GENERATION
        assert coord.heartbeat("g", leader["member_id"], None, 2) == E.NONE
        assert coord.validate_commit("g", leader["member_id"], None, 2) == E.REBALANCE_IN_PROGRESS
        assert coord.validate_commit("g", leader["member_id"], None, 1) == E.ILLEGAL_GENERATION

    asyncio.run(run())


def test_unknown_members_and_groups_are_refused():
    async def run():
        coord = coordinator()
        assert coord.heartbeat("nope", "m", None, 1) == E.UNKNOWN_MEMBER_ID
        assert coord.join(request("ghost"))["error_code"] == E.UNKNOWN_MEMBER_ID
        assert coord.sync("nope", 1, "m", None, None, None, {})["error_code"] == E.UNKNOWN_MEMBER_ID
        await stable_group(coord, 1)
        assert coord.heartbeat("g", "stranger", None, 1) == E.UNKNOWN_MEMBER_ID
        assert coord.leave("g", [("stranger", None)])[1][0][2] == E.UNKNOWN_MEMBER_ID
        assert coord.join(request(session_timeout_ms=10))["error_code"] == E.INVALID_SESSION_TIMEOUT
        assert coord.join(request(group_id=""))["error_code"] == E.INVALID_GROUP_ID

    asyncio.run(run())


def test_a_member_whose_session_expires_is_removed_and_the_group_rebalances():
    async def run():
        coord = coordinator()
        leader, follower = await stable_group(coord, 2)
        group = coord.groups["g"]
        group.members[follower["member_id"]].session_timeout_ms = 200
        coord.heartbeat("g", follower["member_id"], None, 1)  # arms the 200 ms timer
        rejoined = None
        for _ in range(50):
            await asyncio.sleep(0.05)
            if coord.heartbeat("g", leader["member_id"], None, 1) == E.REBALANCE_IN_PROGRESS:
                rejoined = coord.join(request(leader["member_id"]))
                break
        assert rejoined is not None, "the leader was never told to rejoin"
        alone = await answer(rejoined)
        assert alone["generation_id"] == 2 and len(alone["members"]) == 1
        assert coord.heartbeat("g", follower["member_id"], None, 2) == E.UNKNOWN_MEMBER_ID

    asyncio.run(run())


def test_leaving_rebalances_and_the_last_member_out_empties_the_group():
    async def run():
        coord = coordinator()
        leader, follower = await stable_group(coord, 2)
        top, results = coord.leave("g", [(follower["member_id"], None)])
        assert top == E.NONE and results[0][2] == E.NONE
        assert coord.groups["g"].state is GroupState.PREPARING_REBALANCE
        alone = await answer(coord.join(request(leader["member_id"])))
        assert alone["generation_id"] == 2
        coord.leave("g", [(leader["member_id"], None)])
        group = coord.groups["g"]
        assert group.state is GroupState.EMPTY and group.generation == 3
        # An Empty group takes simple commits (assign() consumers, admin tools).
        assert coord.validate_commit("g", "", None, -1) is None

    asyncio.run(run())


def test_offset_commits_follow_kafkas_generation_rules():
    async def run():
        coord = coordinator()
        assert coord.validate_commit("simple", "", None, -1) is None
        assert coord.validate_commit("simple", "m", None, 3) == E.ILLEGAL_GENERATION
        leader, _ = await stable_group(coord, 2)
        assert coord.validate_commit("g", leader["member_id"], None, 1) is None
        assert coord.validate_commit("g", "", None, -1) == E.UNKNOWN_MEMBER_ID
        assert coord.validate_commit("g", "someone", None, 1) == E.UNKNOWN_MEMBER_ID
        assert coord.validate_commit("g", leader["member_id"], None, 7) == E.ILLEGAL_GENERATION
        assert coord.delete("g")[0] == E.NON_EMPTY_GROUP

    asyncio.run(run())


def test_a_restarted_static_member_takes_its_place_without_a_rebalance():
    async def run():
        coord = coordinator()
        first = await answer(coord.join(request(instance="pod-0")))  # static: no KIP-394 trip
        group = coord.groups["g"]
        plan = {first["member_id"]: assignment("t", 0, 1)}
        await answer(coord.sync("g", 1, first["member_id"], "pod-0", None, None, plan))
        restarted = await answer(coord.join(request(instance="pod-0")))
        assert restarted["error_code"] == 0 and restarted["member_id"] != first["member_id"]
        assert restarted["generation_id"] == 1 and group.state is GroupState.STABLE
        # Told the old leader id, so it does not compute an assignment nobody would get.
        assert restarted["leader"] == first["member_id"] and restarted["members"] == []
        synced = await answer(coord.sync("g", 1, restarted["member_id"], "pod-0", None, None, {}))
        assert assignment_partitions(synced["assignment"]) == {"t": [0, 1]}
        # The old incarnation is fenced.
        assert coord.heartbeat("g", first["member_id"], "pod-0", 1) == E.FENCED_INSTANCE_ID
        assert coord.validate_commit("g", first["member_id"], "pod-0", 1) == E.FENCED_INSTANCE_ID
        # KIP-345 batch leave by instance id (admin removal, no member id).
        assert coord.leave("g", [("", "pod-0")])[1][0][2] == E.NONE
        assert group.state is GroupState.EMPTY

    asyncio.run(run())


def test_the_protocol_is_one_every_member_supports_by_preference():
    async def run():
        coord = coordinator()
        both = [("range", subscription("t")), ("roundrobin", subscription("t"))]
        only_rr = [("roundrobin", subscription("t"))]
        a = await join(coord, protocols=both)
        b = await join(coord, protocols=only_rr)
        answers = [await answer(a), await answer(b)]
        assert {x["protocol_name"] for x in answers} == {"roundrobin"}
        refused = coord.join(request(protocols=[("sticky", subscription("t"))]))
        assert refused["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
        other_type = coord.join(request(protocol_type="connect"))
        assert other_type["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
        leader = answers[0] if answers[0]["leader"] == answers[0]["member_id"] else answers[1]
        wrong = coord.sync("g", 1, leader["member_id"], None, "consumer", "range", {})
        assert wrong["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
        stale = coord.sync("g", 0, leader["member_id"], None, None, None, {})
        assert stale["error_code"] == E.ILLEGAL_GENERATION

    asyncio.run(run())


def test_a_member_whose_connection_drops_mid_join_is_dropped():
    async def run():
        coord = coordinator(delay_ms=300)
        stays = await join(coord)
        goes = await join(coord)
        goes.cancel()  # what the server does to a parked request when the client goes
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        alone = await answer(stays)
        assert alone["generation_id"] == 1 and len(alone["members"]) == 1

    asyncio.run(run())


def test_consumer_protocol_bytes_are_read_for_topics_and_assignments():
    assert subscription_topics(subscription("a", "b")) == ["a", "b"]
    assert assignment_partitions(assignment("a", 3, 1)) == {"a": [3, 1]}
    assert assignment_partitions(b"") == {}
