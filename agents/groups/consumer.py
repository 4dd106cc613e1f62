"""KIP-848 consumer groups (`group.protocol=consumer`): the coordinator assigns.

Members send ConsumerGroupHeartbeat with their subscription and the partitions they own;
the coordinator keeps the group epoch (bumped whenever membership, a subscription or the
subscribed topics' partitions change), computes a target assignment for that epoch with
a server-side assignor (`uniform`, the default, or `range`), and moves each member
towards its target one heartbeat at a time. A partition goes to its new owner only once
its previous owner no longer holds it: a member first loses what it must give up (its
answer's assignment leaves them out; its member epoch stays), acknowledges by
heartbeating without them, then gets the next epoch and whatever of its target is free —
so no partition is held by two members at once. Partitions still held by others are
handed over at later heartbeats, as they are released.

A stale or future member epoch is fenced (FENCED_MEMBER_EPOCH), an unknown member id is
UNKNOWN_MEMBER_ID; a member that stops heartbeating is removed after the session timeout
(its partitions freed), one that does not give up partitions within its rebalance timeout
is removed too. Member epoch -1 leaves, -2 (a static member's temporary leave) too.

The group lives in the coordinator agent's memory (`agents.groups.coordinator`, one
coordinator per group by the store's lease), and every change a member could learn of —
epochs, members, assignments — is saved in the metadata store under the lease before it
is answered (`groups/save`, type `consumer`). A new coordinator loads it and goes on: the
members keep their ids, epochs and partitions. Steady heartbeats change nothing and save
nothing. Offset commits carry the member id and epoch and are checked here and again by
the store against the saved members (`metadata_store.group_leases`): the member's current
epoch or the one before it (a commit made while revoking), else STALE_MEMBER_EPOCH.
Rules and error codes follow Kafka's GroupMetadataManager / ConsumerGroup.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from agents.groups.assignors import ASSIGNORS, TopicPartition
from agents.groups.consumer_state import (
    GROUP_TYPE,
    PROTOCOL_TYPE,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    by_topic,
)
from core.kafka.errors import ErrorCode

if TYPE_CHECKING:
    from agents.groups.leases import GroupLeases
    from agents.topics import TopicInfo

log = logging.getLogger(__name__)


class _Coordinator(Protocol):
    """What KIP-848 groups use of the agent's `GroupCoordinator` (which holds them: a
    Protocol, not an import, so the two modules do not import each other)."""

    @property
    def groups(self) -> Mapping[str, Any]: ...  # the classic groups, by id

    @property
    def leases(self) -> GroupLeases: ...

    def drop_classic(self, group_id: str) -> None: ...

    def _changed(self) -> None: ...


# Kafka's group.consumer.session.timeout.ms / group.consumer.heartbeat.interval.ms
# defaults; the cluster's settings override them (`consumer_session_timeout_ms`,
# `consumer_heartbeat_interval_ms`).
DEFAULT_SESSION_TIMEOUT_MS = 45_000
DEFAULT_HEARTBEAT_INTERVAL_MS = 5_000
# A regex subscription is resolved against the topic list again when a heartbeat finds
# its last resolution older than this (and at once when it is new).
REGEX_REFRESH_S = 2.0
LEAVE_EPOCH, STATIC_LEAVE_EPOCH = -1, -2

# -- the coordinator's side -------------------------------------------------------------------


@dataclass
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    topic_names: list[str] | None
    topic_regex: str | None
    server_assignor: str | None
    owned: set[TopicPartition] | None
    client_id: str = ""
    client_host: str = ""
    version: int = 1


def heartbeat_error(error: int, message: str | None = None) -> dict[str, Any]:
    return {
        "error_code": int(error),
        "error_message": message,
        "member_id": None,
        "member_epoch": -1,
        "heartbeat_interval_ms": 0,
        "assignment": None,
    }


def _assignment(partitions: set[TopicPartition]) -> dict[str, Any]:
    return {
        "topic_partitions": [
            {"topic_id": uuid.UUID(t), "partitions": ps} for t, ps in by_topic(partitions).items()
        ]
    }


TopicsLookup = Callable[[set[str], bool], Any]


class ConsumerGroups:
    """The KIP-848 groups this agent coordinates (`GroupCoordinator.consumer`)."""

    def __init__(self, coordinator: _Coordinator) -> None:
        self.coordinator = coordinator
        self.groups: dict[str, ConsumerGroup] = {}
        self.settings: dict[str, Any] = {}  # the cluster's config (agents.runtime)

    # -- settings -----------------------------------------------------------------------

    def _setting(self, name: str, default: int) -> int:
        value = self.settings.get(name)
        return value if isinstance(value, int) and value > 0 else default

    @property
    def session_timeout_ms(self) -> int:
        return self._setting("consumer_session_timeout_ms", DEFAULT_SESSION_TIMEOUT_MS)

    @property
    def heartbeat_interval_ms(self) -> int:
        return self._setting("consumer_heartbeat_interval_ms", DEFAULT_HEARTBEAT_INTERVAL_MS)

    # -- loading and unloading ------------------------------------------------------------

    def load(self, group_id: str, state: dict[str, Any]) -> None:
        self.unload(group_id)
        group = self.groups[group_id] = ConsumerGroup.loaded(group_id, state)
        for member in group.members.values():
            self._touch(group, member)
            if member.state is MemberState.UNREVOKED:
                self._start_revocation_timer(group, member)
        log.info(
            "consumer group %s loaded: epoch %d with %d members",
            group_id,
            group.group_epoch,
            len(group.members),
        )

    def unload(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        if group is None:
            return
        group.dead = True
        for member in group.members.values():
            _cancel(member.session_timer)
            _cancel(member.rebalance_timer)

    def listing(self) -> list[ConsumerGroup]:
        return list(self.groups.values())

    # -- ConsumerGroupHeartbeat ---------------------------------------------------------

    def _validate(self, req: HeartbeatRequest) -> tuple[int, str] | None:
        if not req.group_id:
            return ErrorCode.INVALID_GROUP_ID, "GroupId can't be empty."
        if req.instance_id == "":
            return ErrorCode.INVALID_REQUEST, "InstanceId can't be empty."
        if req.rack_id == "":
            return ErrorCode.INVALID_REQUEST, "RackId can't be empty."
        if req.member_epoch == 0:
            if req.version >= 1 and not req.member_id:
                return ErrorCode.INVALID_REQUEST, "MemberId can't be empty."
            if req.rebalance_timeout_ms == -1:
                return ErrorCode.INVALID_REQUEST, "RebalanceTimeoutMs must be provided."
            if req.owned:
                return ErrorCode.INVALID_REQUEST, "TopicPartitions must be empty when joining."
            if not req.topic_names and not req.topic_regex:
                return (
                    ErrorCode.INVALID_REQUEST,
                    "SubscribedTopicNames or SubscribedTopicRegex must be set.",
                )
        elif not req.member_id:
            return ErrorCode.INVALID_REQUEST, "MemberId can't be empty."
        if req.member_epoch < STATIC_LEAVE_EPOCH:
            return ErrorCode.INVALID_REQUEST, f"MemberEpoch {req.member_epoch} is invalid."
        if req.server_assignor is not None and req.server_assignor not in ASSIGNORS:
            return (
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {req.server_assignor} is not supported; use one of {ASSIGNORS}.",
            )
        if req.topic_regex is not None:
            try:
                re.compile(req.topic_regex)
            except re.error as exc:
                return ErrorCode.INVALID_REGULAR_EXPRESSION, f"{req.topic_regex}: {exc}"
        return None

    async def heartbeat(
        self, req: HeartbeatRequest, lookup: Callable[[set[str], bool], Any]
    ) -> dict[str, Any]:
        """The ConsumerGroupHeartbeat answer. `lookup(names, with_all)` → the topics
        {name: TopicInfo} among `names`, plus every topic when `with_all` (regexes)."""
        invalid = self._validate(req)
        if invalid is not None:
            return heartbeat_error(*invalid)
        classic = self.coordinator.groups.get(req.group_id)
        if classic is not None and classic.known:
            if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                return heartbeat_error(ErrorCode.UNKNOWN_MEMBER_ID)
            return heartbeat_error(
                ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group."
            )
        group = self.groups.get(req.group_id)
        if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return await self._leave(group, req)
        if group is None:
            if req.member_epoch != 0:
                return heartbeat_error(ErrorCode.UNKNOWN_MEMBER_ID)
            if classic is not None:  # an Empty classic group, offsets only: it converts
                self.coordinator.drop_classic(req.group_id)
            group = self.groups[req.group_id] = ConsumerGroup(req.group_id)
        member = group.members.get(req.member_id)
        if req.member_epoch == 0:
            if member is not None:
                # Rejoining (it was fenced, or lost its state): a new member.
                self._forget(group, member)
                member = None
        elif member is None:
            return heartbeat_error(ErrorCode.UNKNOWN_MEMBER_ID)
        else:
            fenced = self._fenced(member, req)
            if fenced is not None:
                return heartbeat_error(*fenced)
        # The subscribed topics, looked up before anything changes (the lookup waits).
        names, regexes = self._subscriptions(group, member, req)
        found = await lookup(names, False) if names else {}
        if group.dead or self.groups.get(group.group_id) is not group:
            return heartbeat_error(ErrorCode.NOT_COORDINATOR)
        if req.member_epoch != 0 and group.members.get(req.member_id) is not member:
            return heartbeat_error(ErrorCode.UNKNOWN_MEMBER_ID)
        before = self._snapshot(group)
        joined = member is None or group.members.get(member.member_id) is not member
        replaced = False
        if member is None or joined:
            new_id = req.member_id or str(uuid.uuid4())
            static = self._static_member(group, req.instance_id)
            if static is not None and static.member_epoch != STATIC_LEAVE_EPOCH:
                return heartbeat_error(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {static.member_id} with instance id {req.instance_id}"
                    " is still in the group.",
                )
            if static is not None:  # it comes back: its assignment and epoch go on
                member = self._replace_static(group, static, new_id)
                replaced = True
            else:
                member = ConsumerMember(member_id=new_id)
                group.members[member.member_id] = member
            log.info("consumer group %s: member %s joined", group.group_id, member.member_id)
        if self._update_member(member, req) or (joined and not replaced):
            group.bump()
        self._update_topics(group, found, regexes)
        self._resolve_later(group, regexes, lookup)
        if group.group_epoch > group.assignment_epoch:
            group.compute_target()
        previous = (member.member_epoch, frozenset(member.assigned))
        group.reconcile(member, req.owned)
        if member.state is MemberState.UNREVOKED:
            self._start_revocation_timer(group, member)
        else:
            _cancel(member.rebalance_timer)
            member.rebalance_timer = None
        self._touch(group, member)
        if self._snapshot(group) != before and not await self._save(group):
            return heartbeat_error(ErrorCode.NOT_COORDINATOR)
        changed = previous != (member.member_epoch, frozenset(member.assigned))
        self.coordinator._changed()
        return {
            "error_code": 0,
            "error_message": None,
            "member_id": member.member_id,
            "member_epoch": member.member_epoch,
            "heartbeat_interval_ms": self.heartbeat_interval_ms,
            "assignment": _assignment(member.assigned)
            if req.member_epoch == 0 or req.owned is not None or changed
            else None,
        }

    @staticmethod
    def _fenced(member: ConsumerMember, req: HeartbeatRequest) -> tuple[int, str] | None:
        """Kafka's throwIfMemberEpochIsInvalid."""
        received = req.member_epoch
        if received > member.member_epoch:
            return (
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a greater member epoch ({received}) than the"
                f" one known by the group coordinator ({member.member_epoch}).",
            )
        if received < member.member_epoch and (
            received != member.previous_member_epoch
            or req.owned is None
            or not req.owned <= member.assigned
        ):
            return (
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a smaller member epoch ({received}) than the"
                f" one known by the group coordinator ({member.member_epoch}).",
            )
        return None

    def _subscriptions(
        self, group: ConsumerGroup, member: ConsumerMember | None, req: HeartbeatRequest
    ) -> tuple[set[str], set[str]]:
        names: set[str] = set()
        regexes: set[str] = set()
        for m in group.members.values():
            if m is member:
                continue
            names.update(m.topic_names)
            if m.topic_regex:
                regexes.add(m.topic_regex)
        mine = (
            req.topic_names
            if req.topic_names is not None
            else (member.topic_names if member else [])
        )
        regex = (
            req.topic_regex
            if req.topic_regex is not None
            else (member.topic_regex if member else None)
        )
        names.update(mine)
        if regex:
            regexes.add(regex)
        return names, regexes

    @staticmethod
    def _update_member(member: ConsumerMember, req: HeartbeatRequest) -> bool:
        """Take the request's fields; whether the subscription changed."""
        changed = False
        if req.topic_names is not None and sorted(req.topic_names) != sorted(member.topic_names):
            member.topic_names = sorted(set(req.topic_names))
            changed = True
        if req.topic_regex is not None:
            regex = req.topic_regex or None
            if regex != member.topic_regex:
                member.topic_regex = regex
                changed = True
        if req.server_assignor is not None and req.server_assignor != member.server_assignor:
            member.server_assignor = req.server_assignor
            changed = True
        if req.instance_id is not None:
            member.instance_id = req.instance_id
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        if req.rebalance_timeout_ms > 0:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.client_id:
            member.client_id = req.client_id
        if req.client_host:
            member.client_host = req.client_host
        return changed

    @staticmethod
    def _update_topics(
        group: ConsumerGroup, found: dict[str, TopicInfo], regexes: set[str]
    ) -> None:
        """The group's subscribed topics: the literal names as just looked up and the
        regexes' matches as last resolved; a change is a new epoch."""
        wanted = {n for m in group.members.values() for n in m.topic_names}
        topics = {
            name: (info.topic_id_str, info.partitions)
            for name, info in found.items()
            if info is not None and name in wanted
        }
        for regex in regexes:
            topics.update(group.resolved.get(regex, {}))
        if topics != group.topics:
            if group.topics is not None:  # a new group's first look is its join's epoch
                group.bump()
            group.topics = topics

    def _resolve_later(
        self, group: ConsumerGroup, regexes: set[str], lookup: Callable[[set[str], bool], Any]
    ) -> None:
        """Resolve new regexes, and those not resolved for REGEX_REFRESH_S, against the
        topic list in the background; changed matches are a new group epoch and target at
        once (saved), which the members get at their next heartbeat."""
        now = time.monotonic()
        due = {r for r in regexes if now - group.resolved_at.get(r, -math.inf) > REGEX_REFRESH_S}
        for gone in set(group.resolved) - regexes:
            group.resolved.pop(gone, None)
            group.resolved_at.pop(gone, None)
        if not due or (group.resolving is not None and not group.resolving.done()):
            return

        async def resolve() -> None:
            try:
                everything = await lookup(set(), True)
            except Exception as exc:  # the next heartbeat tries again
                log.warning("consumer group %s: resolving regexes failed: %s", group.group_id, exc)
                return
            done = time.monotonic()
            for regex in due:
                pattern = re.compile(regex)
                group.resolved[regex] = {
                    name: (info.topic_id_str, info.partitions)
                    for name, info in everything.items()
                    if info is not None and pattern.fullmatch(name)
                }
                group.resolved_at[regex] = done
            if group.dead or self.groups.get(group.group_id) is not group:
                return
            wanted = {n for m in group.members.values() for n in m.topic_names}
            found = {n: v for n, v in (group.topics or {}).items() if n in wanted}
            used = {m.topic_regex for m in group.members.values() if m.topic_regex}
            for regex in used:
                found.update(group.resolved.get(regex, {}))
            if group.topics is not None and found != group.topics:
                group.topics = found
                group.bump()
                group.compute_target()
                await self._save(group)
                self.coordinator._changed()

        group.resolving = asyncio.get_running_loop().create_task(resolve())

    @staticmethod
    def _snapshot(group: ConsumerGroup) -> tuple[object, ...]:
        return (
            group.group_epoch,
            group.assignment_epoch,
            tuple(
                (m.member_id, m.member_epoch, m.previous_member_epoch, m.state, frozenset(m.assigned),
                 frozenset(m.revoking), tuple(m.topic_names), m.topic_regex, m.server_assignor)
                for m in group.members.values()
            ),
        )  # fmt: skip

    async def _save(self, group: ConsumerGroup) -> bool:
        """Save the group as it is now; in order (the lock is taken before any await)."""
        state = group.saved()
        async with group.save_lock:
            saved = await self.coordinator.leases.save(group.group_id, state)
        if not saved and self.groups.get(group.group_id) is group:
            log.warning("consumer group %s: state not saved; unloading it", group.group_id)
            self.coordinator.leases.release(group.group_id)
            self.unload(group.group_id)
        return saved

    @staticmethod
    def _static_member(group: ConsumerGroup, instance_id: str | None) -> ConsumerMember | None:
        if instance_id is None:
            return None
        return next((m for m in group.members.values() if m.instance_id == instance_id), None)

    def _replace_static(
        self, group: ConsumerGroup, old: ConsumerMember, new_id: str
    ) -> ConsumerMember:
        """KIP-848 static membership: a member with the instance id of one that left
        temporarily (epoch -2) takes its place — partitions, target and epoch."""
        _cancel(old.session_timer)
        _cancel(old.rebalance_timer)
        del group.members[old.member_id]
        member = ConsumerMember.loaded({**old.saved(), "member_id": new_id})
        member.member_epoch = (
            old.previous_member_epoch if old.member_epoch < 0 else old.member_epoch
        )
        group.members[new_id] = member
        group.target[new_id] = group.target.pop(old.member_id, set())
        for tp in member.assigned | member.revoking:
            group.owners[tp] = new_id
        return member

    async def _leave(self, group: ConsumerGroup | None, req: HeartbeatRequest) -> dict[str, Any]:
        member = group.members.get(req.member_id) if group is not None else None
        if group is None or member is None:
            return heartbeat_error(ErrorCode.UNKNOWN_MEMBER_ID)
        if req.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            # A static member leaving for a while: it keeps its partitions until its
            # session times out, for the instance to come back to.
            log.info(
                "consumer group %s: static member %s left for now", group.group_id, member.member_id
            )
            if member.member_epoch >= 0:
                member.previous_member_epoch = member.member_epoch
            member.member_epoch = STATIC_LEAVE_EPOCH
        else:
            log.info("consumer group %s: member %s left", group.group_id, member.member_id)
            self._forget(group, member)
        if not await self._save(group):
            return heartbeat_error(ErrorCode.NOT_COORDINATOR)
        self.coordinator._changed()
        return {
            "error_code": 0,
            "error_message": None,
            "member_id": member.member_id,
            "member_epoch": req.member_epoch,
            "heartbeat_interval_ms": 0,
            "assignment": None,
        }

    # -- members going away -------------------------------------------------------------

    def _forget(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        _cancel(member.session_timer)
        _cancel(member.rebalance_timer)
        member.session_timer = member.rebalance_timer = None
        group.remove(member)

    def _touch(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        _cancel(member.session_timer)
        member.session_timer = asyncio.get_running_loop().call_later(
            self.session_timeout_ms / 1000, self._expire, group, member, "session timeout"
        )

    def _start_revocation_timer(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.rebalance_timer is None:
            member.rebalance_timer = asyncio.get_running_loop().call_later(
                member.rebalance_timeout_ms / 1000,
                self._expire,
                group,
                member,
                "did not revoke within its rebalance timeout",
            )

    def _expire(self, group: ConsumerGroup, member: ConsumerMember, why: str) -> None:
        if group.dead or group.members.get(member.member_id) is not member:
            return
        log.info("consumer group %s: member %s removed: %s", group.group_id, member.member_id, why)
        self._forget(group, member)
        # Its partitions are free for the others; they learn at their next heartbeat.
        # The save goes out in the background; a refused one unloads the group.
        asyncio.get_running_loop().create_task(self._save(group))
        self.coordinator._changed()

    # -- offsets and admin ------------------------------------------------------------------

    def validate_commit(self, group_id: str, member_id: str, member_epoch: int) -> ErrorCode | None:
        """KIP-848's OffsetCommit rules; None when the commit may be stored."""
        group = self.groups.get(group_id)
        assert group is not None
        if member_epoch < 0 and not group.members:
            return None  # outside group management (assign(), admins), while it is empty
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch not in (member.member_epoch, member.previous_member_epoch):
            return ErrorCode.STALE_MEMBER_EPOCH
        return None

    def report(self, group: ConsumerGroup) -> dict[str, Any]:
        """What the control plane keeps about the group (docs/AGENT_API.md groups/report)."""
        names = {tid: name for name, (tid, _) in (group.topics or {}).items()}

        def named(partitions: set[TopicPartition]) -> list[dict[str, Any]]:
            return [
                {"topic": names.get(t, t), "partitions": ps}
                for t, ps in sorted(
                    by_topic(partitions).items(), key=lambda kv: names.get(kv[0], kv[0])
                )
            ]

        return {
            "group_id": group.group_id,
            "group_type": GROUP_TYPE,
            "state": group.state.value,
            "protocol_type": PROTOCOL_TYPE,
            "protocol": group.assignor,
            "generation": group.group_epoch,
            "assignment_epoch": group.assignment_epoch,
            "leader": "",
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_epoch": m.member_epoch,
                    "assignment": named(m.assigned),
                    "target_assignment": named(group.target.get(m.member_id, set())),
                }
                for m in group.members.values()
            ],
        }


def _cancel(handle: asyncio.TimerHandle | None) -> None:
    if handle is not None:
        handle.cancel()
