"""Zone-aware routing: which agents a client sees and which one leads each partition.

A client names its zone in `client.id` (`floe_az=<zone>`, or WarpStream's `ws_az=<zone>`
so existing client configs work). Metadata then lists only the live agents of that
zone, so the client never crosses a zone for data; with no hint, or no agent in that
zone, it lists every agent. Partition leaders are spread over the listed agents by
weighted rendezvous hashing: stable while membership is stable (a client's connections
do not churn), and weighted away from agents whose reported load is well above the
zone's mean. Any agent can serve any partition, so a leader is only a routing choice.

Load moves with the leaders it causes (an agent's requests are mostly its partitions'),
so the weights are not recomputed per Metadata request: `LeaderWeights` keeps them,
fed with the control plane's live list on every heartbeat (every agent gets the same
reported loads), and changes one only after a sustained, smoothed overload — with
hysteresis, a hold time, and a longer hold after each reversal — so leaders stay put
under steady load and still move away from a genuinely overloaded agent.

Pure functions over `Peer`s and a state machine fed with times: no I/O, no asyncio.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

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
# An overloaded agent is weighted back to 1 only when its load (per unit of its weight:
# what it would carry at a full share) is back under this multiple of the others' mean.
RECOVERY_FACTOR = 1.1
# A weight changes only after its condition has held this long, and never sooner than
# this after its previous change; each restore doubles it for that agent (up to
# `MAX_HOLD_S`), so even loads that follow the leaders cannot make them oscillate fast.
HOLD_S = 30.0
MAX_HOLD_S = 600.0
# Reported loads are smoothed exponentially with this time constant.
SMOOTHING_S = 20.0


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


@dataclass
class _Agent:
    load: float  # smoothed
    weight: float = 1.0
    changed_at: float = -math.inf
    hold_s: float = HOLD_S
    # (wanted weight, since when it has been wanted)
    pending: tuple[float, float] | None = None


class LeaderWeights:
    """Each agent's weight in partition leadership, changed slowly (module docstring).

    `observe` takes every live agent with its reported load (the control plane's live
    list) and the time; `weights` is what `partition_leaders` uses. Agents are compared
    with the others of their zone. An agent at weight 1 becomes overloaded when its
    smoothed load exceeds `OVERLOAD_FACTOR` times the others' mean (each other's load
    divided by its weight) continuously for its hold time; its weight is then set once,
    as `load_weights` would, and stays until its load per unit of weight is back under
    `RECOVERY_FACTOR` times the others' mean (or it is all but idle) for its hold time.
    """

    def __init__(
        self,
        *,
        hold_s: float = HOLD_S,
        max_hold_s: float = MAX_HOLD_S,
        smoothing_s: float = SMOOTHING_S,
    ) -> None:
        self._base_hold = hold_s
        self._max_hold = max(hold_s, max_hold_s)
        self._smoothing = smoothing_s
        self._agents: dict[str, _Agent] = {}
        self._observed_at: float | None = None

    @property
    def weights(self) -> dict[str, float]:
        return {agent_id: a.weight for agent_id, a in self._agents.items() if a.weight != 1.0}

    def observe(self, peers: Sequence[Peer], now: float) -> None:
        """Take the live agents' reported loads at `now` (seconds, monotonic)."""
        elapsed = 0.0 if self._observed_at is None else max(0.0, now - self._observed_at)
        self._observed_at = now
        keep = 1.0 - math.exp(-elapsed / self._smoothing) if self._smoothing > 0 else 1.0
        agents: dict[str, _Agent] = {}
        for peer in peers:
            known = self._agents.get(peer.agent_id)
            if known is None:
                known = _Agent(load=max(0.0, peer.load))
            else:
                known.load += keep * (max(0.0, peer.load) - known.load)
            agents[peer.agent_id] = known
        self._agents = agents
        zones: dict[str, list[Peer]] = {}
        for peer in peers:
            zones.setdefault(peer.zone, []).append(peer)
        for members in zones.values():
            for peer in members:
                self._step(peer.agent_id, [p.agent_id for p in members], now)

    def _wanted(self, agent_id: str, members: list[str]) -> float:
        me = self._agents[agent_id]
        others = [self._agents[m] for m in members if m != agent_id]
        if not others:
            return 1.0
        mean = sum(o.load / o.weight for o in others) / len(others)
        if me.weight == 1.0:
            limit = OVERLOAD_FACTOR * mean
            if me.load > limit and me.load > MIN_OVERLOAD_REQUESTS_PER_S:
                return max(MIN_WEIGHT, round(limit / me.load, 1))
            return 1.0
        if me.load / me.weight < RECOVERY_FACTOR * mean or me.load <= MIN_OVERLOAD_REQUESTS_PER_S:
            return 1.0  # balanced again, or too idle to be worth weighting
        return me.weight  # still overloaded: its weight was set once, and stays

    def _step(self, agent_id: str, members: list[str], now: float) -> None:
        me = self._agents[agent_id]
        if now - me.changed_at >= self._max_hold:
            me.hold_s = self._base_hold  # long quiet: forgive past reversals
        wanted = self._wanted(agent_id, members)
        if wanted == me.weight:
            me.pending = None
            return
        if me.pending is None or me.pending[0] != wanted:
            me.pending = (wanted, now)
        if now - me.pending[1] >= me.hold_s and now - me.changed_at >= me.hold_s:
            if wanted == 1.0:
                me.hold_s = min(self._max_hold, 2 * me.hold_s)
            me.weight, me.changed_at, me.pending = wanted, now, None


def partition_leaders(
    topic_id: str,
    partitions: int,
    brokers: Sequence[Peer],
    weights: dict[str, float] | None = None,
) -> list[Peer]:
    """The leader of each partition of a topic among `brokers`, weighted by `weights`
    (agent id -> weight, default 1: a `LeaderWeights`' choice), or by `load_weights`
    of the brokers' reported loads when None.

    Weighted rendezvous hashing with bounded loads: partition by partition, the
    best-scoring broker that leads fewer than its share (its weight's part of the
    partitions: rounded down, or up for as many brokers as the rounding left out) — so a topic's partitions are spread as Kafka spreads
    them (two partitions, two brokers: one each; plain hashing gives both to one broker
    half the time), and a broker leaving moves its partitions and few others."""
    if weights is None:
        weights = load_weights(brokers)
    if not brokers:
        raise ValueError("no peers to choose from")
    total = sum(weights.get(p.agent_id, 1.0) for p in brokers)
    share = {p.agent_id: partitions * weights.get(p.agent_id, 1.0) / total for p in brokers}
    floor = {a: math.floor(x + 1e-9) for a, x in share.items()}
    extra = partitions - sum(floor.values())  # brokers that may lead one past their floor
    led = dict.fromkeys(share, 0)
    leaders = []
    for index in range(partitions):
        key = f"{topic_id}:{index}"
        ranked = sorted(
            brokers,
            key=lambda p: weights.get(p.agent_id, 1.0) / math.log(_unit_hash(key, p.agent_id)),
        )
        chosen = ranked[0]
        for p in ranked:
            if led[p.agent_id] < floor[p.agent_id]:
                chosen = p
                break
            if extra > 0 and led[p.agent_id] == floor[p.agent_id] < share[p.agent_id]:
                chosen = p
                extra -= 1
                break
        led[chosen.agent_id] += 1
        leaders.append(chosen)
    return leaders
