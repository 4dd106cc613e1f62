"""What the message browser says of a framed value it cannot decode because of its
schema's text — unparsable, or unreadable by the agent — and the page still shows the
records (in hex). The agents here speak the browse channel over HTTP to the live web
server (as in tests/schema_registry/test_schema_texts.py);
tests/controlplane/browser/test_schema_decoding.py decodes values a real agent stored."""

from __future__ import annotations

import base64

import pytest

from tests.factories import make_api_key, make_cluster, make_org
from tests.metadata_store.conftest import AgentApi
from tests.openapi_responses import SchemaCheckedClient
from tests.schema_registry.test_rest_api import fp, register
from tests.virtualclusters.test_browse_channel import ChannelAgent, short_waits  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

FRAMED = base64.b64encode(b"\x00\x00\x00\x00\x01\x0e").decode()  # schema id 1, long 7


def _agent(texts):
    """An answer function: the records page (one framed value), or `texts(request)`."""

    def answer(request: dict) -> dict:
        if request.get("kind") == "schema_texts":
            return {"id": request["id"], "agent_id": "agt-test", **texts(request)}
        page = {"topic": request["topic"], "partition": 0, "log_start_offset": 0,
                "high_watermark": 1, "records": [{"offset": 0, "timestamp": 1_700_000_000_000,
                "key": None, "value": FRAMED, "headers": []}]}  # fmt: skip
        return {"id": request["id"], "agent_id": "agt-test", "page": page}

    return answer


@pytest.fixture
def browsed():
    user, org = make_org("Decoding")
    cluster, key = make_cluster("decoding", org=org)
    AgentApi(key).create_topic("orders")
    register(cluster, "orders-value", "v1")
    api = SchemaCheckedClient()  # answers are checked against the OpenAPI schema
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key(org)}")
    api.cluster, api.key = cluster, key
    api.url = f"/api/v1/clusters/{cluster.public_id}/topics/orders/records/"
    return api


def _read(live_server, browsed, texts) -> dict:
    answer = _agent(texts)
    agents = [ChannelAgent(live_server.url, browsed.key, answer) for _ in range(2)]
    for agent in agents:
        agent.start(browsed.cluster.public_id)
    response = browsed.get(browsed.url, {"offset": 0})
    for agent in agents:
        agent.join()
    assert response.status_code == 200, response.content
    assert sorted(r.get("kind", "records") for a in agents for r in a.requests) == [
        "records", "schema_texts"]  # fmt: skip
    return response.json()["records"][0]


def test_a_schema_text_that_does_not_parse_says_so_and_the_value_stays_bytes(
    live_server,
    browsed,
    short_waits,  # noqa: F811
):
    def texts(request):
        return {"page": {"texts": {fp("v1"): {"schema": '{"type": "nope"}'}}}}

    record = _read(live_server, browsed, texts)
    assert record["value"] == FRAMED
    decoded = record["value_decoded"]
    assert (decoded["schema_id"], decoded["subject"], decoded["version"]) == (1, "orders-value", 1)
    assert decoded["json"] is None
    assert decoded["error"].startswith("schema parse error: Invalid schema")
    assert record["key_decoded"] is None


def test_a_schema_text_the_agent_cannot_read_says_why(live_server, browsed, short_waits):  # noqa: F811
    def texts(request):
        return {"error": "RestError: schema text is missing from the bucket"}

    decoded = _read(live_server, browsed, texts)["value_decoded"]
    assert decoded["error"].startswith("schema text unreadable: The agent could not read")
    assert "missing from the bucket" in decoded["error"]


def test_a_readable_text_decodes_the_value(live_server, browsed, short_waits):  # noqa: F811
    def texts(request):
        return {"page": {"texts": {fp("v1"): {"schema": '"long"', "schemaType": "AVRO"}}}}

    decoded = _read(live_server, browsed, texts)["value_decoded"]
    assert (decoded["json"], decoded["schema_type"], decoded["error"]) == (7, "AVRO", None)
