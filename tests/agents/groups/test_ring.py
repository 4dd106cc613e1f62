"""Which agent coordinates a group: rendezvous hashing over the live agents, with
unreachable peers left out."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from agents.groups.ring import (
    GROUP_KEY,
    TRANSACTION_KEY,
    CoordinatorRing,
    Peer,
    rendezvous_weight,
    score,
)
from agents.zone_cache import ChunkRing

pytestmark = pytest.mark.timeout(30)


def ring_of(me: str, others: list[dict]) -> CoordinatorRing:
    ring = CoordinatorRing(Peer(me, "127.0.0.1", 1, 1), lambda agent_id: hash(agent_id) & 0xFFFF)
    ring.update([{"agent_id": me, "host": "127.0.0.1", "port": 1}, *others])
    return ring


def agents(*names: str) -> list[dict]:
    return [{"agent_id": n, "host": "127.0.0.1", "port": 1000 + i} for i, n in enumerate(names)]


def test_every_agent_names_the_same_coordinator():
    names = ["a", "b", "c"]
    rings = [ring_of(n, agents(*(o for o in names if o != n))) for n in names]
    for key in (f"group-{i}" for i in range(200)):
        assert len({r.owner(key).agent_id for r in rings}) == 1
    owners = {r.owner(f"group-{i}").agent_id for r in rings for i in range(200)}
    assert owners == set(names), "every agent coordinates some groups"


def test_a_joining_agent_takes_only_the_groups_it_wins():
    before = ring_of("a", agents("b", "c"))
    after = ring_of("a", agents("b", "c", "d"))
    keys = [f"group-{i}" for i in range(500)]
    moved = [k for k in keys if before.owner(k).agent_id != after.owner(k).agent_id]
    assert moved and all(after.owner(k).agent_id == "d" for k in moved)
    assert len(moved) < len(keys) / 2


def test_an_unreachable_peer_is_left_out_until_it_answers_again():
    async def run():
        closed = socket.socket()
        closed.bind(("127.0.0.1", 0))
        dead_port = closed.getsockname()[1]
        closed.close()  # nothing listens there: connections are refused
        listener = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
        live_port = listener.sockets[0].getsockname()[1]
        ring = ring_of(
            "me",
            [
                {"agent_id": "dead", "host": "127.0.0.1", "port": dead_port},
                {"agent_id": "live", "host": "127.0.0.1", "port": live_port},
            ],
        )
        keys = [f"g{i}" for i in range(60)]
        dead_keys = [k for k in keys if ring.owner(k).agent_id == "dead"]
        assert dead_keys
        for key in dead_keys:
            assert (await ring.resolve(key)).agent_id in ("me", "live")
        assert all(b["port"] != dead_port for b in ring.brokers())
        listener.close()

    asyncio.run(run())


def test_a_peer_is_not_suspected_because_this_agents_own_loop_stalled():
    """A probe whose bound ran out while this agent's event loop was stalled (busy, or
    starved of CPU on a loaded machine) says nothing of the peer: it is asked again, and a
    peer that answers stays in the ring and in Metadata."""

    async def run():
        listener = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
        live_port = listener.sockets[0].getsockname()[1]

        async def stall(turns: int) -> None:
            for _ in range(turns):
                await asyncio.sleep(0)
            time.sleep(0.3)  # the whole loop, 3x the probe's bound

        # The stall lands at each step of the probe's connection in turn (some turns
        # fall inside its bound: there a single attempt timed out).
        for turns in range(6):
            ring = CoordinatorRing(
                Peer("me", "127.0.0.1", 1, 1), lambda agent_id: hash(agent_id) & 0xFFFF,
                probe_timeout_s=0.1,
            )  # fmt: skip
            ring.update([{"agent_id": "live", "host": "127.0.0.1", "port": live_port}])
            stalling = asyncio.ensure_future(stall(turns))
            await ring.check_all()
            await stalling
            assert [p.agent_id for p in ring.candidates()] == ["me", "live"], turns
            assert any(b["port"] == live_port for b in ring.brokers())
        listener.close()

    asyncio.run(run())


def test_rendezvous_weights_do_not_change_between_versions():
    """Agents of two versions share a cluster during a rolling upgrade: the same key must
    pick the same agent on both, so these values are pinned (blake2b, not `hash`)."""
    assert score(GROUP_KEY, "payments", "agt-1") == 13418787493744723556
    assert score(TRANSACTION_KEY, "txn-7", "agt-2") == 4094714387963747895
    assert rendezvous_weight("0\x00payments", "agt-1") == score(GROUP_KEY, "payments", "agt-1")


def test_the_chunk_owner_is_the_zones_rendezvous_choice():
    """The zone cache shares out chunks with the same hash as the group ring."""
    members = ["agt-0", "agt-1", "agt-2"]
    chunks = ChunkRing("agt-0")
    chunks.update([Peer(m, "127.0.0.1", 1, i, zone="a") for i, m in enumerate(members[1:], 1)])
    for index in range(100):
        expected = max(members, key=lambda m: rendezvous_weight(f"vci_x/f#{index}", m))
        owner = chunks.owner("vci_x/f", index)
        assert (owner.agent_id if owner else "agt-0") == expected
