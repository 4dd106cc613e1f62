"""In-process checks of zone routing, the chunk ring, peer signatures and the peer
endpoints' refusals."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from agents.config import ConfigError, parse_config
from agents.groups.ring import Peer
from agents.peers import auth
from agents.peers.server import add_peer_routes
from agents.zone_cache import ChunkRing
from agents.zone_routing import (
    HOLD_S,
    LeaderWeights,
    client_zone,
    load_weights,
    partition_leaders,
    weighted_owner,
    zone_members,
)
from core.security import peer_auth
from core.storage import ObjectNotFound

REQUIRED = ["--control-plane-url", "http://cp:8000/", "--agent-key", "k", "--bucket-url", "mem://b"]


def peer(agent_id: str, zone: str = "", load: float = 0.0) -> Peer:
    return Peer(agent_id, "127.0.0.1", 9092, hash(agent_id) & 0xFFFF, zone=zone, load=load)


@pytest.mark.parametrize(
    "client_id, zone",
    [
        ("floe_az=us-east-1a", "us-east-1a"),
        ("my-app,floe_az=a,other=1", "a"),
        ("ws_az=eu-west-1b", "eu-west-1b"),
        ("app ws_az=b", "b"),
        ("app;floe_az=z1", "z1"),
        ("app", None),
        ("", None),
        (None, None),
        ("notfloe_az=a", None),  # a key must start a feature, not end another word
        ("floe_az=", None),
    ],
)
def test_a_client_names_its_zone_in_client_id(client_id, zone):
    assert client_zone(client_id) == zone


def test_a_zone_hint_is_bounded_to_what_an_agent_could_be_in():
    assert client_zone("floe_az=" + "z" * 80) == "z" * 64
    assert client_zone("floe_az=a\nb") == "a"


def test_clients_see_their_zone_or_everyone():
    agents = [peer("a1", "a"), peer("a2", "a"), peer("b1", "b")]
    assert zone_members(agents, "a") == agents[:2]
    assert zone_members(agents, "b") == agents[2:]
    assert zone_members(agents, None) == agents
    assert zone_members(agents, "nowhere") == agents


def test_partition_leaders_are_stable_and_spread_evenly():
    brokers = [peer(f"agt-{i}") for i in range(4)]
    leaders = partition_leaders("topic-id", 400, brokers)
    assert leaders == partition_leaders("topic-id", 400, list(reversed(brokers)))
    shares = Counter(p.agent_id for p in leaders)
    assert sorted(shares.values()) == [100] * 4, shares
    # One agent leaving moves the partitions it led, and few others (bounded loads).
    without = partition_leaders("topic-id", 400, brokers[1:])
    moved = [i for i, (x, y) in enumerate(zip(leaders, without)) if x != y]
    assert {i for i in moved if leaders[i].agent_id == "agt-0"} == set(range(400)) & {
        i for i, p in enumerate(leaders) if p.agent_id == "agt-0"
    }
    assert len([i for i in moved if leaders[i].agent_id != "agt-0"]) <= 20


def test_a_small_topic_has_its_partitions_led_by_different_agents():
    """As Kafka places them: two partitions on two brokers, one each (plain rendezvous
    hashing put both on one broker half the time; librdkafka's 0179 expects one each)."""
    for n in (2, 3):
        brokers = [peer(f"agt-{i}") for i in range(n)]
        for topic in range(50):
            for partitions in (n, n + 1):
                shares = Counter(
                    p.agent_id for p in partition_leaders(f"t{topic}", partitions, brokers)
                )
                assert len(shares) == n and max(shares.values()) - min(shares.values()) <= 1


def test_an_overloaded_agent_leads_fewer_partitions():
    brokers = [peer("agt-0", load=10), peer("agt-1", load=12), peer("agt-2", load=200)]
    weights = load_weights(brokers)
    assert weights["agt-0"] == weights["agt-1"] == 1.0 and weights["agt-2"] < 0.5
    shares = Counter(p.agent_id for p in partition_leaders("t", 600, brokers))
    assert shares["agt-2"] < 0.2 * 600 < shares["agt-0"]
    # Ordinary jitter moves nothing: loads within 1.5x the mean are all weight 1.
    calm = [peer("agt-0", load=30), peer("agt-1", load=40), peer("agt-2", load=52)]
    assert set(load_weights(calm).values()) == {1.0}


def _feed(weights: LeaderWeights, loads: list[dict[str, float]], start: float = 0.0) -> float:
    """Observe each of `loads` 3 s apart (the heartbeat interval); the last time."""
    now = start
    for step in loads:
        weights.observe([peer(a, load=x) for a, x in step.items()], now)
        now += 3.0
    return now - 3.0


def test_flip_flopping_loads_move_no_leader():
    weights = LeaderWeights()
    # The loads chase the leaders: whoever led more last time reports three times the
    # other's, every heartbeat, for ten minutes.
    flip = [{"agt-0": 300.0, "agt-1": 100.0}, {"agt-0": 100.0, "agt-1": 300.0}] * 100
    for beat, step in enumerate(flip):
        _feed(weights, [step], start=beat * 3.0)
        assert weights.weights == {}, beat


def test_a_sustained_overload_moves_once_after_the_hold_time():
    weights = LeaderWeights()
    calm = {"agt-0": 100.0, "agt-1": 100.0, "agt-2": 100.0}
    now = _feed(weights, [calm] * 10)
    hot = {"agt-0": 100.0, "agt-1": 100.0, "agt-2": 600.0}
    changes = []
    for _ in range(200):  # ten minutes of it
        now += 3.0
        before = weights.weights
        weights.observe([peer(a, load=x) for a, x in hot.items()], now)
        if weights.weights != before:
            changes.append((now, weights.weights))
    assert len(changes) == 1, changes
    moved_at, after = changes[0]
    assert set(after) == {"agt-2"} and after["agt-2"] < 0.5
    assert moved_at - 27.0 >= HOLD_S  # the overload began at 30 s
    shares = Counter(p.agent_id for p in partition_leaders("t", 600, [peer(a) for a in hot], after))
    assert shares["agt-2"] < 0.2 * 600 < shares["agt-0"]


def test_leaders_whose_load_follows_them_settle():
    """Two agents, 3 partitions, each reporting load in proportion to the partitions it
    leads (ripcord's producer): with the weights recomputed on every report they swap
    leaders back and forth; with `LeaderWeights` they move a few times at most."""
    brokers = [peer("agt-a"), peer("agt-b")]

    def reported(leaders: list[Peer]) -> dict[str, float]:
        led = Counter(p.agent_id for p in leaders)
        return {b.agent_id: 400.0 * led[b.agent_id] for b in brokers}

    def moves(weights_at) -> int:
        leaders = partition_leaders("t2", 3, brokers, {})
        count = 0
        for beat in range(200):  # ten minutes of heartbeats
            loads = reported(leaders)
            now_brokers = [peer(a, load=x) for a, x in loads.items()]
            new = partition_leaders("t2", 3, brokers, weights_at(now_brokers, beat * 3.0))
            count += sum(x.agent_id != y.agent_id for x, y in zip(leaders, new))
            leaders = new
        return count

    state = LeaderWeights()

    def sticky(now_brokers, now):
        state.observe(now_brokers, now)
        return state.weights

    # (200 and 6 with bounded loads: every heartbeat, and a few times.)
    assert moves(lambda now_brokers, _: load_weights(now_brokers)) > 100
    assert moves(sticky) <= 8


def test_an_overloaded_agent_comes_back_once_its_load_is_gone():
    weights = LeaderWeights()
    now = _feed(weights, [{"a": 100.0, "b": 100.0, "c": 600.0}] * 40)
    assert set(weights.weights) == {"c"}
    # Weighted down, c's load falls below the others' — not a reason to come back: per
    # unit of its weight it is still overloaded.
    low = weights.weights["c"] * 500.0
    now = _feed(weights, [{"a": 120.0, "b": 120.0, "c": low}] * 100, start=now + 3.0)
    assert set(weights.weights) == {"c"}
    # Its extra load gone, it comes back after the hold time.
    later = now + 3.0
    now = _feed(weights, [{"a": 100.0, "b": 100.0, "c": weights.weights["c"] * 100.0}] * 40, later)
    assert weights.weights == {}
    # Weighted down again, then the whole zone goes idle: it comes back too.
    now = _feed(weights, [{"a": 100.0, "b": 100.0, "c": 600.0}] * 200, start=now + 3.0)
    assert set(weights.weights) == {"c"}
    _feed(weights, [{"a": 0.0, "b": 0.0, "c": 0.0}] * 200, start=now + 3.0)
    assert weights.weights == {}


def test_weighted_owner_needs_someone():
    with pytest.raises(ValueError):
        weighted_owner("k", [], {})


def test_the_chunk_ring_spreads_chunks_and_moves_few_when_an_agent_leaves():
    me, others = "agt-0", [peer(f"agt-{i}", "a") for i in range(1, 4)]
    ring = ChunkRing(me)
    ring.update(others)
    owners = [ring.owner("vci_x/segments/f", i) for i in range(2000)]
    shares = Counter(o.agent_id if o else me for o in owners)
    assert all(350 <= n <= 650 for n in shares.values()), shares
    ring.update(others[:2])  # agt-3 leaves
    after = [ring.owner("vci_x/segments/f", i) for i in range(2000)]
    for before, now in zip(owners, after):
        if before is None or before.agent_id != "agt-3":
            assert (before and before.agent_id) == (now and now.agent_id)
    alone = ChunkRing(me)
    alone.update([])
    assert alone.owner("k", 1) is None


def test_a_journal_entrys_writer_owns_its_chunks_while_it_is_in_the_ring():
    me, others = "agt-0", [peer(f"agt-{i}", "a") for i in range(1, 4)]
    ring = ChunkRing(me)
    ring.update(others)
    theirs = "vci_x/journal/agt-2/boot1/000000000007.seg"
    mine = "vci_x/journal/agt-0/boot1/000000000007.seg"
    assert {ring.owner(theirs, i).agent_id for i in range(50)} == {"agt-2"}
    assert {ring.owner(mine, i) for i in range(50)} == {None}
    ring.update(others[:1])  # the writer is gone: rendezvous over who is left
    owners = {o.agent_id if o else me for o in (ring.owner(theirs, i) for i in range(50))}
    assert owners == {"agt-0", "agt-1"}


def test_a_peer_signature_is_bound_to_the_secret_path_body_and_time(monkeypatch):
    header = auth.sign("s3cret", "agt-1", "POST", "/peer/v1/relay", b"body")
    assert auth.verify("s3cret", header, "POST", "/peer/v1/relay", b"body") == "agt-1"
    for secret, method, target, body in [
        ("other", "POST", "/peer/v1/relay", b"body"),  # another cluster's agent
        ("s3cret", "GET", "/peer/v1/relay", b"body"),
        ("s3cret", "POST", "/peer/v1/chunk", b"body"),
        ("s3cret", "POST", "/peer/v1/relay", b"tampered"),
    ]:
        with pytest.raises(auth.PeerAuthError):
            auth.verify(secret, header, method, target, body)
    with pytest.raises(auth.PeerAuthError, match="no peer secret"):
        auth.verify(None, header, "POST", "/peer/v1/relay", b"body")
    with pytest.raises(auth.PeerAuthError, match="malformed"):
        auth.verify("s3cret", "Bearer s3cret", "POST", "/peer/v1/relay", b"body")
    later = time.time() + auth.MAX_SKEW_MS / 1000 + 5
    monkeypatch.setattr(peer_auth.time, "time", lambda: later)
    with pytest.raises(auth.PeerAuthError, match="too old"):
        auth.verify("s3cret", header, "POST", "/peer/v1/relay", b"body")


def test_the_peer_endpoints_refuse_strangers_and_bad_requests():
    served: list[tuple[str, int]] = []

    async def serve_chunk(key: str, index: int) -> bytes:
        served.append((key, index))
        if key.endswith("missing"):
            raise ObjectNotFound(key)
        return b"x" * 10

    async def scenario():
        app = web.Application()
        add_peer_routes(
            app,
            secret=lambda: "s3cret",
            cluster_prefix="vci_a/",
            chunk_bytes=4096,
            serve_chunk=serve_chunk,
        )
        async with TestClient(TestServer(app)) as client:

            async def get(target: str, secret: str = "s3cret"):
                headers = {"Authorization": auth.sign(secret, "agt-9", "GET", target)}
                response = await client.get(target, headers=headers)
                return response.status, await response.read()

            return {
                "ok": await get("/peer/v1/chunk?key=vci_a/f&index=2&chunk=4096"),
                "unsigned": (
                    await client.get("/peer/v1/chunk?key=vci_a/f&index=0&chunk=4096")
                ).status,
                "other cluster": (await get("/peer/v1/chunk?key=vci_a/f&index=0&chunk=4096", "x"))[
                    0
                ],
                "foreign key": (await get("/peer/v1/chunk?key=vci_b/f&index=0&chunk=4096"))[0],
                "escaping key": (await get("/peer/v1/chunk?key=vci_a/../b&index=0&chunk=4096"))[0],
                "bad index": (await get("/peer/v1/chunk?key=vci_a/f&index=-1&chunk=4096"))[0],
                "not a number": (await get("/peer/v1/chunk?key=vci_a/f&index=x&chunk=4096"))[0],
                "other chunking": (await get("/peer/v1/chunk?key=vci_a/f&index=0&chunk=8192"))[0],
                "missing": (await get("/peer/v1/chunk?key=vci_a/missing&index=0&chunk=4096"))[0],
                "no relay": (await client.post("/peer/v1/relay", data=b"x")).status,
                "no hello": (await client.post("/peer/v1/hello")).status,
            }

    got = asyncio.run(scenario())
    assert got["ok"] == (200, b"x" * 10)
    assert got["unsigned"] == got["other cluster"] == 401
    assert got["foreign key"] == got["escaping key"] == got["bad index"] == 400
    assert got["not a number"] == 400 and got["other chunking"] == 409
    assert got["missing"] == 404 and got["no relay"] == got["no hello"] == 404
    assert served == [("vci_a/f", 2), ("vci_a/missing", 0)]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--zone", "a b"], "--zone"),
        (["--zone", "z" * 65], "--zone"),
        (["--cache-chunk-bytes", "1024"], "at least"),
        (["--peer-timeout-ms", "0"], "at least"),
        (["--zone-cache", "maybe"], "true or false"),
    ],
)
def test_bad_zone_and_cache_flags_are_refused_in_one_line(argv, message):
    with pytest.raises(ConfigError, match=message):
        parse_config([*REQUIRED, *argv], environ={})


def test_zone_and_cache_flags_have_environment_fallbacks():
    config = parse_config(
        REQUIRED,
        environ={
            "FLOE_ZONE": "us-east-1a",
            "FLOE_CACHE_CHUNK_BYTES": str(8 * 1024 * 1024),
            "FLOE_ZONE_CACHE": "false",
            "FLOE_PEER_TIMEOUT_MS": "750",
        },
    )
    assert config.zone == "us-east-1a" and config.cache_chunk_bytes == 8 * 1024 * 1024
    assert config.zone_cache is False and config.peer_timeout_ms == 750
    defaults = parse_config(REQUIRED, environ={})
    assert defaults.cache_chunk_bytes == 4 * 1024 * 1024 and defaults.zone_cache is True


def test_a_slow_or_dead_owner_costs_a_get_never_the_read():
    from agents.chunk_cache import ChunkCache
    from agents.http_server import start_http
    from agents.peers.client import PeerClient
    from agents.read_stats import PEER_FAILURES
    from agents.zone_cache import ZoneCache
    from core.storage import MemoryStore

    data = bytes(range(256)) * 4096  # 1 MiB: sixteen 64 KiB chunks
    store = MemoryStore("zone-units-slow-owner")
    store.put("vci_a/f", data)

    async def scenario():
        release = asyncio.Event()

        async def hang(request):
            await release.wait()
            return web.Response(status=503)

        app = web.Application()
        app.router.add_get("/peer/v1/chunk", hang)
        runner, port = await start_http(app, "127.0.0.1", 0)
        slow = Peer("agt-slow", "127.0.0.1", 1, 1, zone="a", http_port=port)
        dead = Peer("agt-dead", "127.0.0.1", 1, 2, zone="a", http_port=1)  # nothing listens
        chunks = ChunkCache(max_bytes=8 << 20, copy_bytes=1 << 20, chunk_bytes=64 * 1024)
        cache = ZoneCache(
            store,
            chunks,
            ring=ChunkRing("agt-me"),
            peers=PeerClient("agt-me", lambda: "s3cret"),
            zone_peers=lambda: [slow, dead],
            peer_timeout_s=0.3,
        )
        cache.refresh_ring()
        owners = {i: cache.ring.owner("vci_a/f", i) for i in range(16)}
        by = {name: [i for i, o in owners.items() if o and o.agent_id == name] for name in
              ("agt-slow", "agt-dead")}  # fmt: skip
        try:
            timings = []
            for index in (by["agt-slow"][0], by["agt-dead"][0], by["agt-slow"][1]):
                started = time.monotonic()
                got = await cache.read("vci_a/f", index * 65536 + 10, 100)
                timings.append(time.monotonic() - started)
                assert b"".join(got) == data[index * 65536 + 10 : index * 65536 + 110]
            return timings
        finally:
            release.set()
            await cache.peers.close()
            await runner.cleanup()

    timeouts_before = PEER_FAILURES.value("timeout")
    refused_before = PEER_FAILURES.value("unreachable")
    slow_read, dead_read, later_read = asyncio.run(scenario())
    assert slow_read < 3.0 and dead_read < 3.0  # bounded by the peer timeout, then the bucket
    assert later_read < 0.2  # the slow owner is left out for a while: straight to the bucket
    assert PEER_FAILURES.value("timeout") == timeouts_before + 1
    assert PEER_FAILURES.value("unreachable") == refused_before + 1
