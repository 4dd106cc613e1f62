"""Zone-aware routing: which agents a client sees and which one leads each partition.

A client names its zone in `client.id` (`floe_az=<zone>`, or WarpStream's `ws_az=<zone>`
so existing client configs work). Metadata then lists only the live agents of that
zone, so the client never crosses a zone for data; with no hint, or no agent in that
zone, it lists every agent. Partition leaders are spread over the listed agents by
weighted rendezvous hashing: stable while membership is stable (a client's connections
do not churn), and weighted away from agents whose reported load is well above the
zone's mean. Any agent can serve any partition, so a leader is only a routing choice.

Pure functions over `Peer`s: no I/O, no asyncio.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from agents.config import ZONE_PATTERN
from agents.groups.ring import Peer, rendezvous_weight

# key=value features in client.id, separated by commas, semicolons or spaces (WarpStream
# documents `ws_az=…` this way). A zone is what `--zone` accepts.
_ZONE_HINT = re.compile(rf"(?:^|[\s,;])(?:floe_az|ws_az)=({ZONE_PATTERN})")

# An agent counts as overloaded above this multiple of the other agents' mean load, and
# only once the load is worth moving (requests per second).
OVERLOAD_FACTOR = 1.5
MIN_OVERLOAD_REQUESTS_PER_S = 20.0
MIN_WEIGHT = 0.05


def client_zone(client_id: str | None) -> str | None:
    """The zone a client names in its client.id, or None when it names none."""
    if not client_id:
        return None
    found = _ZONE_HINT.search(client_id)
    return found.group(1) if found else None


def zone_members(peers: Sequence[Peer], zone: str | None) -> list[Peer]:
    """The peers of `zone`; every peer when the zone is None or has no agent."""
    if zone is not None:
        local = [p for p in peers if p.zone == zone]
        if local:
            return local
    return list(peers)


def load_weights(peers: Sequence[Peer]) -> dict[str, float]:
    """Each peer's share of partitions: 1, or less when it is overloaded — its load is
    above `OVERLOAD_FACTOR` times the mean of the others' (its own would hide it).

    Rounded to a tenth so that ordinary jitter in reported load moves nothing.
    """
    total = sum(p.load for p in peers)
    weights = {}
    for peer in peers:
        others = len(peers) - 1
        limit = OVERLOAD_FACTOR * (total - peer.load) / others if others else float("inf")
        if peer.load > limit and peer.load > MIN_OVERLOAD_REQUESTS_PER_S:
            weights[peer.agent_id] = max(MIN_WEIGHT, round(limit / peer.load, 1))
        else:
            weights[peer.agent_id] = 1.0
    return weights


def _unit_hash(key: str, agent_id: str) -> float:
    # In (0, 1): never 0, so the logarithm below is finite.
    return (rendezvous_weight(key, agent_id) + 1) / (2**64 + 1)


def weighted_owner(key: str, peers: Sequence[Peer], weights: dict[str, float]) -> Peer:
    """The peer owning `key` by weighted rendezvous hashing (score = -w / ln(h)): each
    peer wins a share of keys proportional to its weight, and a membership change moves
    only the keys the joining or leaving peer wins or held."""
    if not peers:
        raise ValueError("no peers to choose from")
    return max(
        peers,
        key=lambda p: -weights.get(p.agent_id, 1.0) / math.log(_unit_hash(key, p.agent_id)),
    )


def partition_leaders(topic_id: str, partitions: int, brokers: Sequence[Peer]) -> list[Peer]:
    """The leader of each partition of a topic among `brokers`."""
    weights = load_weights(brokers)
    return [weighted_owner(f"{topic_id}:{index}", brokers, weights) for index in range(partitions)]
