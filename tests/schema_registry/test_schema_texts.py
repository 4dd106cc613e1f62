"""Schema texts reach the console and the REST API over the browse channel, from an
agent's long-poll, as records do: the request names fingerprints, the answer must carry
the documents of exactly those, and anything else is refused (a 502 that says why).

The agents here speak the channel over HTTP to the live web server, answering what each
test needs (as in tests/virtualclusters/test_browse_channel.py);
tests/controlplane/browser/test_schemas_page.py has a real agent process."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from tests.factories import make_api_key, make_cluster, make_org
from tests.schema_registry.test_rest_api import fp, register
from tests.virtualclusters.test_browse_channel import ChannelAgent, short_waits  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

V1 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "note", "type": "string", "default": ""}]}
TEXTS = {fp("v1"): json.dumps(V1), fp("v2"): json.dumps(V2)}


def _texts(request: dict, **documents) -> dict:
    texts = {f: {"schema": TEXTS[f], "schemaType": "AVRO"} for f in request["fingerprints"]}
    texts.update(documents)
    return {"id": request["id"], "agent_id": "agt-test", "page": {"texts": texts}}


@pytest.fixture
def registry():
    user, org = make_org("Texts")
    cluster, key = make_cluster("texts", org=org)
    register(cluster, "orders-value", "v1")
    register(cluster, "orders-value", "v2")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key(org)}")
    api.cluster, api.key, api.user = cluster, key, user
    api.url = f"/api/v1/clusters/{cluster.public_id}/schemas/subjects/orders-value/versions/2/"
    return api


def test_a_versions_text_comes_from_the_agents_long_poll(live_server, registry, short_waits):  # noqa: F811
    agent = ChannelAgent(live_server.url, registry.key, _texts).start(registry.cluster.public_id)
    response = registry.get(registry.url)
    agent.join()
    assert response.status_code == 200, response.content
    body = response.json()
    assert json.loads(body["schema"]) == V2
    assert (body["version"], body["id"], body["agent"]) == (2, 2, "agt-test")
    assert agent.requests[0]["kind"] == "schema_texts"
    assert agent.requests[0]["fingerprints"] == [fp("v2")]
    assert agent.answered == [(200, {"ok": True})]


def test_the_console_shows_the_diff_of_two_versions(live_server, registry, short_waits, client):  # noqa: F811
    agent = ChannelAgent(live_server.url, registry.key, _texts).start(registry.cluster.public_id)
    client.force_login(registry.user)
    page = client.get(f"/clusters/{registry.cluster.public_id}/schemas/orders-value/",
                      {"version": "2", "compare": "1"})  # fmt: skip
    agent.join()
    assert page.status_code == 200
    html = page.content.decode()
    assert '<span class="diff-add">+      &quot;name&quot;: &quot;note&quot;,</span>' in html
    assert "agt-test" in html
    assert sorted(agent.requests[0]["fingerprints"]) == sorted([fp("v1"), fp("v2")])


@pytest.mark.parametrize(
    "answer, refused",
    [
        (lambda r: _texts(r, **{fp("other"): {"schema": "{}"}}), "other fingerprints"),
        (lambda r: _texts(r, **{fp("v2"): {"schema": 7}}), "Expected `str`"),
        (lambda r: _texts(r, **{fp("v2"): {"schema": "{}", "schemaType": "XML"}}), "schemaType"),
    ],
)
def test_an_answer_that_is_not_the_texts_asked_is_refused_with_a_502(
    live_server,
    registry,
    short_waits,  # noqa: F811
    answer,
    refused,
):
    agent = ChannelAgent(live_server.url, registry.key, answer).start(registry.cluster.public_id)
    response = registry.get(registry.url)
    agent.join()
    assert response.status_code == 502, response.content
    assert refused in response.json()["error"]
    assert agent.answered[0][0] == 400


def test_an_agent_that_cannot_read_the_text_says_why(live_server, registry, short_waits):  # noqa: F811
    def missing(request: dict) -> dict:
        return {"id": request["id"], "agent_id": "agt-test",
                "error": "RestError: schema text is missing from the bucket"}  # fmt: skip

    agent = ChannelAgent(live_server.url, registry.key, missing).start(registry.cluster.public_id)
    response = registry.get(registry.url)
    agent.join()
    assert response.status_code == 502
    assert "could not read the schema texts: RestError" in response.json()["error"]


def test_an_answer_to_a_schema_request_is_not_taken_as_records(live_server, registry, short_waits):  # noqa: F811
    def records(request: dict) -> dict:
        page = {"topic": "t", "partition": 0, "log_start_offset": 0, "high_watermark": 0,
                "records": []}  # fmt: skip
        return {"id": request["id"], "agent_id": "agt-test", "page": page}

    agent = ChannelAgent(live_server.url, registry.key, records).start(registry.cluster.public_id)
    response = registry.get(registry.url)
    agent.join()
    assert response.status_code == 502
    assert "$.texts" in response.json()["error"] or "texts" in response.json()["error"]
