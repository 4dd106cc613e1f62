"""A KIP-848 consumer group's state: members, epochs, the target assignment and each
member's reconciliation towards it (Kafka's ConsumerGroup, ConsumerGroupMember and
CurrentAssignmentBuilder), and its saved form in the metadata store.

No timers and no I/O here: the coordinator's side (`agents.groups.consumer`) drives it
from ConsumerGroupHeartbeat and saves it under the group's lease.
"""

from __future__ import annotations

import asyncio
import enum
import re
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agents.groups.assignors import ASSIGNORS, TopicPartition, range_assign, uniform_assign

GROUP_TYPE = "consumer"
# The protocol type DescribeGroups and ListGroups answer for these groups (Kafka's).
PROTOCOL_TYPE = "consumer"


class GroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED = "unrevoked_partitions"  # must give partitions up first
    UNRELEASED = "unreleased_partitions"  # waits for partitions others still hold


@dataclass(eq=False)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    topic_names: list[str] = field(default_factory=list)
    topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: set[TopicPartition] = field(default_factory=set)
    revoking: set[TopicPartition] = field(default_factory=set)
    session_timer: asyncio.TimerHandle | None = None
    rebalance_timer: asyncio.TimerHandle | None = None

    def saved(self) -> dict[str, Any]:
        return {
            "member_id": self.member_id,
            "group_instance_id": self.instance_id,
            "rack_id": self.rack_id,
            "client_id": self.client_id,
            "client_host": self.client_host,
            "rebalance_timeout_ms": self.rebalance_timeout_ms,
            "topic_names": self.topic_names,
            "topic_regex": self.topic_regex,
            "server_assignor": self.server_assignor,
            "member_epoch": self.member_epoch,
            "previous_member_epoch": self.previous_member_epoch,
            "state": self.state.value,
            "assigned": _listed(self.assigned),
            "revoking": _listed(self.revoking),
        }

    @classmethod
    def loaded(cls, saved: dict[str, Any]) -> ConsumerMember:
        return cls(
            member_id=saved["member_id"],
            instance_id=saved.get("group_instance_id"),
            rack_id=saved.get("rack_id"),
            client_id=saved.get("client_id") or "",
            client_host=saved.get("client_host") or "",
            rebalance_timeout_ms=int(saved.get("rebalance_timeout_ms") or 300_000),
            topic_names=list(saved.get("topic_names") or ()),
            topic_regex=saved.get("topic_regex"),
            server_assignor=saved.get("server_assignor"),
            member_epoch=int(saved.get("member_epoch") or 0),
            previous_member_epoch=int(saved.get("previous_member_epoch", -1)),
            state=MemberState(saved.get("state") or "stable"),
            assigned=_unlisted(saved.get("assigned")),
            revoking=_unlisted(saved.get("revoking")),
        )


def _listed(partitions: Iterable[TopicPartition]) -> list[list[Any]]:
    return [[t, p] for t, p in sorted(partitions)]


def _unlisted(items: Any) -> set[TopicPartition]:
    return {(str(t), int(p)) for t, p in items or ()}


def by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """{topic id: sorted partitions}."""
    out: dict[str, list[int]] = {}
    for topic, partition in partitions:
        out.setdefault(topic, []).append(partition)
    return {t: sorted(ps) for t, ps in sorted(out.items())}


@dataclass(eq=False)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    # The target assignment of `assignment_epoch`: member id -> partitions.
    target: dict[str, set[TopicPartition]] = field(default_factory=dict)
    # Who holds each partition (assigned or still revoking it).
    owners: dict[TopicPartition, str] = field(default_factory=dict)
    # The subscribed topics as of the last check: name -> (topic id, partitions); None
    # until checked (after a load: the first heartbeat checks).
    topics: dict[str, tuple[str, int]] | None = None
    # Each subscribed regex's matches as last resolved (in the background, as Kafka does:
    # the heartbeat that subscribes gets the literal topics, a later one the matches).
    resolved: dict[str, dict[str, tuple[str, int]]] = field(default_factory=dict)
    resolved_at: dict[str, float] = field(default_factory=dict)
    resolving: asyncio.Task[None] | None = None
    assignor: str = ASSIGNORS[0]
    dead: bool = False
    state_since: float = field(default_factory=time.time)
    save_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    # -- views ------------------------------------------------------------------------

    @property
    def state(self) -> GroupState:
        if self.dead:
            return GroupState.DEAD
        if not self.members:
            return GroupState.EMPTY
        if self.assignment_epoch != self.group_epoch:
            return GroupState.ASSIGNING
        if any(
            m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
            for m in self.members.values()
        ):
            return GroupState.RECONCILING
        return GroupState.STABLE

    def subscribed_names(self) -> set[str]:
        return set(self.topics or ())

    def saved(self) -> dict[str, Any]:
        """What the metadata store keeps (docs/AGENT_API.md `groups/save`, type consumer)."""
        return {
            "group_type": GROUP_TYPE,
            "generation": self.group_epoch,
            "extra": {
                "assignment_epoch": self.assignment_epoch,
                "topics": None
                if self.topics is None
                else {n: list(v) for n, v in self.topics.items()},
            },
            "protocol_type": PROTOCOL_TYPE,
            "protocol_name": self.assignor,
            "leader": None,
            "members": [
                {**m.saved(), "target": _listed(self.target.get(m.member_id, ()))}
                for m in self.members.values()
            ],
        }

    @classmethod
    def loaded(cls, group_id: str, state: dict[str, Any]) -> ConsumerGroup:
        extra = state.get("extra") or {}
        group = cls(
            group_id,
            group_epoch=int(state.get("generation") or 0),
            assignment_epoch=int(extra.get("assignment_epoch") or 0),
            assignor=state.get("protocol_name") or ASSIGNORS[0],
        )
        topics = extra.get("topics")
        if isinstance(topics, dict):
            group.topics = {str(n): (str(v[0]), int(v[1])) for n, v in topics.items()}
            # The regexes' matches as saved, refreshed at the next heartbeat.
            for regex in {m.topic_regex for m in group.members.values() if m.topic_regex}:
                pattern = re.compile(regex)
                group.resolved[regex] = {
                    n: v for n, v in group.topics.items() if pattern.fullmatch(n)
                }
        for saved in state.get("members") or ():
            member = ConsumerMember.loaded(saved)
            group.members[member.member_id] = member
            group.target[member.member_id] = _unlisted(saved.get("target"))
            for tp in member.assigned | member.revoking:
                group.owners[tp] = member.member_id
        return group

    # -- membership ---------------------------------------------------------------------

    def remove(self, member: ConsumerMember) -> None:
        """Take a member out: its partitions are free at once; a new epoch follows."""
        self.members.pop(member.member_id, None)
        self.target.pop(member.member_id, None)
        for tp in member.assigned | member.revoking:
            if self.owners.get(tp) == member.member_id:
                del self.owners[tp]
        # A regex nobody subscribes any more is forgotten: subscribed again, it is
        # resolved afresh (and its matches come a heartbeat after the literal topics).
        used = {m.topic_regex for m in self.members.values() if m.topic_regex}
        for regex in set(self.resolved) - used:
            del self.resolved[regex]
            self.resolved_at.pop(regex, None)
        self.bump()

    def bump(self) -> None:
        self.group_epoch += 1
        self.state_since = time.time()

    def choose_assignor(self) -> str:
        """The server assignor most members ask for (ties: the first in ASSIGNORS)."""
        votes = Counter(m.server_assignor for m in self.members.values() if m.server_assignor)
        if not votes:
            return ASSIGNORS[0]
        return max(votes, key=lambda name: (votes[name], -ASSIGNORS.index(name)))

    def member_topics(self, member: ConsumerMember) -> set[str]:
        """The group's known topics this member subscribes to (names and regex)."""
        known = self.topics or {}
        names = {n for n in member.topic_names if n in known}
        if member.topic_regex:
            pattern = re.compile(member.topic_regex)
            names.update(n for n in known if pattern.fullmatch(n))
        return names

    def compute_target(self) -> None:
        """The target assignment of the group epoch."""
        self.assignor = self.choose_assignor()
        known = self.topics or {}
        subscriptions = {
            m.member_id: {known[n][0] for n in self.member_topics(m)} for m in self.members.values()
        }
        partitions = {topic_id: count for topic_id, count in known.values()}
        assign = range_assign if self.assignor == "range" else uniform_assign
        self.target = assign(subscriptions, partitions, self.target)
        self.assignment_epoch = self.group_epoch

    # -- reconciliation (Kafka's CurrentAssignmentBuilder) ---------------------------------

    def reconcile(self, member: ConsumerMember, owned: set[TopicPartition] | None) -> None:
        """Move the member towards its target, revoking before assigning."""
        if member.state is MemberState.UNREVOKED:
            if owned is None or owned & member.revoking:
                return  # it still holds partitions it must give up
            for tp in member.revoking:
                if self.owners.get(tp) == member.member_id:
                    del self.owners[tp]
            member.revoking = set()
            member.state = MemberState.STABLE
        if member.member_epoch == self.assignment_epoch and member.state is MemberState.STABLE:
            return
        target = self.target.get(member.member_id, set())
        revoke = member.assigned - target
        if revoke:
            member.assigned -= revoke
            member.revoking = revoke
            member.state = MemberState.UNREVOKED
            return
        free = {tp for tp in target - member.assigned if self.owners.get(tp) is None}
        for tp in free:
            self.owners[tp] = member.member_id
        member.assigned |= free
        if member.member_epoch != self.assignment_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = self.assignment_epoch
        member.state = MemberState.UNRELEASED if target - member.assigned else MemberState.STABLE
