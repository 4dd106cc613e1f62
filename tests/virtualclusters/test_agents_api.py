"""A cluster's agents: what heartbeats record, the REST list, the console table, and the
per-cluster peer secret handed to agents."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from metadata_store.models import Agent
from tests.metadata_store.conftest import AgentApi

pytestmark = pytest.mark.django_db

STATS = {
    "get_requests": 3,
    "get_bytes": 12_582_912,
    "peer_served_bytes": 4_194_304,
    "peer_fetched_bytes": 0,
    "cache_hits": 9,
    "cache_misses": 3,
    "client_bytes_by_zone": {"a": 1000, "": 5},
    "consumed_by_topic": {"00000000-0000-0000-0000-000000000001": [10, 1]},
}


LISTENER = {"name": "PLAINTEXT", "protocol": "PLAINTEXT", "host": "10.0.0.7", "port": 9092}


def heartbeat(key: str, agent_id: str, **fields) -> dict:
    body = {"agent_id": agent_id, "host": "10.0.0.7", "port": 9092, **fields}
    return AgentApi(key)("heartbeat", body)


def test_a_heartbeat_records_zone_version_roles_and_read_stats(api, alice):
    answer = heartbeat(
        alice["agent_key"],
        "agt-a1",
        zone="us-east-1a",
        load=12.5,
        http_port=8081,
        version="0.1.0",
        roles=["proxy"],
        stats=STATS,
        agent_group="vpc-1",
        listeners=[LISTENER],
    )
    assert answer["agents"] == [
        {
            "agent_id": "agt-a1",
            "host": "10.0.0.7",
            "port": 9092,
            "listeners": [LISTENER],
            "agent_group": "vpc-1",
            "zone": "us-east-1a",
            "load": 12.5,
            "http_port": 8081,
            "roles": ["proxy"],
        }
    ]
    listed = api(alice["reader"]).get(f"/api/v1/clusters/{alice['cluster'].public_id}/agents/")
    assert listed.status_code == 200
    (agent,) = listed.json()
    assert agent["agent_id"] == "agt-a1" and agent["zone"] == "us-east-1a"
    assert agent["address"] == "10.0.0.7:9092" and agent["http_port"] == 8081
    assert agent["version"] == "0.1.0" and agent["roles"] == ["proxy"]
    assert agent["load"] == 12.5 and agent["live"] is True
    assert agent["last_heartbeat"] and agent["started_at"]
    assert agent["stats"]["get_bytes"] == 12_582_912
    assert agent["stats"]["client_bytes_by_zone"] == {"a": 1000, "": 5}
    assert agent["stats"]["cache_hit_ratio"] == 0.75
    assert "consumed_by_topic" not in agent["stats"]  # throughput out's, not the schema's


def test_an_agent_that_stopped_heartbeating_is_listed_as_gone(api, alice):
    heartbeat(alice["agent_key"], "agt-old")
    heartbeat(alice["agent_key"], "agt-new")
    Agent.objects.filter(agent_id="agt-old").update(
        last_heartbeat=timezone.now() - timedelta(minutes=5)
    )
    Agent.objects.create(
        cluster=alice["cluster"],
        agent_id="agt-ancient",
        host="h",
        port=1,
        last_heartbeat=timezone.now() - timedelta(days=3),
    )
    listed = api(alice["admin"]).get(f"/api/v1/clusters/{alice['cluster'].public_id}/agents/")
    assert [(a["agent_id"], a["live"]) for a in listed.json()] == [
        ("agt-new", True),
        ("agt-old", False),
    ]
    assert listed.json()[0]["stats"]["cache_hit_ratio"] is None


def test_another_organization_gets_a_404_for_the_agent_list(api, alice, bob):
    heartbeat(alice["agent_key"], "agt-alice")
    url = f"/api/v1/clusters/{alice['cluster'].public_id}/agents/"
    assert api(bob["admin"]).get(url).status_code == 404
    assert api().get(url).status_code == 401
    own = api(bob["admin"]).get(f"/api/v1/clusters/{bob['cluster'].public_id}/agents/")
    assert own.status_code == 200 and own.json() == []


@pytest.mark.parametrize(
    "fields, named",
    [
        ({"http_port": 70_000}, "http_port"),
        ({"version": "v" * 33}, "version"),
        ({"roles": ["x" * 33]}, "roles"),
        ({"roles": ["r"] * 9}, "roles"),
        ({"stats": {"get_bytes": -1}}, "get_bytes"),
        ({"agent_group": "VPC"}, "agent_group"),
        ({"agent_group": "a" * 64}, "agent_group"),
        ({"listeners": [{**LISTENER, "protocol": "TLS"}]}, "protocol"),
        ({"listeners": [{**LISTENER, "name": "a b"}]}, "name"),
        ({"listeners": [LISTENER] * 17}, "listeners"),
        ({"stats": {"client_bytes_by_zone": {f"z{i}": 1 for i in range(65)}}}, "client_bytes"),
        ({"stats": {"client_bytes_by_zone": {"z" * 65: 1}}}, "client_bytes"),
        ({"stats": {"consumed_by_topic": {"not-a-uuid": [1, 1]}}}, "consumed_by_topic"),
        ({"stats": {"consumed_by_topic": {str(uuid.UUID(int=1)): [1]}}}, "consumed_by_topic"),
        ({"stats": {"consumed_by_topic": {str(uuid.UUID(int=1)): [-1, 1]}}}, "consumed"),
    ],
)
def test_a_heartbeat_with_out_of_bounds_fields_is_refused_naming_the_field(alice, fields, named):
    response = AgentApi(alice["agent_key"]).raw("heartbeat", {"agent_id": "agt-1", **fields})
    assert response.status_code == 400
    assert named in response.json()["error"]
    assert not Agent.objects.filter(agent_id="agt-1").exists()


def test_each_cluster_gets_its_own_stable_peer_secret(alice, bob):
    first = heartbeat(alice["agent_key"], "agt-1")["peer_secret"]
    again = AgentApi(alice["agent_key"])("register", {"agent_id": "agt-2"})["peer_secret"]
    other = heartbeat(bob["agent_key"], "agt-3")["peer_secret"]
    assert first == again and len(first) == 64
    assert other != first


def test_the_console_lists_the_agents_in_a_table(client, alice):
    heartbeat(alice["agent_key"], "agt-z1", zone="eu-west-1b", version="0.1.0", stats=STATS)
    client.force_login(alice["user"])
    page = client.get(f"/clusters/{alice['cluster'].public_id}/agents/").content.decode()
    assert 'data-agent="agt-z1"' in page
    assert "eu-west-1b" in page and "10.0.0.7:9092" in page and "0.1.0" in page
    assert "12.0\xa0MB" in page and "75%" in page
    detail = client.get(f"/clusters/{alice['cluster'].public_id}/").content.decode()
    assert f"/clusters/{alice['cluster'].public_id}/agents/" in detail


def test_the_console_agents_page_of_another_organization_is_a_404(client, alice, bob):
    heartbeat(alice["agent_key"], "agt-secret")
    client.force_login(bob["user"])
    assert client.get(f"/clusters/{alice['cluster'].public_id}/agents/").status_code == 404
    assert (
        "No agents yet"
        in client.get(f"/clusters/{bob['cluster'].public_id}/agents/").content.decode()
    )


def _listener(name: str, protocol: str, host: str, port: int) -> dict:
    return {"name": name, "protocol": protocol, "host": host, "port": port}


def _two_groups_with_two_listener_kinds(key: str) -> None:
    """east: a dual agent and a SASL-only one; west: one plaintext agent; plus one agent
    older than listeners (none reported)."""
    dual = [
        _listener("PLAINTEXT", "PLAINTEXT", "10.1.0.1", 9092),
        _listener("SECURE", "SASL_SSL", "east.example.com", 19093),
    ]
    heartbeat(key, "agt-e1", host="10.1.0.1", agent_group="east", listeners=dual)
    sasl_only = [_listener("SECURE", "SASL_SSL", "east.example.com", 19094)]
    heartbeat(
        key, "agt-e2", host="east.example.com", port=19094, agent_group="east", listeners=sasl_only
    )
    plain = [_listener("PLAINTEXT", "PLAINTEXT", "10.2.0.1", 9092)]
    heartbeat(key, "agt-w1", host="10.2.0.1", agent_group="west", listeners=plain)
    heartbeat(key, "agt-old", host="10.3.0.1")


def test_agents_are_listed_with_their_group_and_listeners(api, alice):
    _two_groups_with_two_listener_kinds(alice["agent_key"])
    url = f"/api/v1/clusters/{alice['cluster'].public_id}/agents/"
    agents = {a["agent_id"]: a for a in api(alice["reader"]).get(url).json()}
    assert agents["agt-e1"]["agent_group"] == "east"
    assert agents["agt-e1"]["listeners"] == [
        {"name": "PLAINTEXT", "security_protocol": "PLAINTEXT", "address": "10.1.0.1:9092"},
        {"name": "SECURE", "security_protocol": "SASL_SSL", "address": "east.example.com:19093"},
    ]
    assert agents["agt-old"]["agent_group"] == "default"
    assert agents["agt-old"]["listeners"] == [
        {"name": "", "security_protocol": "", "address": "10.3.0.1:9092"}
    ]


def test_the_cluster_has_a_bootstrap_address_per_group_and_listener(api, alice, bob):
    _two_groups_with_two_listener_kinds(alice["agent_key"])
    heartbeat(
        bob["agent_key"],
        "agt-bob",
        host="10.9.9.9",
        agent_group="east",
        listeners=[_listener("PLAINTEXT", "PLAINTEXT", "10.9.9.9", 9092)],
    )
    url = f"/api/v1/clusters/{alice['cluster'].public_id}/"
    assert api(alice["reader"]).get(url).json()["bootstraps"] == [
        {
            "agent_group": "default",
            "listener": "",
            "security_protocol": "",
            "bootstrap": "10.3.0.1:9092",
        },
        {
            "agent_group": "east",
            "listener": "PLAINTEXT",
            "security_protocol": "PLAINTEXT",
            "bootstrap": "10.1.0.1:9092",
        },
        {
            "agent_group": "east",
            "listener": "SECURE",
            "security_protocol": "SASL_SSL",
            "bootstrap": "east.example.com:19093,east.example.com:19094",
        },
        {
            "agent_group": "west",
            "listener": "PLAINTEXT",
            "security_protocol": "PLAINTEXT",
            "bootstrap": "10.2.0.1:9092",
        },
    ]


def test_the_console_shows_groups_listeners_and_a_bootstrap_per_group(client, alice, bob):
    _two_groups_with_two_listener_kinds(alice["agent_key"])
    heartbeat(bob["agent_key"], "agt-bob", host="10.9.9.9", agent_group="bobs")
    client.force_login(alice["user"])
    cid = alice["cluster"].public_id
    page = client.get(f"/clusters/{cid}/agents/").content.decode()
    assert "<th>Group" in page and "<th>Listeners</th>" in page
    assert (
        "SECURE (SASL_SSL)" in page
        and '<code title="east.example.com:19093">east.example.com:19093</code>' in page
    )
    assert "west" in page and "bobs" not in page and "10.9.9.9" not in page
    detail = client.get(f"/clusters/{cid}/").content.decode()
    assert 'id="bootstraps"' in detail
    assert 'data-group="east">east · SECURE (SASL_SSL)</dt>' in detail
    assert "east.example.com:19093,east.example.com:19094</code>" in detail
    assert 'data-group="west">west · PLAINTEXT</dt>' in detail
    assert "10.9.9.9" not in detail and "bobs" not in detail


def test_one_group_and_listener_keep_the_single_bootstrap_address(client, alice):
    heartbeat(alice["agent_key"], "agt-1", listeners=[LISTENER])
    client.force_login(alice["user"])
    detail = client.get(f"/clusters/{alice['cluster'].public_id}/").content.decode()
    assert '<code id="bootstrap">10.0.0.7:9092</code>' in detail
    assert 'id="bootstraps"' not in detail


def test_an_agent_key_limited_to_a_group_only_admits_agents_of_that_group(api, alice, client):
    cid = alice["cluster"].public_id
    admin = api(alice["admin"])
    made = admin.post(
        f"/api/v1/clusters/{cid}/agent-keys/",
        {"name": "east", "agent_group": "east"},
        format="json",
    )
    assert made.status_code == 201 and made.json()["agent_group"] == "east"
    limited = made.json()["key"]
    for call in ("register", "heartbeat"):
        refused = AgentApi(limited).raw(call, {"agent_id": "agt-w", "agent_group": "west"})
        assert refused.status_code == 403
        assert "limited to agent group 'east'" in refused.json()["error"]
        default = AgentApi(limited).raw(call, {"agent_id": "agt-d"})  # group "default"
        assert default.status_code == 403
    assert not Agent.objects.filter(agent_id__in=["agt-w", "agt-d"]).exists()
    assert heartbeat(limited, "agt-e", agent_group="east")["agents"][0]["agent_group"] == "east"
    # An unlimited key admits any group; a bad group name is refused at creation.
    heartbeat(alice["agent_key"], "agt-any", agent_group="west")
    bad = admin.post(f"/api/v1/clusters/{cid}/agent-keys/", {"agent_group": "East"}, format="json")
    assert bad.status_code == 400 and "agent_group" in bad.json()["error"]
    # The console makes limited keys too, and lists the limit.
    client.force_login(alice["user"])
    client.post(f"/clusters/{cid}/agent-keys/new", {"name": "west", "agent_group": "west"})
    page = client.get(f"/clusters/{cid}/").content.decode()
    assert "agent group west" in page and "agent group east" in page
    page = client.post(f"/clusters/{cid}/agent-keys/new", {"agent_group": "-x"}).content.decode()
    assert "Agent group: 1-63 lowercase letters" in page


def test_schema_registry_urls_are_listed_per_agent_group(api, client, alice, bob):
    key = alice["agent_key"]
    heartbeat(key, "agt-e1", host="10.1.0.1", agent_group="east", schema_registry_port=8081)
    heartbeat(key, "agt-e2", host="10.1.0.2", agent_group="east", schema_registry_port=18081)
    heartbeat(key, "agt-w1", host="10.2.0.1", agent_group="west", schema_registry_port=8081)
    heartbeat(key, "agt-w2", host="10.2.0.2", agent_group="west")  # no schema-registry role
    heartbeat(bob["agent_key"], "agt-bob", host="10.9.9.9", schema_registry_port=8081)
    stale = timezone.now() - timedelta(minutes=5)
    heartbeat(key, "agt-gone", host="10.1.0.9", agent_group="east", schema_registry_port=8081)
    Agent.objects.filter(agent_id="agt-gone").update(last_heartbeat=stale)
    cid = alice["cluster"].public_id
    assert api(alice["reader"]).get(f"/api/v1/clusters/{cid}/").json()["schema_registries"] == [
        {"agent_group": "east", "urls": ["http://10.1.0.1:8081", "http://10.1.0.2:18081"]},
        {"agent_group": "west", "urls": ["http://10.2.0.1:8081"]},
    ]
    client.force_login(alice["user"])
    detail = client.get(f"/clusters/{cid}/").content.decode()
    shown = detail.split('id="schema-registries"')[1].split("</div>")[0]
    assert 'data-group="east">east</dt>' in shown
    assert "http://10.1.0.1:8081,http://10.1.0.2:18081</code>" in shown
    assert '<code id="schema-registry-2">http://10.2.0.1:8081</code>' in shown
    assert "10.9.9.9" not in detail and "10.1.0.9" not in shown and "10.2.0.2" not in shown


def test_a_cluster_without_a_schema_registry_agent_lists_none(api, client, alice):
    heartbeat(alice["agent_key"], "agt-1", listeners=[LISTENER])
    cid = alice["cluster"].public_id
    assert api(alice["reader"]).get(f"/api/v1/clusters/{cid}/").json()["schema_registries"] == []
    client.force_login(alice["user"])
    assert 'id="schema-registries"' not in client.get(f"/clusters/{cid}/").content.decode()
