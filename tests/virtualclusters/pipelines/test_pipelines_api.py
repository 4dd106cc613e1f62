"""Managed data pipelines: the REST API (create, list, describe, configurations, state,
dry run on given samples, delete), its checks (line/column problems, unknown topics,
roles, the other tenant), the audit log, the pipeline's own principal (SASL user and
ACLs) and the pipelines role's agent-API calls (assignments, reports → throughput)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from core.security.scram import plain_verify
from team.models import AuditEvent
from tests.metadata_store.conftest import AgentApi
from virtualclusters.pipelines.models import Pipeline, PipelineReport
from virtualclusters.security.models import Acl, SaslCredential

pytestmark = pytest.mark.django_db

CONFIG = """\
input:
  kafka:
    topics: [orders]
processors:
  - parse_json: {}
  - filter: 'value.amount > 0'
outputs:
  default: {kafka: {topic: orders-clean}}
errors:
  dead_letter: {topic: orders-dlq}
"""


def _url(cluster, *rest: str) -> str:
    tail = "/".join(["/api/v1/clusters", cluster.public_id, "pipelines", *rest])
    return tail if rest and rest[-1] in ("state", "dry-run") else tail + "/"


@pytest.fixture
def topics(alice):
    agent = AgentApi(alice["agent_key"])
    for name in ("orders", "orders-clean", "orders-dlq", "orders-eu"):
        agent.create_topic(name, partitions=2)
    return agent


def _create(api, alice, name="router", config=CONFIG, **more) -> dict:
    body = {"name": name, "config": config, **more}
    response = api(alice["admin"]).post(_url(alice["cluster"]), body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_it_creates_a_paused_pipeline_with_version_1_and_describes_it(api, alice, topics):
    created = _create(api, alice)
    assert created["id"].startswith("ppl_") and created["name"] == "router"
    assert (created["state"], created["version"], created["config"]) == ("paused", 1, CONFIG)
    assert created["principal"] == "User:pipeline-router"
    assert created["agents"] == [] and created["lag"] is None
    reader = api(alice["reader"])
    listed = reader.get(_url(alice["cluster"])).json()
    assert [(p["name"], p["state"], p["version"]) for p in listed] == [("router", "paused", 1)]
    described = reader.get(_url(alice["cluster"], "router")).json()
    assert described["id"] == created["id"]
    versions = reader.get(_url(alice["cluster"], "router", "configurations")).json()
    assert [(v["version"], v["current"]) for v in versions] == [(1, True)]
    one = reader.get(_url(alice["cluster"], "router", "configurations", "1")).json()
    assert one["config"] == CONFIG and one["canonical"]["input"]["kafka"]["topics"] == ["orders"]


def test_it_gives_each_pipeline_a_principal_with_acls_for_exactly_its_topics(api, alice, topics):
    created = _create(api, alice)
    assert SaslCredential.objects.filter(
        cluster=alice["cluster"], username="pipeline-router"
    ).exists()
    bindings = {
        (a.resource_type, a.resource_name, a.pattern_type, a.operation)
        for a in Acl.objects.filter(principal="User:pipeline-router")
    }
    assert bindings == {
        ("topic", "orders", "literal", "read"),
        ("group", "floe-pipeline-router", "literal", "read"),
        ("topic", "orders-clean", "literal", "write"),
        ("topic", "orders-dlq", "literal", "write"),
        ("transactional_id", f"floe-pipeline-{created['id']}-", "prefixed", "write"),
    }
    # A new version that writes elsewhere moves the WRITE ACL with it.
    moved = CONFIG.replace("orders-clean", "orders-eu")
    response = api(alice["admin"]).post(
        _url(alice["cluster"], "router", "configurations"), {"config": moved}, format="json"
    )
    assert response.status_code == 201, response.content
    written = set(
        Acl.objects.filter(principal="User:pipeline-router", operation="write").values_list(
            "resource_name", flat=True
        )
    )
    assert written == {"orders-eu", "orders-dlq", f"floe-pipeline-{created['id']}-"}


def test_a_new_configuration_becomes_current_and_versions_are_listed_newest_first(
    api, alice, topics
):
    _create(api, alice)
    client = api(alice["admin"])
    second = CONFIG.replace("> 0", "> 10")
    response = client.post(
        _url(alice["cluster"], "router", "configurations"), {"config": second}, format="json"
    )
    assert response.status_code == 201, response.content
    assert response.json()["version"] == 2 and response.json()["current"] is True
    assert response["Location"].endswith("/pipelines/router/configurations/2/")
    versions = client.get(_url(alice["cluster"], "router", "configurations")).json()
    assert [(v["version"], v["current"]) for v in versions] == [(2, True), (1, False)]
    assert client.get(_url(alice["cluster"], "router")).json()["config"] == second
    missing = client.get(_url(alice["cluster"], "router", "configurations", "9"))
    assert missing.status_code == 404


def test_a_bad_configuration_is_refused_with_every_problem_at_its_line(api, alice, topics):
    client = api(alice["admin"])
    unknown = CONFIG.replace("orders-clean", "nowhere").replace("[orders]", "[missing]")
    response = client.post(_url(alice["cluster"]), {"name": "p", "config": unknown}, format="json")
    assert response.status_code == 400, response.content
    body = response.json()
    problems = {(p["line"], p["path"]) for p in body["problems"]}
    assert problems == {(3, "input.kafka.topics[0]"), (8, "outputs.default.kafka.topic")}
    assert "line 3" in body["detail"] and "missing" in body["detail"]
    # Reading and writing one topic would loop.
    looping = CONFIG.replace("orders-clean", "orders")
    response = client.post(_url(alice["cluster"]), {"name": "p", "config": looping}, format="json")
    assert response.status_code == 400
    assert response.json()["problems"][0]["line"] == 8
    assert "loop" in response.json()["problems"][0]["message"]
    # Not YAML at all: the engine's problem, with its position.
    response = client.post(
        _url(alice["cluster"]), {"name": "p", "config": "input: [\n  :"}, format="json"
    )
    assert response.status_code == 400 and response.json()["problems"][0]["line"] >= 1
    assert not Pipeline.objects.exists() and not SaslCredential.objects.exists()


def test_it_refuses_bad_names_duplicates_states_and_unknown_fields(api, alice, topics):
    _create(api, alice)
    client = api(alice["admin"])
    for bad in (
        {"name": "-x", "config": CONFIG},
        {"name": "a/b", "config": CONFIG},
        {"name": "x" * 101, "config": CONFIG},
        {"name": "x", "config": CONFIG, "state": "sleeping"},
        {"name": "x", "config": CONFIG, "color": "red"},
        {"name": "x"},
        {"name": "x", "config": 7},
    ):
        response = client.post(_url(alice["cluster"]), bad, format="json")
        assert response.status_code == 400, (bad, response.content)
    response = client.post(
        _url(alice["cluster"]), {"name": "router", "config": CONFIG}, format="json"
    )
    assert response.status_code == 409
    response = client.post(
        _url(alice["cluster"], "router", "state"), {"state": "asleep"}, format="json"
    )
    assert response.status_code == 400


def test_members_read_and_only_admins_change(api, alice, topics):
    _create(api, alice)
    reader = api(alice["reader"])
    assert reader.get(_url(alice["cluster"], "router")).status_code == 200
    for method, url, body in (
        ("post", _url(alice["cluster"]), {"name": "y", "config": CONFIG}),
        ("post", _url(alice["cluster"], "router", "configurations"), {"config": CONFIG}),
        ("post", _url(alice["cluster"], "router", "state"), {"state": "running"}),
        ("post", _url(alice["cluster"], "router", "dry-run"), {}),
        ("delete", _url(alice["cluster"], "router"), None),
    ):
        response = getattr(reader, method)(url, body, format="json")
        assert response.status_code == 403, (url, response.content)
    assert Pipeline.objects.get().state == "paused"


def test_the_other_tenant_sees_nothing(api, alice, bob, topics):
    _create(api, alice)
    client = api(bob["admin"])
    assert client.get(_url(alice["cluster"])).status_code == 404
    assert client.get(_url(alice["cluster"], "router")).status_code == 404
    assert client.get(_url(bob["cluster"], "router")).status_code == 404
    assert client.get(_url(bob["cluster"])).json() == []
    response = client.post(_url(bob["cluster"], "router", "state"), {"state": "running"})
    assert response.status_code == 404
    # Bob's agent key is told of no pipeline of Alice's, and cannot report on one.
    bob_agent = AgentApi(bob["agent_key"])
    assert bob_agent("pipelines/assignments", {"agent_id": "b1"}) == {"pipelines": []}
    api(alice["admin"]).post(_url(alice["cluster"], "router", "state"), {"state": "running"})
    pipeline = Pipeline.objects.get()
    bob_agent(
        "pipelines/report",
        {"agent_id": "b1", "pipelines": [{"id": pipeline.public_id, "version": 1}]},
    )
    assert not PipelineReport.objects.exists()


def test_state_changes_and_delete_are_in_the_audit_log(api, alice, topics):
    created = _create(api, alice)
    client = api(alice["admin"])
    response = client.post(
        _url(alice["cluster"], "router", "state"), {"state": "running"}, format="json"
    )
    assert response.status_code == 200 and response.json()["state"] == "running"
    client.post(_url(alice["cluster"], "router", "configurations"), {"config": CONFIG})
    client.post(_url(alice["cluster"], "router", "state"), {"state": "paused"}, format="json")
    assert client.delete(_url(alice["cluster"], "router")).status_code == 204
    events = list(
        AuditEvent.objects.filter(target_type="pipeline")
        .order_by("id")
        .values_list("action", "target_id", "actor_label")
    )
    assert [e[0] for e in events] == ["created", "started", "changed", "paused", "deleted"]
    assert {e[1] for e in events} == {created["id"]}
    assert all(e[2].startswith("API key") or e[2] for e in events)
    assert not Pipeline.objects.exists()
    assert not SaslCredential.objects.filter(username="pipeline-router").exists()
    assert not Acl.objects.filter(principal="User:pipeline-router").exists()
    listed = client.get("/api/v1/audit-events/", {"target_type": "pipeline"}).json()
    assert len(listed) == 5


def test_a_dry_run_on_given_samples_shows_outputs_and_errors(api, alice, topics):
    _create(api, alice)
    response = api(alice["admin"]).post(
        _url(alice["cluster"], "router", "dry-run"),
        {
            "samples": [
                {"value": '{"amount": 5}', "key": "k1"},
                {"value": "not json"},
                {"value": '{"amount": 0}'},
            ]
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    result = response.json()
    assert result["ok"] is True and len(result["records"]) == 3
    first, second, third = result["records"]
    assert third["filtered"] is True and third["outputs"] == []
    assert first["source"]["topic"] == "orders" and first["error"] is None
    assert [o["output"] for o in first["outputs"]] == ["default"]
    assert second["error"]["processor"] == 0 and "not JSON" in second["error"]["message"]
    # With a dead-letter topic, the failed record shows as the dead-letter record.
    (dead,) = second["outputs"]
    assert dead["output"] == "$dead_letter" and dead["value"] == "not json"
    # A configuration with problems is not run: ok false, with them.
    response = api(alice["admin"]).post(
        _url(alice["cluster"], "router", "dry-run"),
        {"config": CONFIG.replace("[orders]", "[nope]"), "samples": [{"value": "{}"}]},
        format="json",
    )
    assert response.status_code == 200
    assert response.json()["ok"] is False and response.json()["problems"][0]["line"] == 3


def test_a_dry_run_on_the_topics_needs_a_live_agent(api, alice, topics):
    _create(api, alice)
    response = api(alice["admin"]).post(
        _url(alice["cluster"], "router", "dry-run"), {"limit": 5}, format="json"
    )
    assert response.status_code == 409, response.content
    assert "No live agent" in response.json()["error"]
    for bad in ({"limit": 0}, {"limit": 101}, {"samples": "x"}, {"samples": [{"key": "k"}]}):
        response = api(alice["admin"]).post(
            _url(alice["cluster"], "router", "dry-run"), bad, format="json"
        )
        assert response.status_code == 400, (bad, response.content)


# --- the pipelines role's agent API ------------------------------------------------------


def test_assignments_cost_two_queries_however_many_pipelines(
    api, alice, topics, django_assert_max_num_queries
):
    for n in range(5):
        _create(api, alice, name=f"p{n}", state="running")
    agent = AgentApi(alice["agent_key"])
    agent("pipelines/assignments", {"agent_id": "warm"})  # the agent key is cached
    with django_assert_max_num_queries(4):  # bounds set, pipelines, versions, release
        assigned = agent("pipelines/assignments", {"agent_id": "a1"})["pipelines"]
    assert [p["name"] for p in assigned] == [f"p{n}" for n in range(5)]
    assert {p["group"] for p in assigned} == {f"floe-pipeline-p{n}" for n in range(5)}


def test_agents_are_assigned_running_pipelines_with_credentials(api, alice, topics):
    created = _create(api, alice, state="running")
    _create(api, alice, name="idle")
    agent = AgentApi(alice["agent_key"])
    assigned = agent("pipelines/assignments", {"agent_id": "a1"})["pipelines"]
    assert [p["name"] for p in assigned] == ["router"]
    (one,) = assigned
    assert one["id"] == created["id"] and one["state"] == "running" and one["version"] == 1
    assert one["config"] == CONFIG
    assert one["group"] == "floe-pipeline-router"
    assert one["transactional_id_prefix"] == f"floe-pipeline-{created['id']}-"
    credentials = one["credentials"]
    assert credentials["mechanism"] == "SCRAM-SHA-512"
    assert credentials["username"] == "pipeline-router" and len(credentials["password"]) >= 16
    # The password is stored sealed, never as is.
    assert credentials["password"] not in Pipeline.objects.get(name="router").password_sealed
    # It is the SASL user's password (PLAIN's hash is checked the way a login is).
    stored = SaslCredential.objects.get(username="pipeline-router")
    assert plain_verify(credentials["password"], stored.plain_hash)


def test_starting_makes_a_deleted_principal_whole_again(api, alice, topics):
    _create(api, alice)
    client = api(alice["admin"])
    user = SaslCredential.objects.get(username="pipeline-router")
    assert (
        client.delete(
            f"/api/v1/clusters/{alice['cluster'].public_id}/sasl-credentials/{user.public_id}/"
        ).status_code
        == 204
    )
    Acl.objects.filter(principal="User:pipeline-router", operation="write").delete()
    response = client.post(
        _url(alice["cluster"], "router", "state"), {"state": "running"}, format="json"
    )
    assert response.status_code == 200
    remade = SaslCredential.objects.get(username="pipeline-router")
    (assigned,) = AgentApi(alice["agent_key"])("pipelines/assignments", {"agent_id": "a"})[
        "pipelines"
    ]
    assert plain_verify(assigned["credentials"]["password"], remade.plain_hash)
    assert Acl.objects.filter(principal="User:pipeline-router", operation="write").count() == 3


def test_agent_calls_refuse_bad_bodies_and_keys(alice, topics):
    agent = AgentApi(alice["agent_key"])
    for name, body in (
        ("pipelines/assignments", {}),
        ("pipelines/assignments", {"agent_id": ""}),
        ("pipelines/report", {"agent_id": "a", "pipelines": [{"id": "x"}]}),
        ("pipelines/report", {"agent_id": "a", "pipelines": [{"id": "x", "version": 0}]}),
        (
            "pipelines/report",
            {"agent_id": "a", "pipelines": [{"id": "x", "version": 1, "state": "dancing"}]},
        ),
        (
            "pipelines/report",
            {"agent_id": "a", "pipelines": [{"id": "x", "version": 1, "records_in": -1}]},
        ),
    ):
        response = agent.raw(name, body)
        assert response.status_code == 400, (name, body, response.content)
    assert AgentApi("nope").raw("pipelines/assignments", {"agent_id": "a"}).status_code == 401


def test_reports_give_per_agent_status_throughput_lag_and_errors(api, alice, topics):
    _create(api, alice, state="running")
    pipeline = Pipeline.objects.get()
    agent = AgentApi(alice["agent_key"])

    def report(agent_id: str, records_in: int, records_out: int, **more) -> None:
        status = {"id": pipeline.public_id, "version": 1, "records_in": records_in,
                  "records_out": records_out, **more}  # fmt: skip
        assert agent("pipelines/report", {"agent_id": agent_id, "pipelines": [status]}) == {}

    report("a1", 1000, 900, lag=50)
    report("a2", 10, 10, lag=5, errors=[{"at": 1_700_000_000_000, "message": "bad JSON"}])
    # Ten seconds later, a1 has read 5,000 more records.
    row = PipelineReport.objects.get(agent_id="a1")
    PipelineReport.objects.filter(pk=row.pk).update(
        reported_at=row.reported_at - timedelta(seconds=10)
    )
    report("a1", 6000, 5400, lag=20, records_dead_lettered=3, state="running")
    described = api(alice["reader"]).get(_url(alice["cluster"], "router")).json()
    agents = {a["agent_id"]: a for a in described["agents"]}
    assert agents["a1"]["records_in_per_s"] == pytest.approx(500, rel=0.05)
    assert agents["a1"]["records_out_per_s"] == pytest.approx(450, rel=0.05)
    assert agents["a2"]["records_in_per_s"] is None  # one report so far
    assert described["lag"] == 25 and described["records_in"] == 6010
    assert described["records_dead_lettered"] == 3
    assert [e["message"] for e in described["errors"]] == ["bad JSON"]
    assert described["errors"][0]["agent_id"] == "a2"
    assert described["errors"][0]["at"].startswith("2023-11-14")
    listed = api(alice["reader"]).get(_url(alice["cluster"])).json()[0]
    assert listed["records_in_per_s"] == pytest.approx(500, rel=0.05)
    assert (listed["lag"], listed["error_count"], listed["agents"]) == (25, 1, 2)
    # A restarted agent process counts from zero again: no rate until its next report.
    report("a1", 5, 5)
    again = api(alice["reader"]).get(_url(alice["cluster"], "router")).json()
    assert {a["agent_id"]: a for a in again["agents"]}["a1"]["records_in_per_s"] is None
