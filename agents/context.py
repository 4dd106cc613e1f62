"""What every request handler may use: this agent's identity, the cluster it serves, and
the shared parts (control-plane client, topic cache, segment writer, chunk cache)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agents.coalesced_calls import CoalescedCalls
from agents.config import CLIENT_ROLES, AgentConfig
from agents.control_plane import ControlPlaneClient
from agents.groups.coordinator import GroupCoordinator
from agents.groups.ring import ListenerKind, Peer
from agents.partition_offsets import PartitionOffsets
from agents.peers.client import PeerClient
from agents.schema_registry.validation import SchemaValidator
from agents.tail_feed import TailFeed
from agents.topics import TopicCache
from agents.write_path import CommitWatch, SegmentWriter
from agents.zone_cache import ZoneCache
from agents.zone_routing import LeaderWeights, zone_members

# What Floe tells clients about replication: data lives in object storage, which
# replicates it; tools that check for a replication factor ≥ 3 should be satisfied.
REPORTED_REPLICATION_FACTOR = 3


@dataclass
class AgentContext:
    """Shared state of one agent, passed to every request handler."""

    config: AgentConfig
    client: ControlPlaneClient
    topics: TopicCache
    writer: SegmentWriter
    cache: ZoneCache
    watch: CommitWatch
    cluster_id: str
    node_id: int
    port: int  # the bound Kafka port (differs from the flag when the flag is 0)
    groups: GroupCoordinator  # consumer groups and who coordinates what
    offsets: PartitionOffsets = field(default_factory=PartitionOffsets)
    cluster_config: dict[str, Any] = field(default_factory=dict)
    live_agents: list[dict[str, Any]] = field(default_factory=list)
    # partition leaders' weights, fed with the live list's loads on every heartbeat
    leader_weights: LeaderWeights = field(default_factory=LeaderWeights)
    peer_secret: str | None = None  # signs the peer channel; from the heartbeat answer
    peers: PeerClient | None = None  # the channel to the cluster's other agents
    schema_validator: SchemaValidator | None = None  # confluent.*.schema.validation topics
    tail: TailFeed | None = None  # the tail feed and its index (fetches at the tail)
    # Ripcord: the last DescribeConfigs answers of the control plane ("topic", name) /
    # ("broker", ""), to answer from while it is away.
    described_configs: dict[tuple[str, str], Any] = field(default_factory=dict)
    _coalesced: dict[str, CoalescedCalls] = field(default_factory=dict)

    def coalesced(self, call: str) -> CoalescedCalls:
        """The shared `CoalescedCalls` of a per-partition control-plane call."""
        calls = self._coalesced.get(call)
        if calls is None:
            calls = self._coalesced[call] = CoalescedCalls(self.client, call)
        return calls

    @property
    def ripcord_active(self) -> bool:
        """Ripcord is on and the control plane cannot be reached: answer from what this
        agent knows (topics, groups, offsets, the tail index) instead of asking."""
        return self.config.ripcord and not self.client.link.up

    @property
    def host(self) -> str:
        return self.config.advertise_host

    @property
    def auto_create_topics(self) -> bool:
        return bool(self.cluster_config.get("auto_create_topics", False))

    @property
    def default_partitions(self) -> int:
        try:
            return int(self.cluster_config.get("default_partitions", 1))
        except (TypeError, ValueError):
            return 1

    @property
    def produce_quota_exceeded(self) -> bool:
        """The plan's monthly write cap is reached (the control plane decides)."""
        return bool(self.cluster_config.get("produce_quota_exceeded", False))

    def me(self) -> Peer:
        """This agent as a peer (its zone and Kafka address)."""
        return self.groups.ring.me

    def known_zones(self) -> set[str]:
        """The zones of the live agents (clients may name any string; these are real)."""
        return {str(a.get("zone") or "") for a in self.live_agents} | {self.config.zone}

    def zone_peers(self, zone: str | None, listener: ListenerKind | None = None) -> list[Peer]:
        """The live agents a client of `zone` connected through a listener of kind
        `listener` is sent to (this one first when it is among them), at their addresses
        for that kind: those of this agent's group that serve the kind, of the zone, or
        of every zone when the zone is None or has none. Group coordinators must be among them: clients only
        reach brokers Metadata listed."""
        ring = self.groups.ring
        candidates = [p for p in ring.client_candidates() if ring.visible(p, listener)]
        if not CLIENT_ROLES & set(self.config.roles):
            # An agent without client roles never names itself (clients that found it
            # anyway are sent to the agents that serve them).
            candidates = [p for p in candidates if p.agent_id != self.config.agent_id] or candidates
        return [p.at(listener) for p in zone_members(candidates, zone)]
