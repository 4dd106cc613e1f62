"""What every request handler may use: this agent's identity, the cluster it serves, and
the shared parts (control-plane client, topic cache, segment writer, chunk cache)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agents.chunk_cache import ChunkCache
from agents.config import AgentConfig
from agents.control_plane import ControlPlaneClient
from agents.groups.coordinator import GroupCoordinator
from agents.partition_offsets import PartitionOffsets
from agents.topics import TopicCache
from agents.write_path import CommitWatch, SegmentWriter

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
    cache: ChunkCache
    watch: CommitWatch
    cluster_id: str
    node_id: int
    port: int  # the bound Kafka port (differs from the flag when the flag is 0)
    offsets: PartitionOffsets = field(default_factory=PartitionOffsets)
    cluster_config: dict[str, Any] = field(default_factory=dict)
    live_agents: list[dict[str, Any]] = field(default_factory=list)
    groups: GroupCoordinator | None = None  # set by the runtime once the agent is up

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

    def broker(self) -> dict[str, Any]:
        """This agent as a Metadata response broker entry."""
        return {"node_id": self.node_id, "host": self.host, "port": self.port, "rack": None}

    def brokers(self) -> list[dict[str, Any]]:
        """Metadata brokers: this agent, then the live peers (group coordinators must be
        brokers the client knows)."""
        return self.groups.ring.brokers() if self.groups is not None else [self.broker()]
