"""The agent's side of group leases (agents.groups.leases) against a scripted control plane:
acquisitions of one moment go out as one call, a lease counts only until ttl - margin
after the request that confirmed it was sent, and a group whose lease is refused or
unconfirmed is unloaded at once, its parked members told NOT_COORDINATOR."""

from __future__ import annotations

import asyncio

import pytest

from agents.control_plane import ControlPlaneUnavailable
from agents.control_plane_link import ControlPlaneLink
from agents.groups.coordinator import GroupCoordinator
from agents.groups.leases import GroupLeases
from agents.groups.ring import CoordinatorRing, Peer
from core.kafka.errors import ErrorCode as E
from tests.agents.groups.test_coordinator import answer, request

pytestmark = pytest.mark.timeout(30)


class Store:
    """Answers groups/leases as the metadata store would for one agent, scripted."""

    def __init__(self, holders: dict[str, str] | None = None) -> None:
        self.calls: list[tuple[str, dict]] = []
        self.holders = dict(holders or {})
        self.refuse_renewals = False
        self.down = False

    async def call(self, name, body, timeout_s=None):
        self.calls.append((name, body))
        if self.down:
            raise ControlPlaneUnavailable("down", outcome_unknown=False)
        if name == "groups/save":
            return {"error_code": 0}
        if name != "groups/leases":
            return {"forget": []}
        leases = []
        for group in body.get("acquire", []):
            holder = self.holders.setdefault(group, body["agent_id"])
            mine = holder == body["agent_id"]
            leases.append(
                {
                    "group_id": group,
                    "agent_id": holder,
                    "epoch": 1,
                    "expires_in_ms": 4000,
                    "state": {"generation": 0, "members": []} if mine else None,
                }
            )
        asked = body.get("renew", []) + body.get("resume", [])
        renewed = [] if self.refuse_renewals else [r["group_id"] for r in asked]
        lost = [r["group_id"] for r in asked if r["group_id"] not in renewed]
        return {"leases": leases, "renewed": renewed, "lost": lost}


def coordinator(store: Store, ttl_s: float = 4.0) -> GroupCoordinator:
    ring = CoordinatorRing(Peer("me", "127.0.0.1", 9092, 1), lambda agent_id: 2)
    leases = GroupLeases(store, "me", ttl_s=ttl_s, margin_s=ttl_s / 4)
    return GroupCoordinator(ring, store, initial_rebalance_delay_ms=50, leases=leases)


def test_acquisitions_of_one_moment_are_one_call_and_others_holders_are_remembered():
    asyncio.run(_acquisitions_of_one_moment_are_one_call_and_others_holders_are_remembered())


async def _acquisitions_of_one_moment_are_one_call_and_others_holders_are_remembered():
    store = Store(holders={"theirs": "peer"})
    coord = coordinator(store)
    owned = await asyncio.gather(*(coord.owns(g) for g in ("a", "b", "theirs", "a")))
    assert owned == [True, True, False, True]
    assert [name for name, _ in store.calls] == ["groups/leases"]
    assert sorted(store.calls[0][1]["acquire"]) == ["a", "b", "theirs"]
    assert set(coord.groups) == {"a", "b"}
    assert not await coord.owns("theirs")  # remembered until that lease's expiry
    assert len(store.calls) == 1


def test_a_refused_renewal_unloads_the_group_and_answers_its_members():
    asyncio.run(_a_refused_renewal_unloads_the_group_and_answers_its_members())


async def _a_refused_renewal_unloads_the_group_and_answers_its_members():
    store = Store()
    coord = coordinator(store)
    assert await coord.owns("g")
    first = coord.join(request())
    parked = coord.join(request(first["member_id"]))
    store.refuse_renewals = True
    await coord.leases.renew_once()
    assert (await answer(parked))["error_code"] == E.NOT_COORDINATOR
    assert "g" not in coord.groups and not coord.leases.held


def test_a_lease_not_confirmed_in_time_is_given_up_without_the_store():
    asyncio.run(_a_lease_not_confirmed_in_time_is_given_up_without_the_store())


async def _a_lease_not_confirmed_in_time_is_given_up_without_the_store():
    store = Store()
    coord = coordinator(store, ttl_s=0.4)  # counts as held for 0.3 s
    assert await coord.owns("g")
    store.down = True
    await coord.leases.renew_once()  # fails: nothing confirmed
    assert "g" in coord.groups
    await asyncio.sleep(0.35)
    await coord.leases.renew_once()
    assert "g" not in coord.groups
    assert not await coord.owns("g")  # the store cannot be asked: not ours


def test_with_ripcord_a_lease_is_kept_through_an_outage_and_resumed_after():
    asyncio.run(_with_ripcord_a_lease_is_kept_through_an_outage_and_resumed_after())


async def _with_ripcord_a_lease_is_kept_through_an_outage_and_resumed_after():
    """Ripcord: while the link is down the group stays loaded past its lease (members keep
    their coordinator); once the link is back the lease is renewed with `resume` and the
    state whose save failed meanwhile is saved; a resume refused unloads the group."""
    store = Store()
    store.link = ControlPlaneLink()
    coord = coordinator(store, ttl_s=0.4)  # counts as held for 0.3 s
    coord.leases.keep_through_outage = lambda: True
    assert await coord.owns("g")
    store.down = True
    store.link.record_failure()
    await asyncio.sleep(0.35)
    await coord.leases.renew_once()
    assert "g" in coord.groups and await coord.owns("g")  # kept, past its lease
    assert await coord.leases.save("g", {"generation": 2, "members": []})  # kept for later
    store.down = False
    store.link.record_answer()
    store.calls.clear()
    await coord.leases.renew_once()
    await asyncio.sleep(0)  # the saved-later state goes out
    (name, body), *rest = store.calls
    assert name == "groups/leases" and body["resume"] == [{"group_id": "g", "epoch": 1}]
    assert body["renew"] == []
    assert [c[0] for c in rest] == ["groups/save"] and rest[0][1]["generation"] == 2
    assert not coord.leases.held["g"].resume
    # Another outage, and this time the store gave the group away meanwhile.
    store.down = True
    store.link.record_failure()
    await asyncio.sleep(0.35)
    await coord.leases.renew_once()
    assert "g" in coord.groups
    store.down, store.refuse_renewals = False, True
    store.link.record_answer()
    await coord.leases.renew_once()
    assert "g" not in coord.groups and not coord.leases.held


class ExpiringStore(Store):
    """A store where another agent's lease ends at a given moment unless it renews."""

    def __init__(
        self,
        holder: str,
        ends_in_s: float,
        *,
        renews: bool,
        dies_in_s: float = 1e9,
        reports_early_s: float = 0.0,
    ) -> None:
        super().__init__()
        self.other, self.renews = holder, renews
        # The end it reports is this much before the real one (clocks, rounding).
        self.reports_early_s = reports_early_s
        self.stamps = True  # answers carry the expiry on the store's clock
        self.delays: list[float] = []  # of the answers, in turn
        self.ends_at = asyncio.get_running_loop().time() + ends_in_s
        self.dies_at = asyncio.get_running_loop().time() + dies_in_s  # renews until then

    async def call(self, name, body, timeout_s=None):
        now = asyncio.get_running_loop().time()
        if self.renews:  # the holder renews (until it dies): alive, whoever cannot reach it
            self.ends_at = max(self.ends_at, min(now, self.dies_at) + 4.0)
        if now < self.ends_at:
            self.holders = {g: self.other for g in body.get("acquire", [])}
        else:
            self.holders.clear()
        for offer in body.get("offer", []):  # a free lease goes where it is offered
            self.holders.setdefault(offer["group_id"], offer["agent_id"])
        answer = await super().call(name, body, timeout_s)
        for lease in answer.get("leases", []):
            if lease["agent_id"] == self.other:
                reported = self.ends_at - self.reports_early_s
                lease["expires_in_ms"] = max(0, int((reported - now) * 1000))
                if self.stamps:
                    lease["expires_at_ms"] = int(reported * 1000)
        delay = self.delays.pop(0) if self.delays else 0.0
        await asyncio.sleep(delay)  # a slow link: the answer arrives late, its time left stale
        return answer


def closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def coordinator_beside(store: Store, peer_port: int) -> GroupCoordinator:
    coord = coordinator(store)
    coord.ring.update([{"agent_id": "peer", "host": "127.0.0.1", "port": peer_port}])
    return coord


def test_a_dead_holder_is_waited_out_and_the_group_taken_over():
    """Its holder refuses connections (killed): FindCoordinator waits out the lease and
    answers this agent, which took it over — not COORDINATOR_NOT_AVAILABLE, which
    librdkafka stops retrying after two tries (its admin's describe then timed out)."""
    asyncio.run(_a_dead_holder_is_waited_out_and_the_group_taken_over())


async def _a_dead_holder_is_waited_out_and_the_group_taken_over():
    store = ExpiringStore("peer", 0.5, renews=False)
    coord = coordinator_beside(store, closed_port())
    started = asyncio.get_running_loop().time()
    owner = await coord.coordinator_of("g")
    assert owner is not None and owner.agent_id == "me"
    assert 0.4 < asyncio.get_running_loop().time() - started < 2.0
    assert "g" in coord.groups


def test_a_dead_holder_is_waited_out_past_the_end_its_store_reports():
    """The end of the lease as the store reports it may be a few ms before the store's
    own (another clock, milliseconds): asked right at the reported end, the store still
    names the dead holder. The wait goes a little past it, and this agent takes over."""
    asyncio.run(_a_dead_holder_is_waited_out_past_the_end_its_store_reports())


async def _a_dead_holder_is_waited_out_past_the_end_its_store_reports():
    store = ExpiringStore("peer", 0.5, renews=False, reports_early_s=0.02)
    coord = coordinator_beside(store, closed_port())
    owner = await coord.coordinator_of("g")
    assert owner is not None and owner.agent_id == "me"


def test_a_holder_that_keeps_renewing_is_named_after_a_renew_interval():
    """This agent cannot reach the holder, which keeps renewing (its lease ~4 s from its
    end): named once the store shows its expiry moved on — about a renew interval, not
    the ~4 s of waiting out the lease a new member's FindCoordinator took before (a
    kafkajs join then missed the 6 s session timeout behind a cut)."""
    asyncio.run(_a_holder_that_keeps_renewing_is_named_after_a_renew_interval())


async def _a_holder_that_keeps_renewing_is_named_after_a_renew_interval():
    port = closed_port()
    store = ExpiringStore("peer", 3.9, renews=True)
    coord = coordinator_beside(store, port)
    started = asyncio.get_running_loop().time()
    owner = await coord.coordinator_of("g")
    assert owner is not None and (owner.agent_id, owner.port) == ("peer", port)
    assert 1.0 < asyncio.get_running_loop().time() - started < 2.5
    assert not coord.groups


def test_a_holder_that_just_died_is_waited_out_not_named():
    """Unreachable, its lease 3 s from its end and not renewed (killed a moment ago): not
    named — that would send every member into refused connections and FindCoordinators
    until the lease ends —, but waited out, and this agent takes the group over."""
    asyncio.run(_a_holder_that_just_died_is_waited_out_not_named())


async def _a_holder_that_just_died_is_waited_out_not_named():
    store = ExpiringStore("peer", 3.0, renews=False)
    coord = coordinator_beside(store, closed_port())
    started = asyncio.get_running_loop().time()
    owner = await coord.coordinator_of("g")
    assert owner is not None and owner.agent_id == "me"
    assert 2.8 < asyncio.get_running_loop().time() - started < 4.5
    assert "g" in coord.groups


def test_a_dead_holder_is_waited_out_when_one_answer_is_slower_than_the_other():
    """The store's two answers about a dead holder arrive with different latencies (a
    loaded machine, a slow link): the time left each carries, counted from its arrival,
    would put the same expiry 0.8 s later — taken for a renewal, the dead holder was
    named (a clean clone's CI saw it). The store's stamp of the expiry did not move."""
    asyncio.run(_a_dead_holder_is_waited_out_when_one_answer_is_slower_than_the_other())


async def _a_dead_holder_is_waited_out_when_one_answer_is_slower_than_the_other():
    store = ExpiringStore("peer", 3.0, renews=False)
    store.delays = [0.0, 0.8]
    coord = coordinator_beside(store, closed_port())
    owner = await coord.coordinator_of("g")
    assert owner is not None and owner.agent_id == "me"
    assert "g" in coord.groups


def test_without_the_stores_stamps_a_renewal_is_still_told_from_latency():
    """An older control plane answers no stamps: a holder whose expiry, estimated here,
    moved on by about a renew interval counts as renewed and is named. (A dead holder is
    told apart only within RENEWED_SLACK_S of the answers' latencies — the estimate the
    stamps replaced, which a loaded machine can fool: not asserted here.)"""
    asyncio.run(_without_the_stores_stamps_a_renewal_is_still_told_from_latency())


async def _without_the_stores_stamps_a_renewal_is_still_told_from_latency():
    alive = ExpiringStore("peer", 3.9, renews=True)
    alive.stamps = False
    port = closed_port()
    coord = coordinator_beside(alive, port)
    owner = await coord.coordinator_of("g")
    assert owner is not None and (owner.agent_id, owner.port) == ("peer", port)


def test_a_holder_known_from_before_its_last_renewals_is_not_taken_for_alive():
    """This agent learned of the holder's lease before the holder renewed it a few more
    times and died (SIGKILL): the remembered expiry must not be compared with a fresh
    one — the lease would look renewed, the dead holder be named, and members loop on
    refused connections until the lease ends (a kafka-python group missed the session
    timeout so). The answer waits the lease out and takes the group over."""
    asyncio.run(_a_holder_known_from_before_its_last_renewals_is_not_taken_for_alive())


async def _a_holder_known_from_before_its_last_renewals_is_not_taken_for_alive():
    store = ExpiringStore("peer", 4.0, renews=True, dies_in_s=1.0)
    coord = coordinator_beside(store, closed_port())
    assert await coord.leases.holder("g") == "peer"  # remembered: ends in 4 s
    await asyncio.sleep(1.2)  # it renewed until 1.0 s, then died: its lease ends at ~5 s
    started = asyncio.get_running_loop().time()
    owner = await coord.coordinator_of("g")
    assert owner is not None and owner.agent_id == "me"
    assert 3.3 < asyncio.get_running_loop().time() - started < 5.0
    assert "g" in coord.groups


def test_a_live_holder_this_agent_cannot_reach_is_named_all_the_same():
    """The holder keeps renewing but this agent cannot reach it: it is named at its
    address (members may reach it), after one wait for its lease's end, and at once
    from then on."""
    asyncio.run(_a_live_holder_this_agent_cannot_reach_is_named_all_the_same())


async def _a_live_holder_this_agent_cannot_reach_is_named_all_the_same():
    port = closed_port()
    store = ExpiringStore("peer", 0.3, renews=True)
    coord = coordinator_beside(store, port)
    owner = await coord.coordinator_of("g")
    assert owner is not None and (owner.agent_id, owner.port) == ("peer", port)
    started = asyncio.get_running_loop().time()
    again = await coord.coordinator_of("g")
    assert again is not None and again.agent_id == "peer"
    assert asyncio.get_running_loop().time() - started < 0.2
    assert not coord.groups
