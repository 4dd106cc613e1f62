"""The group coordinator: Kafka's classic consumer-group protocol, in this agent's memory.

Every group this agent coordinates (those whose lease it holds in the metadata store,
`agents.groups.leases`) is a state machine — Empty → PreparingRebalance →
CompletingRebalance → Stable, and Dead when it is deleted or its lease is lost or given
back — driven by JoinGroup, SyncGroup, Heartbeat, LeaveGroup and by timers: the initial
rebalance delay, the rebalance timeout, session timeouts and the sync timeout. The rules and error codes are those of Kafka's
GroupCoordinator (group-coordinator module, ClassicGroupMetadataManager).

JoinGroup and SyncGroup answers are parked as futures until the rebalance step they wait
for completes. Everything runs on the event loop, so no locks guard the state.

The group's state is saved in the metadata store under the lease (fenced by its epoch)
whenever a join completes and whenever the leader's assignment arrives, before anyone
is answered; a new holder of the lease loads it in PreparingRebalance, so the members
rejoin once and the generation goes on. Committed offsets live in the metadata store
too (`agents.handlers.group_offsets`). A summary of every group is reported to the
control plane (`groups/report`) every few seconds and soon after each change, for the
console (`agents.groups.reporting`). Which agent coordinates a group — its lease holder —
is found by `agents.groups.holder_search`; KIP-848 groups are `agents.groups.consumer`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from agents.control_plane import ControlPlaneClient, ControlPlaneError
from agents.groups.consumer import ConsumerGroups
from agents.groups.consumer_state import GROUP_TYPE as CONSUMER_GROUP_TYPE
from agents.groups.holder_search import HolderSearch
from agents.groups.leases import GroupLeases, b64, unb64
from agents.groups.reporting import REPORT_INTERVAL_S, GroupReporter
from agents.groups.ring import CoordinatorRing, Peer, node_id_for
from agents.groups.state import Group, GroupState, Member, resolve
from core.kafka.errors import ErrorCode

log = logging.getLogger(__name__)

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)

# group.min/max.session.timeout.ms (Kafka: 6 s / 30 min; the minimum is lower here so
# tests and impatient clients may use short sessions).
MIN_SESSION_TIMEOUT_MS = 1000
MAX_SESSION_TIMEOUT_MS = 30 * 60 * 1000
# group.initial.rebalance.delay.ms (Kafka: 3 s): how long a new group waits for more
# members before its first rebalance, extended while members keep arriving.
INITIAL_REBALANCE_DELAY_MS = 1000
# A member whose first JoinGroup is parked cannot heartbeat; Kafka gives it 5 minutes.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
MAINTENANCE_INTERVAL_S = 1.0
# An Empty group with no members is dropped from memory after this long (its offsets
# stay in the metadata store, so it is still listed and described as Empty).
EMPTY_GROUP_IDLE_S = 600.0
# An Empty group the store has nothing for is forgotten (`_forget`) only once it has been
# Empty this long: a group is loaded by a client's FindCoordinator or OffsetFetch and
# joined a round trip later, and forgetting it in between (the report follows any change
# within 0.2 s) gave its lease back under the joining member — on a slow metadata store
# the member's every try found a group taken afresh and forgotten again (CI saw it never
# join in 90 s).
FORGET_AFTER_S = 10.0


@dataclass
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str
    client_host: str
    require_known_member_id: bool  # KIP-394: JoinGroup v4+ without a group instance id
    supports_skip_assignment: bool  # KIP-814: JoinGroup v9+
    reason: str | None = None


# A parked JoinGroup/SyncGroup answer; an answer now or later; a parked answer with what
# it gets once the group is saved and what it gets if the save is refused.
Answer = asyncio.Future[dict[str, Any]]
JoinOrSync = dict[str, Any] | Answer
ParkedAnswer = tuple[Answer | None, dict[str, Any], dict[str, Any]]


def join_error(member_id: str, error: int) -> dict[str, Any]:
    return {
        "error_code": int(error),
        "generation_id": -1,
        "protocol_type": None,
        "protocol_name": None,
        "leader": "",
        "skip_assignment": False,
        "member_id": member_id,
        "members": [],
    }


def sync_error(error: int) -> dict[str, Any]:
    return {
        "error_code": int(error),
        "protocol_type": None,
        "protocol_name": None,
        "assignment": b"",
    }


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current


class GroupCoordinator:
    """The groups this agent coordinates, and the background work that keeps them."""

    def __init__(
        self,
        ring: CoordinatorRing,
        client: ControlPlaneClient,
        *,
        initial_rebalance_delay_ms: int = INITIAL_REBALANCE_DELAY_MS,
        report_interval_s: float = REPORT_INTERVAL_S,
        leases: GroupLeases | None = None,
    ) -> None:
        self.ring = ring
        self.client = client
        self.leases = leases or GroupLeases(client, ring.me.agent_id)
        self.leases.on_acquired = self._load
        self.leases.on_lost = self._lease_lost
        self.holder_search = HolderSearch(ring, self.leases)
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self.report_interval_s = report_interval_s
        self.groups: dict[str, Group] = {}
        # KIP-848 groups (group.protocol=consumer), under the same leases.
        self.consumer = ConsumerGroups(self)
        self._commit_locks: dict[str, list[Any]] = {}  # [lock, users]
        self.reporter = GroupReporter(
            client,
            ring.me.agent_id,
            interval_s=report_interval_s,
            collect=self._reports,
            forget=self._forget,
        )
        self._tasks: list[asyncio.Task[None]] = []

    # -- life -------------------------------------------------------------------------

    @classmethod
    def start_for(cls, me: Peer, client: ControlPlaneClient) -> GroupCoordinator:
        """The coordinator of a freshly started agent (`me`), its background work running."""
        coordinator = cls(CoordinatorRing(me, node_id_for), client)
        coordinator.start()
        return coordinator

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self.reporter.loop(), name="groups-report"),
            loop.create_task(self._maintenance_loop(), name="groups-maintenance"),
            loop.create_task(self.leases.renew_loop(), name="groups-leases"),
        ]

    async def close(self) -> None:
        """Answer parked requests with NOT_COORDINATOR and report that the groups left."""
        for task in self._tasks:
            task.cancel()
        for group in list(self.groups.values()):
            self._unload(group)
        for group_id in list(self.consumer.groups):
            self.consumer.unload(group_id)
        await self.leases.release_all()
        if self.reporter.reported:
            with contextlib.suppress(ControlPlaneError, asyncio.TimeoutError):
                await asyncio.wait_for(self.reporter.report_once(), 3)

    def live_agents_changed(self, live_agents: list[dict[str, Any]]) -> None:
        """A heartbeat answer arrived: take the live set (peers' addresses, zones)."""
        self.ring.update(live_agents)

    async def owns(self, group_id: str) -> bool:
        """Whether this agent holds the group's lease — taking it if nobody holds a live
        one (the group is then loaded from the metadata store)."""
        return await self.leases.holder(group_id) == self.ring.me.agent_id

    async def coordinator_of(self, group_id: str) -> Peer | None:
        """The agent coordinating the group (`HolderSearch.coordinator_of`)."""
        return await self.holder_search.coordinator_of(group_id)

    async def settled(self, group_id: str) -> None:
        """Wait until the group's state changes so far are saved (or failed)."""
        group = self.groups.get(group_id)
        task = group.save_task if group is not None else None
        if task is not None:
            await asyncio.shield(task)

    def _load(self, group_id: str, epoch: int, state: dict[str, Any]) -> None:
        """This agent took the group's lease: the group as the last holder saved it. With
        members it starts in PreparingRebalance (their heartbeats answer
        REBALANCE_IN_PROGRESS, they rejoin, the generation goes on); without, Empty."""
        old = self.groups.get(group_id)
        if old is not None:
            self._unload(old)
        self.consumer.unload(group_id)
        if state.get("group_type") == CONSUMER_GROUP_TYPE:
            self.consumer.load(group_id, state)
            self._changed()
            return
        group = self.groups[group_id] = Group(
            group_id,
            generation=int(state.get("generation") or 0),
            protocol_type=state.get("protocol_type") or None,
            protocol_name=state.get("protocol_name") or None,
            leader_id=state.get("leader") or None,
        )
        for saved in state.get("members") or ():
            member = Member(
                member_id=saved["member_id"],
                group_instance_id=saved.get("group_instance_id"),
                client_id=saved.get("client_id") or "",
                client_host=saved.get("client_host") or "",
                rebalance_timeout_ms=int(saved["rebalance_timeout_ms"]),
                session_timeout_ms=int(saved["session_timeout_ms"]),
                protocol_type=group.protocol_type or "",
                protocols=[(p["name"], unb64(p["metadata"])) for p in saved["protocols"]],
                assignment=unb64(saved.get("assignment") or ""),
            )
            group.add(member)
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members), None)
        log.info(
            "group %s: lease taken (epoch %d), generation %d with %d members",
            group_id,
            epoch,
            group.generation,
            len(group.members),
        )
        if group.members:
            group.state = COMPLETING  # as it was: members rejoin from here
            group.transition(PREPARING)
            group.join_timer = self._later(group.rebalance_timeout_ms, self._complete_join, group)
        self._changed()

    def lease_refused(self, group_id: str) -> None:
        """The metadata store refused this agent's lease of the group (a fenced write)."""
        if self.leases.held.pop(group_id, None) is not None:
            self._lease_lost(group_id)

    def _lease_lost(self, group_id: str) -> None:
        if group_id in self.consumer.groups:
            log.info("consumer group %s: lease lost; unloading it", group_id)
            self.consumer.unload(group_id)
            self._changed()
        group = self.groups.get(group_id)
        if group is not None:
            log.info("group %s: lease lost; unloading it", group_id)
            self._unload(group)

    def _state(self, group: Group) -> dict[str, Any]:
        """What the metadata store keeps of a group (docs/AGENT_API.md `groups/save`)."""
        return {
            "generation": group.generation,
            "protocol_type": group.protocol_type or "",
            "protocol_name": group.protocol_name,
            "leader": group.leader_id,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "session_timeout_ms": m.session_timeout_ms,
                    "rebalance_timeout_ms": m.rebalance_timeout_ms,
                    "protocols": [{"name": n, "metadata": b64(md)} for n, md in m.protocols],
                    "assignment": b64(m.assignment),
                }
                for m in group.members.values()
            ],
        }

    def _save_then_answer(self, group: Group, answers: list[ParkedAnswer]) -> None:
        """Save the group's state as it is now, then hand out `answers` — (future, answer,
        answer if the save is refused) — so no member learns a generation or an
        assignment the store does not hold. Saves of a group go out in order."""
        state = self._state(group)
        previous = group.save_task

        async def save() -> None:
            if previous is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(previous)
            saved = await self.leases.save(group.group_id, state)
            for future, answer, refused in answers:
                resolve(future, answer if saved else refused)
            if not saved and self.groups.get(group.group_id) is group:
                log.warning("group %s: state not saved; unloading it", group.group_id)
                self.leases.release(group.group_id)
                self._unload(group)

        group.save_task = asyncio.get_running_loop().create_task(save())

    # -- JoinGroup --------------------------------------------------------------------

    def join(self, req: JoinRequest) -> JoinOrSync:
        """A JoinGroup answer, or a future of it when the member must wait for the
        rebalance to complete."""
        if not req.group_id:
            return join_error(req.member_id, ErrorCode.INVALID_GROUP_ID)
        if not MIN_SESSION_TIMEOUT_MS <= req.session_timeout_ms <= MAX_SESSION_TIMEOUT_MS:
            return join_error(req.member_id, ErrorCode.INVALID_SESSION_TIMEOUT)
        if req.rebalance_timeout_ms < 0:  # JoinGroup v0 has none: the session timeout
            req.rebalance_timeout_ms = req.session_timeout_ms
        consumer = self.consumer.groups.get(req.group_id)
        if consumer is not None:
            if consumer.members:
                # A KIP-848 group: a classic member cannot join it (Kafka would convert
                # the group; here the protocols do not mix within one group id).
                return join_error(req.member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            self.consumer.unload(req.group_id)  # empty: it becomes a classic group
        unknown = req.member_id == ""
        group = self.groups.get(req.group_id)
        if group is None:
            if not unknown:
                return join_error(req.member_id, ErrorCode.UNKNOWN_MEMBER_ID)
            group = self.groups[req.group_id] = Group(req.group_id)
        try:
            if unknown:
                return self._join_new_member(group, req)
            return self._join_existing_member(group, req)
        finally:
            self._changed()

    def _join_new_member(self, group: Group, req: JoinRequest) -> JoinOrSync:
        if group.is_(DEAD):
            return join_error("", ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            return join_error("", ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        new_id = group.generate_member_id(req.client_id, req.group_instance_id)
        if req.group_instance_id is not None:
            existing = group.static_members.get(req.group_instance_id)
            if existing is not None:
                return self._replace_static_member(group, existing, new_id, req)
            return self._add_member_and_rebalance(group, new_id, req)
        if req.require_known_member_id:
            # KIP-394: hand out the id and ask for a second JoinGroup carrying it, so a
            # client that times out and retries does not leave a ghost member behind.
            group.pending_members[new_id] = self._later(
                req.session_timeout_ms, self._expire_pending_member, group, new_id
            )
            return join_error(new_id, ErrorCode.MEMBER_ID_REQUIRED)
        return self._add_member_and_rebalance(group, new_id, req)

    def _join_existing_member(self, group: Group, req: JoinRequest) -> JoinOrSync:
        member_id = req.member_id
        if group.is_(DEAD):
            return join_error(member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            return join_error(member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if member_id in group.pending_members:
            if req.group_instance_id is not None:  # pending ids are never static
                return join_error(member_id, ErrorCode.UNKNOWN_MEMBER_ID)
            _cancel(group.pending_members.pop(member_id))
            return self._add_member_and_rebalance(group, member_id, req)
        error = group.validate_member(member_id, req.group_instance_id)
        if error is not None:
            return join_error(member_id, error)
        member = group.members[member_id]
        if group.is_(PREPARING):
            return self._update_member_and_rebalance(group, member, req)
        if group.is_(COMPLETING):
            if member.matches(req.protocols):
                # It missed our answer: send the same one again.
                return self._join_answer(group, member)
            return self._update_member_and_rebalance(group, member, req)
        if group.is_(STABLE):
            # A rejoining leader forces a rebalance so it can reassign (new topics…).
            if member_id == group.leader_id or not member.matches(req.protocols):
                return self._update_member_and_rebalance(group, member, req)
            return self._join_answer(group, member)
        return join_error(member_id, ErrorCode.UNKNOWN_MEMBER_ID)  # Empty

    def _add_member_and_rebalance(
        self, group: Group, member_id: str, req: JoinRequest
    ) -> JoinOrSync:
        member = Member(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=list(req.protocols),
            is_new=True,
        )
        if group.is_(PREPARING) and group.previous_state is EMPTY:
            group.new_member_added = True  # extends the initial rebalance delay
        group.add(member)
        future = self._park_join(group, member)
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._rebalance_or_complete_join(
            group, f"adding member {member_id} (reason: {req.reason or 'not provided'})"
        )
        return future

    def _update_member_and_rebalance(
        self, group: Group, member: Member, req: JoinRequest
    ) -> JoinOrSync:
        member.protocols = list(req.protocols)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        future = self._park_join(group, member)
        self._rebalance_or_complete_join(
            group, f"member {member.member_id} rejoins (reason: {req.reason or 'not provided'})"
        )
        return future

    def _replace_static_member(
        self, group: Group, old_id: str, new_id: str, req: JoinRequest
    ) -> JoinOrSync:
        """KIP-345: a known group.instance.id joins with no member id — the same instance
        restarted. It takes over the old member's place (and assignment); the old member
        id is fenced."""
        current_leader = group.leader_id
        old = group.members[old_id]
        resolve(old.join_future, join_error(old_id, ErrorCode.FENCED_INSTANCE_ID))
        resolve(old.sync_future, sync_error(ErrorCode.FENCED_INSTANCE_ID))
        old.join_future = old.sync_future = None
        assert req.group_instance_id is not None
        member = group.replace_static_member(req.group_instance_id, old_id, new_id)
        member.protocols = list(req.protocols)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        member.client_id, member.client_host = req.client_id, req.client_host
        self._schedule_heartbeat(group, member, member.session_timeout_ms)
        reason = f"static member {req.group_instance_id} rejoined as {new_id}"
        if group.is_(STABLE):
            if group.protocol_name == group.select_protocol():
                # No rebalance. Answer with the old leader id so a restarted leader does
                # not compute an assignment the Stable group would never hand out —
                # unless the client can be told to skip assigning (KIP-814).
                if req.supports_skip_assignment:
                    is_leader = group.leader_id == new_id
                    answer = self._join_answer(group, member, skip_assignment=is_leader)
                else:
                    answer = self._join_answer(group, member)
                    answer.update(members=[], leader=current_leader or "")
                # The new member id must be in the store before it commits.
                future = asyncio.get_running_loop().create_future()
                refused = join_error(new_id, ErrorCode.NOT_COORDINATOR)
                self._save_then_answer(group, [(future, answer, refused)])
                return future
        # Commits are allowed while the group prepares a rebalance: the store must know
        # the instance's new member id before the member commits with it.
        self._save_then_answer(group, [])
        if group.is_(STABLE):
            future = self._park_join(group, member)
            self._rebalance_or_complete_join(group, reason)
            return future
        future = self._park_join(group, member)
        if group.is_(COMPLETING):
            # The leader may already be assigning for the old member id: start over.
            self._prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join(group)
        return future

    def _join_answer(
        self, group: Group, member: Member, *, skip_assignment: bool = False
    ) -> dict[str, Any]:
        is_leader = member.member_id == group.leader_id
        return {
            "error_code": 0,
            "generation_id": group.generation,
            "protocol_type": group.protocol_type,
            "protocol_name": group.protocol_name,
            "leader": group.leader_id or "",
            "skip_assignment": skip_assignment,
            "member_id": member.member_id,
            "members": group.member_entries() if is_leader else [],
        }

    def _park_join(self, group: Group, member: Member) -> Answer:
        # A member re-sending JoinGroup while one is parked: let the old one go.
        resolve(member.join_future, join_error(member.member_id, ErrorCode.REBALANCE_IN_PROGRESS))
        future = asyncio.get_running_loop().create_future()
        member.join_future = future
        future.add_done_callback(lambda f: self._parked_request_done(group, member, f))
        return future

    def _parked_request_done(self, group: Group, member: Member, future: Answer) -> None:
        """The client of a parked JoinGroup/SyncGroup went away (its connection closed).

        Kafka cannot notice this and waits for the rebalance or sync timeout (minutes
        with default client settings); an asyncio server can, so the member is treated
        as having left. A client that merely reconnects rejoins as a new member.
        """
        if not future.cancelled():
            return
        if future not in (member.join_future, member.sync_future):
            return
        if group.members.get(member.member_id) is not member:
            return
        member.join_future = member.sync_future = None
        log.info("group %s: member %s disconnected mid-rebalance", group.group_id, member.member_id)
        asyncio.get_running_loop().call_soon(
            self._remove_member_and_update_group, group, member, "member disconnected"
        )

    # -- rebalancing --------------------------------------------------------------------

    def _rebalance_or_complete_join(self, group: Group, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join(group)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(COMPLETING):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        _cancel(group.sync_timer)
        group.sync_timer = None
        _cancel(group.join_timer)
        group.join_timer = None
        group.pending_sync.clear()
        initial = group.is_(EMPTY)
        group.transition(PREPARING)
        log.info(
            "group %s: preparing to rebalance (generation %d): %s",
            group.group_id,
            group.generation,
            reason,
        )
        if initial:
            delay = self.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms - delay, 0)
            group.join_timer = self._later(
                delay, self._initial_delay_expired, group, delay, remaining
            )
        elif group.has_all_members_joined():
            self._complete_join(group)
        else:
            group.join_timer = self._later(group.rebalance_timeout_ms, self._complete_join, group)

    def _initial_delay_expired(self, group: Group, delay: int, remaining: int) -> None:
        group.join_timer = None
        if not group.is_(PREPARING):
            return
        if group.new_member_added and remaining > 0:
            group.new_member_added = False
            next_delay = min(self.initial_rebalance_delay_ms, remaining)
            group.join_timer = self._later(
                next_delay,
                self._initial_delay_expired,
                group,
                next_delay,
                max(remaining - delay, 0),
            )
            return
        self._complete_join(group)

    def _maybe_complete_join(self, group: Group) -> None:
        if (
            group.is_(PREPARING)
            and group.has_all_members_joined()
            and group.previous_state is not EMPTY  # the initial delay decides then
        ):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        _cancel(group.join_timer)
        group.join_timer = None
        if not group.is_(PREPARING):
            return
        for member in group.not_yet_rejoined():
            log.info(
                "group %s: member %s did not rejoin in time; removing it",
                group.group_id,
                member.member_id,
            )
            self._forget_member(group, member, ErrorCode.UNKNOWN_MEMBER_ID)
        group.elect_joined_leader()
        group.init_next_generation()
        self._changed()
        if group.is_(EMPTY):
            log.info("group %s is empty (generation %d)", group.group_id, group.generation)
            self._save_then_answer(group, [])
            return
        log.info(
            "group %s: generation %d with %d members, protocol %s, leader %s",
            group.group_id,
            group.generation,
            len(group.members),
            group.protocol_name,
            group.leader_id,
        )
        answers: list[ParkedAnswer] = []
        for member in group.members.values():
            future, member.join_future = member.join_future, None
            refused = join_error(member.member_id, ErrorCode.NOT_COORDINATOR)
            answers.append((future, self._join_answer(group, member), refused))
            member.is_new = False
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
        # The new generation is in the store before any member hears of it: a later
        # holder of the lease never hands out the same generation twice.
        self._save_then_answer(group, answers)
        group.pending_sync = set(group.members)
        group.sync_timer = self._later(
            group.rebalance_timeout_ms, self._expire_pending_sync, group, group.generation
        )

    def _expire_pending_sync(self, group: Group, generation: int) -> None:
        group.sync_timer = None
        if generation != group.generation or not group.is_(COMPLETING, STABLE):
            return
        late = [group.members[m] for m in group.pending_sync if m in group.members]
        if not late:
            return
        for member in late:
            log.info(
                "group %s: member %s did not sync in time; removing it",
                group.group_id,
                member.member_id,
            )
            self._forget_member(group, member, ErrorCode.UNKNOWN_MEMBER_ID)
        self._prepare_rebalance(group, "members failed to sync within the rebalance timeout")
        self._changed()

    def _reset_and_propagate_assignment_error(self, group: Group, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
            future, member.sync_future = member.sync_future, None
            resolve(future, sync_error(error))

    # -- SyncGroup --------------------------------------------------------------------

    def sync(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> JoinOrSync:
        """A SyncGroup answer, or a future of it until the leader's assignment arrives."""
        group = self.groups.get(group_id)
        if group is None or not group.members:
            return sync_error(ErrorCode.UNKNOWN_MEMBER_ID)
        error = group.validate_member(member_id, group_instance_id)
        if error is not None:
            return sync_error(error)
        if generation != group.generation:
            return sync_error(ErrorCode.ILLEGAL_GENERATION)
        if _inconsistent(protocol_type, group.protocol_type) or _inconsistent(
            protocol_name, group.protocol_name
        ):
            return sync_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.is_(PREPARING):
            return sync_error(ErrorCode.REBALANCE_IN_PROGRESS)
        member = group.members[member_id]
        self._synced(group, member_id)
        if group.is_(STABLE):
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
            return self._sync_answer(group, member)
        # CompletingRebalance: wait for the leader's assignment.
        resolve(member.sync_future, sync_error(ErrorCode.REBALANCE_IN_PROGRESS))
        future = asyncio.get_running_loop().create_future()
        member.sync_future = future
        future.add_done_callback(lambda f: self._parked_request_done(group, member, f))
        if member_id == group.leader_id:
            log.info(
                "group %s: assignment for generation %d received from leader %s",
                group.group_id,
                group.generation,
                member_id,
            )
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
            group.transition(STABLE)
            answers: list[ParkedAnswer] = []
            for m in group.members.values():
                waiting, m.sync_future = m.sync_future, None
                if waiting is not None:
                    refused = sync_error(ErrorCode.NOT_COORDINATOR)
                    answers.append((waiting, self._sync_answer(group, m), refused))
                    self._schedule_heartbeat(group, m, m.session_timeout_ms)
            self._save_then_answer(group, answers)
            self._changed()
        return future

    def _synced(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            _cancel(group.sync_timer)
            group.sync_timer = None

    @staticmethod
    def _sync_answer(group: Group, member: Member) -> dict[str, Any]:
        return {
            "error_code": 0,
            "protocol_type": group.protocol_type,
            "protocol_name": group.protocol_name,
            "assignment": member.assignment,
        }

    # -- Heartbeat and LeaveGroup -------------------------------------------------------

    def heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation: int
    ) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(member_id, group_instance_id)
        if error is not None:
            return error
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_(EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        member = group.members[member_id]
        self._schedule_heartbeat(group, member, member.session_timeout_ms)
        if group.is_(PREPARING):
            return ErrorCode.REBALANCE_IN_PROGRESS
        # CompletingRebalance too: members may heartbeat once they have their JoinGroup
        # answer, before the leader's assignment arrives.
        return ErrorCode.NONE

    def leave(
        self, group_id: str, identities: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        """(top-level error, [(member id, group instance id, error)]) — KIP-345 batches."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, []
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        results = []
        for member_id, instance_id in identities:
            if member_id == "":
                # Admin removal by group.instance.id (kafka-consumer-groups --delete).
                known = group.static_members.get(instance_id) if instance_id else None
                if known is None:
                    results.append((member_id, instance_id, ErrorCode.UNKNOWN_MEMBER_ID))
                    continue
                member = group.members[known]
            elif member_id in group.pending_members:
                _cancel(group.pending_members.pop(member_id))
                self._maybe_complete_join(group)
                results.append((member_id, instance_id, ErrorCode.NONE))
                continue
            else:
                error = group.validate_member(member_id, instance_id)
                if error is not None:
                    results.append((member_id, instance_id, error))
                    continue
                member = group.members[member_id]
            log.info("group %s: member %s left", group_id, member.member_id)
            self._remove_member_and_update_group(group, member, f"{member.member_id} left")
            results.append((member_id, instance_id, ErrorCode.NONE))
        return ErrorCode.NONE, results

    # -- members leaving ------------------------------------------------------------------

    def _schedule_heartbeat(self, group: Group, member: Member, timeout_ms: int) -> None:
        _cancel(member.heartbeat_timer)
        member.heartbeat_timer = self._later(timeout_ms, self._session_expired, group, member)

    def _session_expired(self, group: Group, member: Member) -> None:
        member.heartbeat_timer = None
        if group.members.get(member.member_id) is not member:
            return
        if not member.is_new and (member.awaiting_join or member.awaiting_sync):
            # Waiting on us, not silent: the rebalance and sync timeouts govern it.
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
            return
        log.info("group %s: member %s session expired", group.group_id, member.member_id)
        self._remove_member_and_update_group(group, member, f"{member.member_id} expired")

    def _expire_pending_member(self, group: Group, member_id: str) -> None:
        if member_id in group.pending_members:
            del group.pending_members[member_id]
            self._maybe_complete_join(group)

    def _forget_member(self, group: Group, member: Member, error: int) -> None:
        """Take a member out, answering whatever it has parked."""
        future, member.join_future = member.join_future, None
        resolve(future, join_error("", error))
        future, member.sync_future = member.sync_future, None
        resolve(future, sync_error(error))
        _cancel(member.heartbeat_timer)
        member.heartbeat_timer = None
        group.remove(member.member_id)

    def _remove_member_and_update_group(self, group: Group, member: Member, reason: str) -> None:
        if group.members.get(member.member_id) is not member:
            return
        self._forget_member(group, member, ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_(STABLE, COMPLETING):
            self._rebalance_or_complete_join(group, reason)
        elif group.is_(PREPARING):
            self._maybe_complete_join(group)
        self._changed()

    # -- offsets, admin --------------------------------------------------------------------

    def validate_commit(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation: int
    ) -> ErrorCode | None:
        """Kafka's rules for OffsetCommit: None when the commit may be stored."""
        if group_id in self.consumer.groups:
            return self.consumer.validate_commit(group_id, member_id, generation)
        group = self.groups.get(group_id)
        if group is None or not group.known:
            # Not using group management (assign() + commit), or a stale generation.
            return None if generation < 0 else ErrorCode.ILLEGAL_GENERATION
        if group.is_(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and group.is_(EMPTY):
            return None
        if generation >= 0 or member_id or group_instance_id is not None:
            error = group.validate_member(member_id, group_instance_id)
            if error is not None:
                return error
            if generation != group.generation:
                return ErrorCode.ILLEGAL_GENERATION
        elif not group.is_(EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(COMPLETING):
            return ErrorCode.REBALANCE_IN_PROGRESS
        member = group.members.get(member_id)
        if member is not None:  # a commit counts as a heartbeat
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
        return None

    @contextlib.asynccontextmanager
    async def commits_in_order(self, group_id: str) -> AsyncIterator[None]:
        """Serialize a group's offset commits: the server runs pipelined requests
        concurrently, and a later commit must not be overtaken by an earlier one."""
        entry = self._commit_locks.setdefault(group_id, [asyncio.Lock(), 0])
        entry[1] += 1
        try:
            async with entry[0]:
                yield
        finally:
            entry[1] -= 1
            if entry[1] == 0:
                self._commit_locks.pop(group_id, None)

    def delete(self, group_id: str) -> tuple[ErrorCode | None, bool]:
        """DeleteGroups, in memory: (NON_EMPTY_GROUP or None, whether it was here)."""
        consumer = self.consumer.groups.get(group_id)
        if consumer is not None:
            if consumer.members:
                return ErrorCode.NON_EMPTY_GROUP, True
            self.consumer.unload(group_id)
            self.leases.release(group_id)
            return None, consumer.group_epoch > 0
        group = self.groups.get(group_id)
        if group is None:
            return None, False
        if not group.is_(EMPTY, DEAD):
            return ErrorCode.NON_EMPTY_GROUP, True
        self._unload(group)
        self.leases.release(group_id)
        # A group loaded from the store and never joined since was not "here".
        return None, group.generation > 0

    def listing(self) -> list[Group]:
        return [g for g in self.groups.values() if g.known]

    def drop_classic(self, group_id: str) -> None:
        """An Empty classic group (offsets only) becomes a KIP-848 group."""
        group = self.groups.get(group_id)
        if group is not None:
            self._unload(group)

    # -- moving and reporting -------------------------------------------------------------

    def _unload(self, group: Group) -> None:
        """Let go of a group (it moved to another agent, was deleted, or we stop)."""
        _cancel(group.join_timer)
        group.join_timer = None
        _cancel(group.sync_timer)
        group.sync_timer = None
        for timer in group.pending_members.values():
            _cancel(timer)
        for member in group.members.values():
            future, member.join_future = member.join_future, None
            resolve(future, join_error(member.member_id, ErrorCode.NOT_COORDINATOR))
            future, member.sync_future = member.sync_future, None
            resolve(future, sync_error(ErrorCode.NOT_COORDINATOR))
            _cancel(member.heartbeat_timer)
            member.heartbeat_timer = None
        if not group.is_(DEAD):
            group.transition(DEAD)
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]
        self._changed()

    def _changed(self) -> None:
        self.reporter.changed()

    def _reports(self) -> list[dict[str, Any]]:
        """A summary of every group held here, for `groups/report`."""
        reports = [g.report() for g in self.groups.values()]
        reports += [self.consumer.report(g) for g in self.consumer.listing()]
        return reports

    def _forget(self, group_ids: Iterable[str]) -> None:
        """Empty groups the store has nothing for (never committed, or deleted), once
        Empty for `FORGET_AFTER_S`: Kafka forgets those too."""
        settled = time.time() - FORGET_AFTER_S
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if (
                group is not None
                and group.is_(EMPTY)
                and not group.pending_members
                and group.state_since < settled
            ):
                self._unload(group)
                self.leases.release(group_id)
            consumer = self.consumer.groups.get(group_id)
            if consumer is not None and not consumer.members and consumer.state_since < settled:
                self.consumer.unload(group_id)
                self.leases.release(group_id)

    async def _maintenance_loop(self) -> None:
        while True:
            await asyncio.sleep(MAINTENANCE_INTERVAL_S)
            try:
                await self.ring.check_all()
                now = time.time()
                for group in list(self.groups.values()):
                    idle = group.is_(EMPTY) and not group.pending_members
                    if idle and now - group.state_since > EMPTY_GROUP_IDLE_S:
                        self._unload(group)
                        self.leases.release(group.group_id)
                for consumer in self.consumer.listing():
                    idle = not consumer.members
                    if idle and now - consumer.state_since > EMPTY_GROUP_IDLE_S:
                        self.consumer.unload(consumer.group_id)
                        self.leases.release(consumer.group_id)
            except Exception:
                log.exception("group maintenance failed")

    @staticmethod
    def _later(delay_ms: int, callback: Callable[..., object], *args: Any) -> asyncio.TimerHandle:
        return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, callback, *args)


def _cancel(handle: asyncio.TimerHandle | None) -> None:
    if handle is not None:
        handle.cancel()
