"""One consumer group's membership, as Kafka's classic group protocol keeps it.

Plain state and the rules that read it (protocol selection, member validation, which
members have rejoined); the transitions with their timers live in `agents.groups.coordinator`.
Semantics follow Kafka's ClassicGroup / GroupMetadata (group-coordinator module).
"""

from __future__ import annotations

import asyncio
import enum
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from core.kafka.consumer_protocol import (
    PROTOCOL_TYPE,
    MalformedConsumerProtocol,
    assignment_partitions,
    subscription_topics,
)
from core.kafka.errors import ErrorCode


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# Kafka's ClassicGroupState: the states each state may be entered from.
_VALID_PREVIOUS = {
    GroupState.EMPTY: {GroupState.PREPARING_REBALANCE},
    GroupState.PREPARING_REBALANCE: {
        GroupState.STABLE,
        GroupState.COMPLETING_REBALANCE,
        GroupState.EMPTY,
    },
    GroupState.COMPLETING_REBALANCE: {GroupState.PREPARING_REBALANCE},
    GroupState.STABLE: {GroupState.COMPLETING_REBALANCE},
    GroupState.DEAD: set(GroupState),
}


@dataclass(eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    # A parked JoinGroup / SyncGroup answer. Set means "awaiting", even when the client
    # went away meanwhile (the future is then cancelled), as in Kafka.
    join_future: asyncio.Future[dict[str, Any]] | None = None
    sync_future: asyncio.Future[dict[str, Any]] | None = None
    # True until the member's first join completes: its session timer does not run yet.
    is_new: bool = False
    heartbeat_timer: asyncio.TimerHandle | None = None

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(protocol)

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols with the same metadata, in the same order."""
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        return next(name for name in self.protocol_names() if name in candidates)


def resolve(future: asyncio.Future[dict[str, Any]] | None, result: Any) -> None:
    """Answer a parked request unless its client already went away."""
    if future is not None and not future.done():
        future.set_result(result)


@dataclass(eq=False)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    previous_state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    # KIP-394: member ids handed out with MEMBER_ID_REQUIRED, not yet used to join.
    pending_members: dict[str, asyncio.TimerHandle | None] = field(default_factory=dict)
    # KIP-345: group.instance.id → member id.
    static_members: dict[str, str] = field(default_factory=dict)
    # Members that received their JoinGroup answer but have not sent SyncGroup.
    pending_sync: set[str] = field(default_factory=set)
    new_member_added: bool = False
    join_timer: asyncio.TimerHandle | None = None
    sync_timer: asyncio.TimerHandle | None = None
    state_since: float = field(default_factory=time.time)
    # The last save of the group's state to the metadata store (coordinator._save_then_answer).
    save_task: asyncio.Task[None] | None = None

    # -- state ------------------------------------------------------------------------

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    def transition(self, state: GroupState) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise RuntimeError(
                f"group {self.group_id}: illegal transition {self.state.value} → {state.value}"
            )
        self.previous_state, self.state = self.state, state
        self.state_since = time.time()

    @property
    def known(self) -> bool:
        """Whether the group ever had members (a lease taken for a group nobody joined
        yet loads an Empty generation 0: Kafka knows no such group)."""
        return self.generation > 0 or bool(self.members) or bool(self.pending_members)

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- members ----------------------------------------------------------------------

    def generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        return f"{group_instance_id or client_id}-{uuid.uuid4()}"

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if self.leader_id is None:
            self.leader_id = member.member_id
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        instance = member.group_instance_id
        if instance is not None and self.static_members.get(instance) == member_id:
            del self.static_members[instance]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """KIP-345: a static member came back with a new member id; it keeps its place."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def validate_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode | None:
        """Kafka's ClassicGroup.validateMember: None when the member is who it says."""
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if existing != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
            return None
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    def has_all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def elect_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a member that did."""
        leader = self.members.get(self.leader_id or "")
        if leader is not None and leader.awaiting_join:
            return True
        joined = next((m for m in self.members.values() if m.awaiting_join), None)
        self.leader_id = joined.member_id if joined else None
        return joined is not None

    # -- protocols --------------------------------------------------------------------

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports."""
        counts = Counter(name for m in self.members.values() for name in set(m.protocol_names()))
        return {name for name, n in counts.items() if n == len(self.members)}

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        """Whether a member with these protocols may join (Kafka's supportsProtocols)."""
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and any(
            name in self.candidate_protocols() for name in names
        )

    def select_protocol(self) -> str:
        """Each member votes for its preferred candidate; the most votes win (ties go to
        the protocol the longest-standing member prefers)."""
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        first = next(iter(self.members.values()))
        preference = {name: i for i, name in enumerate(first.protocol_names())}
        return max(votes, key=lambda name: (votes[name], -preference.get(name, len(preference))))

    def init_next_generation(self) -> None:
        self.generation += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.transition(GroupState.EMPTY)

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to; None when they cannot be read."""
        if self.protocol_type != PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics.update(subscription_topics(member.metadata(self.protocol_name)))
        except (KeyError, MalformedConsumerProtocol):
            return None
        return topics

    # -- views ------------------------------------------------------------------------

    def member_entries(self) -> list[dict[str, Any]]:
        """JoinGroup's member list for the leader (metadata of the chosen protocol)."""
        assert self.protocol_name is not None
        return [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "metadata": m.metadata(self.protocol_name),
            }
            for m in self.members.values()
        ]

    def report(self) -> dict[str, Any]:
        """What the control plane keeps about the group (docs/AGENT_API.md groups/report)."""
        members = []
        for m in self.members.values():
            assigned: dict[str, list[int]] = {}
            if self.protocol_type == PROTOCOL_TYPE and self.is_(GroupState.STABLE):
                try:
                    assigned = assignment_partitions(m.assignment)
                except MalformedConsumerProtocol:
                    assigned = {}
            members.append(
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "assignment": [
                        {"topic": topic, "partitions": sorted(parts)}
                        for topic, parts in sorted(assigned.items())
                    ],
                }
            )
        return {
            "group_id": self.group_id,
            "state": self.state.value,
            "protocol_type": self.protocol_type or "",
            "protocol": self.protocol_name or "",
            "generation": self.generation,
            "leader": self.leader_id or "",
            "members": members,
        }
