"""The live agents of the cluster, and which of them is a key's rendezvous choice.

A consumer group's coordinator is the holder of its lease in the metadata store
(`agents.groups.leases`), not this ring's choice: the ring names a zone's *front* for a
group (`front`) and the coordinator of a transactional id (whose state is all in the
metadata store, so any agent may serve it), and knows the peers' addresses.

Consistent hashing by rendezvous (highest random weight): every agent scores
``hash(key, agent id)`` and the highest score wins. Every agent computes the same owner
from the same live set, and when an agent joins or leaves only the keys it wins or held
move — the property a hash ring with virtual nodes gives, with no ring to maintain.

This is Floe's one consistent-hashing approach (`rendezvous_weight`): group fronts and
transaction coordinators here, partition leaders (`agents.zone_routing`, weighted by
load) and the owners of cached chunks (`agents.zone_cache`) all score with it. A ring
library with virtual nodes (uhashring, once used for the chunks) was the alternative;
rendezvous won because it takes fractional weights directly (a ring would need vnode
counts rebuilt whenever a load moves), spreads keys evenly without tuning a vnode
count, has no state to rebuild on a membership change, and is five lines whose every
value the tests can compute. Its cost, one hash per live agent per lookup, is small
for a zone's handful of agents.

The live set comes from the control plane's heartbeat answer, where a dead agent stays
"live" for up to the liveness window (15 s) after its last heartbeat. To fail over
faster, an agent about to suggest a peer checks that the peer accepts TCP connections
on its peer channel — where agents talk to each other; its Kafka port when that is not
known — (cached for a couple of seconds); a peer that refuses is *suspected* and left
out of the hashing and this agent's Metadata until a later probe succeeds. Every agent
probes for itself, so all of them converge on the same answer within a probe interval.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

log = logging.getLogger(__name__)

GROUP_KEY, TRANSACTION_KEY = 0, 1  # FindCoordinator key types (KIP-98)
DEFAULT_AGENT_GROUP = "default"

# A listener's kind, (name, security protocol): a client is only given addresses of the
# kind it is connected through.
ListenerKind = tuple[str, str]


@dataclass(frozen=True)
class AdvertisedListener:
    name: str
    protocol: str
    host: str
    port: int

    @property
    def kind(self) -> ListenerKind:
        return (self.name, self.protocol)


@dataclass(frozen=True)
class Peer:
    agent_id: str
    host: str  # the primary (first) listener's advertised address
    port: int
    node_id: int
    zone: str = ""
    load: float = 0.0
    http_port: int = 0  # the peer channel (agents/peers); 0 = unknown
    agent_group: str = DEFAULT_AGENT_GROUP
    # Every Kafka listener; () from an agent older than listeners (it serves one, of a
    # kind it never said, and is shown to every client as before).
    listeners: tuple[AdvertisedListener, ...] = ()

    def serves(self, kind: ListenerKind | None) -> bool:
        """Whether a client connected through a listener of `kind` may be sent here."""
        return kind is None or not self.listeners or any(x.kind == kind for x in self.listeners)

    def at(self, kind: ListenerKind | None) -> Peer:
        """This peer with its address for clients of listener `kind` (`serves` first)."""
        for listener in self.listeners:
            if listener.kind == kind:
                return replace(self, host=listener.host, port=listener.port)
        return self


def listeners_of(agent: dict[str, Any]) -> tuple[AdvertisedListener, ...]:
    """The advertised listeners of a live agent as the control plane lists it."""
    found = []
    for item in agent.get("listeners") or ():
        try:
            found.append(
                AdvertisedListener(
                    str(item["name"]), str(item["protocol"]), str(item["host"]), int(item["port"])
                )
            )
        except (KeyError, TypeError, ValueError):
            continue
    return tuple(found)


def rendezvous_weight(key: str, agent_id: str) -> int:
    """The rendezvous weight of an agent for a key, in [0, 2**64): stable across
    processes, runs and Python versions (blake2b, not `hash`)."""
    digest = hashlib.blake2b(f"{key}\x00{agent_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def score(key_type: int, key: str, agent_id: str) -> int:
    """The rendezvous weight of an agent for a FindCoordinator key of `key_type`."""
    return rendezvous_weight(f"{key_type}\x00{key}", agent_id)


def node_id_for(agent_id: str) -> int:
    """A stable positive int32 broker id for an agent id (clients key connections by it)."""
    return (zlib.crc32(agent_id.encode("utf-8")) & 0x7FFFFFFF) or 1


# Connection attempts, each within the probe timeout, before a peer that neither accepts
# nor refuses counts as unreachable (`_connect_failure`).
PROBE_ATTEMPTS = 2


class CoordinatorRing:
    """The live agents, this one always included, and who coordinates what."""

    def __init__(
        self,
        me: Peer,
        node_id_for: Callable[[str], int],
        *,
        probe_timeout_s: float = 0.5,
        healthy_ttl_s: float = 2.0,
        suspect_ttl_s: float = 2.0,
    ) -> None:
        self.me = me
        self._node_id_for = node_id_for
        self._peers: dict[str, Peer] = {}
        self._probe_timeout = probe_timeout_s
        self._healthy_ttl = healthy_ttl_s
        self._suspect_ttl = suspect_ttl_s
        # agent id -> (checked at, reachable)
        self._health: dict[str, tuple[float, bool]] = {}
        self._probes: dict[str, asyncio.Task[bool]] = {}
        # suspect's agent id -> whether its Kafka port accepted a connection (check_clients)
        self._kafka_open: dict[str, bool] = {}

    def update(self, live_agents: list[dict[str, Any]]) -> None:
        """Take the live agents from a register/heartbeat answer."""
        peers = {}
        for agent in live_agents:
            agent_id = str(agent.get("agent_id") or "")
            if agent_id == self.me.agent_id:
                # Our own load as the control plane last heard it, comparable with peers'.
                self.me = replace(self.me, load=float(agent.get("load") or 0.0))
            if not agent_id or agent_id == self.me.agent_id:
                continue
            peers[agent_id] = Peer(
                agent_id,
                str(agent["host"]),
                int(agent["port"]),
                self._node_id_for(agent_id),
                zone=str(agent.get("zone") or ""),
                load=float(agent.get("load") or 0.0),
                http_port=int(agent.get("http_port") or 0),
                agent_group=str(agent.get("agent_group") or DEFAULT_AGENT_GROUP),
                listeners=listeners_of(agent),
            )
        for gone in set(self._health) - set(peers):
            self._health.pop(gone, None)
        self._peers = peers

    def _suspected(self, agent_id: str) -> bool:
        # A suspect stays one until a probe succeeds (`check_all` re-probes it), so the
        # owner of a key does not flap back to a dead agent between probes.
        checked = self._health.get(agent_id)
        return checked is not None and not checked[1]

    def candidates(self) -> list[Peer]:
        """This agent and every peer not currently suspected."""
        return [self.me, *(p for p in self._peers.values() if not self._suspected(p.agent_id))]

    def client_candidates(self) -> list[Peer]:
        """The agents clients may be sent to (Metadata's brokers): the candidates, and the
        suspects whose Kafka port last accepted a connection — a cut between two agents'
        peer channels is not one between clients and agents, and a client drops its
        connections to brokers Metadata leaves out (kafkajs dropped its coordinator's)."""
        return [
            self.me,
            *(
                p
                for p in self._peers.values()
                if not self._suspected(p.agent_id) or self._kafka_open.get(p.agent_id, False)
            ),
        ]

    async def check_clients(self) -> None:
        """Probe the Kafka port of every suspect (`client_candidates`)."""
        suspects = [p for p in self._peers.values() if self._suspected(p.agent_id)]
        if suspects:
            opened = await asyncio.gather(*(self._connects(p.host, p.port) for p in suspects))
            self._kafka_open = {p.agent_id: ok for p, ok in zip(suspects, opened, strict=True)}
        else:
            self._kafka_open = {}

    async def _connects(self, host: str, port: int) -> bool:
        return await self._connect_failure(host, port) is None

    async def _connect_failure(self, host: str, port: int) -> str | None:
        """Why a TCP connection to host:port failed; None if it was accepted (and closed at
        once). A refused connection counts at once; one not made within the probe timeout
        is tried once more first: the bound runs on this agent's own event loop, which a
        busy moment or a CPU-starved machine can stall past it while the peer answered at
        once — and a suspected peer leaves this agent's Metadata."""
        for _ in range(PROBE_ATTEMPTS):
            try:
                _, writer = await asyncio.wait_for(
                    asyncio.open_connection(host, port), self._probe_timeout
                )
            except TimeoutError:  # (before OSError: a subclass of it)
                continue
            except OSError as exc:
                return str(exc) or type(exc).__name__
            writer.close()
            return None
        return f"no connection within {self._probe_timeout:g} s, {PROBE_ATTEMPTS} times"

    def owner(self, key: str, key_type: int = GROUP_KEY) -> Peer:
        """The coordinator for `key` from what is known now (no probing), among the agents
        of this agent's group: a free group lease is offered, and a transactional id
        served, within the agent group the client reached (a lease held in another group
        is reached through a front's relay, `front`)."""
        mine = self.me.agent_group
        pool = [p for p in self.candidates() if p.agent_group == mine]
        return max(pool, key=lambda p: score(key_type, key, p.agent_id))

    def owns(self, key: str, key_type: int = GROUP_KEY) -> bool:
        return self.owner(key, key_type).agent_id == self.me.agent_id

    def peer(self, agent_id: str) -> Peer | None:
        """A live agent by id (this one included)."""
        return self.me if agent_id == self.me.agent_id else self._peers.get(agent_id)

    async def reachable(self, peer: Peer) -> bool:
        """Whether `peer` accepts connections on its peer channel (its Kafka port when
        that is unknown; probed, cached briefly)."""
        return peer.agent_id == self.me.agent_id or await self._reachable(peer)

    def visible(self, peer: Peer, listener: ListenerKind | None) -> bool:
        """Whether a client connected to this agent through a listener of `listener`'s
        kind may be sent to `peer`: it is of this agent's group and serves that kind."""
        return peer.agent_group == self.me.agent_group and peer.serves(listener)

    def sees_everyone(self, listener: ListenerKind | None) -> bool:
        """Whether such a client may be sent to every candidate (nothing to relay for)."""
        return all(self.visible(p, listener) for p in self.candidates())

    def front(
        self,
        key: str,
        zone: str | None,
        key_type: int = GROUP_KEY,
        owner: Peer | None = None,
        *,
        listener: ListenerKind | None = None,
    ) -> Peer:
        """The agent a client of `zone`, connected through a listener of kind `listener`,
        is told coordinates `key`: the owner when that client may be sent to it (`visible`:
        of this agent's group, serving the listener kind; and in the zone, or the client
        names none, or the zone has no such agent), else the rendezvous choice among the
        agents it may be sent to
        (the zone's, when it has some), which relays to the owner (`agents.groups.relay`).
        Clients only reach agents their Metadata listed."""
        owner = owner or self.owner(key, key_type)
        reachable = self.visible(owner, listener)
        if reachable and (zone is None or owner.zone == zone):
            return owner
        pool = [p for p in self.candidates() if self.visible(p, listener)]
        local = [p for p in pool if p.zone == zone]
        if reachable and not local:
            return owner
        pool = local or pool
        if not pool:
            return owner
        return max(pool, key=lambda p: score(key_type, key, p.agent_id))

    async def resolve(self, key: str, key_type: int = GROUP_KEY) -> Peer:
        """The coordinator for `key`, having checked that a peer owner is reachable."""
        for _ in range(len(self._peers) + 1):
            owner = self.owner(key, key_type)
            if owner.agent_id == self.me.agent_id or await self._reachable(owner):
                return owner
        return self.me

    async def check_all(self) -> None:
        """Probe every peer whose health is unknown or stale, suspects included."""
        peers = list(self._peers.values())
        if peers:
            await asyncio.gather(*(self._reachable(p) for p in peers))

    def brokers(self) -> list[dict[str, Any]]:
        """Metadata broker entries: this agent first, then every unsuspected peer.

        Clients connect to a group coordinator by node id, and some (kafkajs) only to
        node ids the Metadata response listed.
        """
        return [
            {"node_id": p.node_id, "host": p.host, "port": p.port, "rack": None}
            for p in self.candidates()
        ]

    async def _reachable(self, peer: Peer) -> bool:
        checked = self._health.get(peer.agent_id)
        now = time.monotonic()
        if checked is not None:
            ttl = self._healthy_ttl if checked[1] else self._suspect_ttl
            if now - checked[0] < ttl:
                return checked[1]
        task = self._probes.get(peer.agent_id)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._probe(peer))
            self._probes[peer.agent_id] = task
            task.add_done_callback(lambda _: self._probes.pop(peer.agent_id, None))
        return await asyncio.shield(task)

    async def _probe(self, peer: Peer) -> bool:
        port = peer.http_port or peer.port
        failure = await self._connect_failure(peer.host, port)
        reachable = failure is None
        if not reachable and self._health.get(peer.agent_id, (0, True))[1]:
            log.warning(
                "agent %s at %s:%d is unreachable (%s); coordinating without it",
                peer.agent_id,
                peer.host,
                port,
                failure,
            )
        if peer.agent_id in self._peers:
            self._health[peer.agent_id] = (time.monotonic(), reachable)
        return reachable
