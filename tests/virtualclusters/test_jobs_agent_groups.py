"""The cluster setting naming the agent groups whose jobs-role agents run jobs (table
appends among them) and migrations: set through REST and the console, learned by the
agents on heartbeat, and honoured by the jobs and migrations leases."""

from __future__ import annotations

import pytest

from tests.controlplane.console.test_pages import VALID_CLUSTER, field_errors
from tests.metadata_store.conftest import AgentApi
from tests.virtualclusters.test_agents_api import heartbeat
from tests.virtualclusters.test_job_leases import lease, queue_orphan_cleanup
from tests.virtualclusters.test_migrations_api import _create

pytestmark = pytest.mark.django_db


def config_url(cluster) -> str:
    return f"/api/v1/clusters/{cluster.public_id}/config/"


def test_any_group_runs_jobs_by_default(api, alice):
    assert api(alice["reader"]).get(config_url(alice["cluster"])).json()["jobs_agent_groups"] == []
    heartbeat(alice["agent_key"], "agt-w", agent_group="west")
    run = queue_orphan_cleanup(alice["cluster"])
    assert lease(alice["agent_key"], "agt-w")["id"] == run.public_id


def test_only_agents_of_the_named_groups_lease_jobs(api, alice):
    changed = api(alice["admin"]).patch(
        config_url(alice["cluster"]), {"jobs_agent_groups": ["east", "north"]}, format="json"
    )
    assert changed.status_code == 200 and changed.json()["jobs_agent_groups"] == ["east", "north"]
    key = alice["agent_key"]
    # What the agents learn on heartbeat.
    assert heartbeat(key, "agt-w", agent_group="west")["cluster"]["config"][
        "jobs_agent_groups"
    ] == ["east", "north"]
    heartbeat(key, "agt-e", agent_group="east")
    run = queue_orphan_cleanup(alice["cluster"])
    assert lease(key, "agt-w") is None  # west: not named
    assert lease(key, "agt-never-seen") is None  # no heartbeat, no group
    leased = lease(key, "agt-e")
    assert leased is not None and leased["id"] == run.public_id


def test_only_agents_of_the_named_groups_lease_migrations(api, alice):
    created = _create(api, alice)
    api(alice["admin"]).patch(
        config_url(alice["cluster"]), {"jobs_agent_groups": ["east"]}, format="json"
    )
    agent = AgentApi(alice["agent_key"])
    heartbeat(alice["agent_key"], "agt-w", agent_group="west")
    heartbeat(alice["agent_key"], "agt-e", agent_group="east")
    assert agent("migrations/lease", {"agent_id": "agt-w"}) == {"migration": None}
    assert agent("migrations/lease", {"agent_id": "agt-e"})["migration"]["id"] == created["id"]


def test_bad_group_lists_are_refused_and_another_org_cannot_set_them(api, alice, bob):
    client, url = api(alice["admin"]), config_url(alice["cluster"])
    for bad in (["East"], "east", [""], ["-x"], [0], [["east"]], [f"g{i}" for i in range(33)]):
        refused = client.patch(url, {"jobs_agent_groups": bad}, format="json")
        assert refused.status_code == 400 and "jobs_agent_groups" in refused.json()["error"]
    assert (
        api(bob["admin"]).patch(url, {"jobs_agent_groups": ["b"]}, format="json").status_code == 404
    )
    assert (
        api(alice["reader"]).patch(url, {"jobs_agent_groups": ["b"]}, format="json").status_code
        == 403
    )
    alice["cluster"].refresh_from_db()
    assert alice["cluster"].jobs_agent_groups == []
    # An empty list goes back to any group.
    client.patch(url, {"jobs_agent_groups": ["east"]}, format="json")
    assert (
        client.patch(url, {"jobs_agent_groups": []}, format="json").json()["jobs_agent_groups"]
        == []
    )


def test_the_console_sets_and_shows_the_groups(client, alice):
    cluster = alice["cluster"]
    client.force_login(alice["user"])
    url = f"/clusters/{cluster.public_id}/config"
    response = client.post(url, {**VALID_CLUSTER, "jobs_agent_groups": "west, east,east"})
    assert response.status_code == 302
    cluster.refresh_from_db()
    assert cluster.jobs_agent_groups == ["east", "west"]
    form = client.get(f"/clusters/{cluster.public_id}/").context["config_form"]
    assert form["jobs_agent_groups"].value() == "east, west"
    bad = client.post(url, {**VALID_CLUSTER, "jobs_agent_groups": "East"})
    assert bad.status_code == 200 and field_errors(bad, "jobs_agent_groups")
    client.post(url, {**VALID_CLUSTER, "jobs_agent_groups": ""})
    cluster.refresh_from_db()
    assert cluster.jobs_agent_groups == []
