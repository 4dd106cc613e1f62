"""A starting agent says hello to its peers before it serves Kafka: each heartbeats at
once and so lists the newcomer in its Metadata from the newcomer's first client on.
Without it a peer learned of a new agent by its next heartbeat (up to 3 s later) and
meanwhile listed fewer brokers than the newcomer did; librdkafka drops a broker that a
Metadata answer leaves out, failing what it had in flight to it — a consumer whose join
waited for such a Metadata answer stayed out of its group for minutes (the HA fault
test's "the group never committed")."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from agents.peers import auth
from metadata_store.live_agents import peer_secret_for
from tests.agents.test_agent_groups import broker_ports

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka]


def _hello(agent, secret: str | None, caller: str = "agt-newcomer") -> tuple[int, dict]:
    request = urllib.request.Request(f"{agent.http_url}/peer/v1/hello", data=b"", method="POST")
    if secret is not None:
        request.add_header("Authorization", auth.sign(secret, caller, "POST", "/peer/v1/hello"))
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_new_agent_is_a_broker_of_its_peers_before_it_serves(agent, cluster):
    first = agent(cluster.key)
    second = agent(cluster.key)  # returns once it prints that it serves Kafka
    both = {first.port, second.port}
    # Asked at once: the first agent's Metadata already has the second one.
    assert broker_ports(first.bootstrap) == both
    assert broker_ports(second.bootstrap) == both
    assert "1 peer(s) aware of this agent" in second.logs()
    # The hello itself: a peer of the cluster gets the answer (a heartbeat's worth of
    # waiting), whether it is known; anyone else is refused.
    secret = peer_secret_for(cluster.cluster)
    assert _hello(first, secret, caller=second.agent_id) == (200, {"known": True})
    assert _hello(first, secret, caller="agt-unknown") == (200, {"known": False})
    assert _hello(first, None)[0] == 401
    assert _hello(first, "another cluster's secret")[0] == 401


def test_agents_started_together_agree_and_greet_in_time(agent, cluster):
    # Each registers and greets the peers its registration answer named, which may be
    # starting too (one that has no heartbeat loop yet heartbeats for the hello itself).
    agents = [agent(cluster.key, wait=False) for _ in range(3)]
    for each in agents:
        each.wait_ready()
    ports = {each.port for each in agents}
    assert all(broker_ports(each.bootstrap) == ports for each in agents)
    for each in agents:
        assert "not yet aware" not in each.logs(), each.logs()
