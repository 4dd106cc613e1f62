"""Listener and agent-group flags, and which agents a client is sent to (pure parts)."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys

import pytest

from agents.config import ConfigError, Listener, parse_config
from agents.groups.ring import AdvertisedListener, CoordinatorRing, Peer, node_id_for, score
from agents.runtime import _bind
from tests.agents.conftest import REPO

BASE = ["--control-plane-url", "http://127.0.0.1:1", "--agent-key", "k", "--bucket-url", "mem://x"]
PLAIN, SASL = ("PLAINTEXT", "PLAINTEXT"), ("SASL_PLAINTEXT", "SASL_PLAINTEXT")


def test_the_single_port_flags_are_one_listener_named_by_its_protocol():
    assert parse_config(BASE, {}).kafka_listeners == (
        Listener("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092, "127.0.0.1"),
    )
    sasl = parse_config([*BASE, "--require-sasl", "--kafka-port", "9093"], {})
    assert sasl.kafka_listeners[0].kind == ("SASL_PLAINTEXT", "SASL_PLAINTEXT")
    tls = parse_config([*BASE, "--require-sasl", "--tls-cert", "c", "--tls-key", "k"], {})
    assert tls.kafka_listeners[0].protocol == "SASL_SSL"


def test_listeners_with_advertised_addresses_and_a_protocol_map():
    config = parse_config(
        [
            *BASE,
            "--host",
            "0.0.0.0",
            "--advertise-host",
            "agent.internal",
            "--listener",
            "PLAINTEXT://:9092",
            "--listener",
            "internal://127.0.0.1:9094",
            "--advertised-listener",
            "INTERNAL://kafka.example.com:19094",
            "--listener-security-protocol-map",
            "INTERNAL:SASL_PLAINTEXT",
        ],
        {},
    )
    assert config.kafka_listeners == (
        Listener("PLAINTEXT", "PLAINTEXT", "0.0.0.0", 9092, "agent.internal"),
        Listener("INTERNAL", "SASL_PLAINTEXT", "127.0.0.1", 9094, "kafka.example.com", 19094),
    )
    assert config.require_sasl  # a SASL listener: the Schema Registry asks for logins too
    from_env = parse_config(
        BASE,
        {
            "FLOE_LISTENERS": "PLAINTEXT://:0, SASL_PLAINTEXT://:0",
            "FLOE_ADVERTISED_LISTENERS": "SASL_PLAINTEXT://[::1]:0",
            "FLOE_AGENT_GROUP": "vpc-2",
        },
    )
    assert [x.kind for x in from_env.kafka_listeners] == [PLAIN, SASL]
    assert from_env.kafka_listeners[1].advertised_host == "::1"
    assert from_env.agent_group == "vpc-2"
    assert parse_config(BASE, {}).agent_group == "default"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--listener", "PLAINTEXT:9092"], "must be NAME://host:port"),
        (["--listener", "PLAINTEXT://:99999"], "not a TCP port"),
        (["--listener", "INTERNAL://:1"], "map it with --listener-security-protocol-map"),
        (["--listener", "PLAINTEXT://:1", "--listener", "plaintext://:2"], "given twice"),
        (["--listener", "PLAINTEXT://:1", "--kafka-port", "2"], "alternatives"),
        (["--listener", "PLAINTEXT://:1", "--require-sasl"], "name a SASL_PLAINTEXT"),
        (["--listener", "SSL://:1"], "needs --tls-cert"),
        (["--listener", "PLAINTEXT://:1", "--tls-cert", "c", "--tls-key", "k"], "no listener is"),
        (["--listener", "PLAINTEXT://:1", "--advertised-listener", "SSL://h:1"], "no --listener"),
        (["--advertised-listener", "PLAINTEXT://h:1"], "needs --listener"),
        (
            ["--listener", "X://:1", "--listener-security-protocol-map", "X:TLS"],
            "NAME:PROTOCOL",
        ),
        (["--agent-group", "Eu-West"], "--agent-group must be"),
        (["--agent-group=-a"], "--agent-group must be"),
        (["--agent-group", "a_b"], "--agent-group must be"),
    ],
)
def test_bad_listener_and_group_flags_are_refused(argv, message):
    with pytest.raises(ConfigError, match=message):
        parse_config([*BASE, *argv], {})


def test_a_bad_agent_group_exits_with_one_line():
    done = subprocess.run(
        [sys.executable, "-m", "agents", *BASE, "--agent-group", "No Such"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "--agent-group must be" in done.stderr


def _peer(agent_id: str, *kinds, zone: str = "", group: str = "default") -> Peer:
    listeners = tuple(
        AdvertisedListener(name, protocol, f"{agent_id}.{name.lower()}", 9000 + n)
        for n, (name, protocol) in enumerate(kinds)
    )
    first = listeners[0] if listeners else AdvertisedListener("", "", agent_id, 9000)
    return Peer(
        agent_id,
        first.host,
        first.port,
        node_id_for(agent_id),
        zone=zone,
        agent_group=group,
        listeners=listeners,
    )


def _ring(me: Peer, *others: Peer) -> CoordinatorRing:
    ring = CoordinatorRing(me, node_id_for)
    ring.update(
        [
            {
                "agent_id": p.agent_id,
                "host": p.host,
                "port": p.port,
                "zone": p.zone,
                "agent_group": p.agent_group,
                "listeners": [
                    {"name": x.name, "protocol": x.protocol, "host": x.host, "port": x.port}
                    for x in p.listeners
                ],
            }
            for p in (me, *others)
        ]
    )
    return ring


def _owned_by(agent_id: str, everyone: list[str]) -> str:
    return next(
        key
        for key in (f"g{n}" for n in range(1000))
        if max(everyone, key=lambda a: score(0, key, a)) == agent_id
    )


def test_a_client_is_sent_only_to_agents_of_its_listener_kind_at_that_address():
    plain, sasl, both = _peer("plain", PLAIN), _peer("sasl", SASL), _peer("both", PLAIN, SASL)
    ring = _ring(both, plain, sasl)
    assert ring.visible(sasl, SASL) and not ring.visible(sasl, PLAIN)
    assert not ring.sees_everyone(PLAIN) and ring.sees_everyone(None)
    assert both.at(SASL).port == 9001 and both.at(PLAIN).port == 9000
    # An agent older than listeners said nothing of its kind: shown to everyone, as before.
    assert _peer("old").serves(SASL)
    # The owner of a key is a SASL-only agent: plaintext clients get a front of their kind.
    key = _owned_by("sasl", ["plain", "sasl", "both"])
    assert ring.front(key, None, listener=SASL).agent_id == "sasl"
    assert ring.front(key, None, listener=PLAIN).agent_id in {"plain", "both"}
    assert ring.front(key, None).agent_id == "sasl"  # no listener (a relayed request)


def test_a_client_is_sent_only_to_its_agent_groups_agents():
    east, east2 = _peer("east", PLAIN, group="east"), _peer("east2", PLAIN, group="east")
    west = _peer("west", PLAIN, group="west")
    ring = _ring(east, east2, west)
    assert [p.agent_id for p in ring.candidates()] == ["east", "east2", "west"]
    assert not ring.visible(west, PLAIN) and not ring.sees_everyone(None)
    # A free lease or a transactional id goes to an agent of the asking agent's group…
    for n in range(50):
        assert ring.owner(f"k{n}").agent_group == "east"
    # …and a lease held in the other group is reached through a front of this one.
    held_in_west = ring.peer("west")
    assert held_in_west is not None
    front = ring.front("g", None, owner=held_in_west, listener=PLAIN)
    assert front.agent_id in {"east", "east2"}
    assert ring.front("g", None, owner=held_in_west).agent_group == "east"


def test_connections_to_the_agents_listeners_send_without_nagle_delay():
    """Every port the agent binds hands asyncio sockets on which it turns Nagle's
    algorithm off: small answers written back to back go out at once."""

    async def accepted_nodelay() -> int:
        accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        class Accept(asyncio.Protocol):
            def connection_made(self, transport):
                sock = transport.get_extra_info("socket")
                accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        server = await asyncio.get_running_loop().create_server(Accept, sock=_bind("127.0.0.1", 0))
        async with server:
            port = server.sockets[0].getsockname()[1]
            _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
            try:
                return await asyncio.wait_for(accepted, 5)
            finally:
                writer.close()

    assert asyncio.run(accepted_nodelay()) != 0
