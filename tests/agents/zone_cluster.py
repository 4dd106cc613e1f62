"""Agents in several zones for one test: start them, wait until each knows the others,
and read their counters."""

from __future__ import annotations

import re
import time

from tests.agents.conftest import AgentProcess

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$")


def start_zones(agent, key: str, layout: dict[str, int], *, extra=None) -> dict[str, list]:
    """`layout` zone -> number of agents; returns zone -> started agents, once every
    agent lists exactly its zone's agents to a client of that zone."""
    zones = {
        zone: [agent(key, extra=["--zone", zone, *(extra or [])]) for _ in range(count)]
        for zone, count in layout.items()
    }
    wait_for_membership(zones)
    return zones


def broker_ports(bootstrap: str, client_id: str, timeout: float = 10.0) -> set[int]:
    """The brokers a Metadata answer lists for a client with this client.id."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": client_id})
    metadata = admin.list_topics(timeout=timeout)
    return {b.port for b in metadata.brokers.values()}


def wait_for_membership(zones: dict[str, list], timeout: float = 30.0) -> None:
    """Until every agent lists its zone's agents to a client naming that zone, and
    every agent to a client naming none."""
    everyone = {a.port for agents in zones.values() for a in agents}
    deadline = time.monotonic() + timeout
    while True:
        settled = all(
            broker_ports(a.bootstrap, f"probe,floe_az={zone}") == {x.port for x in agents}
            and broker_ports(a.bootstrap, "probe") == everyone
            for zone, agents in zones.items()
            for a in agents
        )
        if settled:
            return
        if time.monotonic() > deadline:
            raise TimeoutError("agents did not learn each other in time")
        time.sleep(0.5)


def metric(agent: AgentProcess, name: str, **labels: str) -> float:
    """The sum of a metric's samples whose labels include `labels`."""
    total = 0.0
    for line in agent.metrics().splitlines():
        found = _SAMPLE.match(line)
        if found is None or found.group(1) != name:
            continue
        text = found.group(2) or ""
        if all(f'{k}="{v}"' in text for k, v in labels.items()):
            total += float(found.group(3))
    return total
