"""An agent keeps the browse channel open by itself: when its connections to the control
plane are torn (a restart, a network blip) it polls again within seconds, and the
console browses through it as before, with one poll per agent."""

from __future__ import annotations

import json
import time

import pytest

from tests.agents.faults import TcpProxy
from tests.factories import make_api_key, make_cluster, make_org
from tests.openapi_responses import SchemaCheckedClient
from virtualclusters.browsing import channel


@pytest.mark.kafka
@pytest.mark.django_db(transaction=True)
def test_the_agent_polls_again_after_the_control_plane_comes_back(agent, live_server, settings):
    from confluent_kafka import Producer

    # Short polls: a poll whose connection the proxy cut without telling the server ends
    # (its answer goes nowhere) within 3 s, as a half-open connection would in 25.
    settings.FLOE_BROWSE_POLL_S = 3
    _, org = make_org("Blips")
    cluster, key = make_cluster("blips", org=org, auto_create_topics=True)
    api = SchemaCheckedClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key(org)}")
    url = f"/api/v1/clusters/{cluster.public_id}/topics/seen/records/"
    proxy = TcpProxy(live_server.port)
    try:
        running = agent(key, control_plane_url=proxy.url)
        producer = Producer({"bootstrap.servers": running.bootstrap, "linger.ms": 5})
        producer.produce("seen", key=b"k", value=b"v")
        assert producer.flush(30) == 0
        assert api.get(url).status_code == 200

        proxy.cut()  # every connection reset, new ones refused: the control plane is away
        time.sleep(4)
        assert api.get(url).status_code in (409, 504)  # nobody to answer, said quickly
        proxy.restore()
        back = time.monotonic()
        while (page := api.get(url)).status_code != 200:
            assert page.status_code in (409, 504), page.content
            assert time.monotonic() - back < 15, "the agent did not poll again"
            time.sleep(0.2)
        took = time.monotonic() - back
        assert [r["offset"] for r in page.json()["records"]] == [0]
        assert channel.agents_connected(cluster.public_id) == 1
        print(f"browsing again {took:.1f}s after the control plane came back")
    finally:
        proxy.close()


def test_a_page_too_large_for_the_control_plane_loses_its_last_records():
    from agents.browse_channel import page_within

    records = [{"offset": n, "timestamp": 0, "key": None, "value": "QUFB" * 250} for n in range(10)]
    page = {"topic": "t", "partition": 0, "records": records}
    fitted = page_within(page, max_bytes=5000)
    assert [r["offset"] for r in fitted["records"]] == [0, 1, 2, 3]
    assert len(json.dumps(fitted, separators=(",", ":"))) <= 5000


def test_a_request_names_what_to_read_and_an_unknown_kind_is_answered_with_an_error():
    import asyncio

    from agents.browse_channel import BrowseChannel

    async def browse(**asked):
        raise AssertionError(f"records were read for {asked}")

    async def document(fingerprint: str) -> dict:
        if fingerprint == "gone":
            raise LookupError("schema text gone is missing from the bucket")
        return {"schema": f"text of {fingerprint}", "schemaType": "AVRO", "references": []}

    reading = BrowseChannel(None, agent_id="agt-x", browse=browse, schema_document=document)  # type: ignore[arg-type]
    without = BrowseChannel(None, agent_id="agt-x", browse=browse)  # type: ignore[arg-type]

    def read(channel: BrowseChannel, request: dict) -> dict:
        return asyncio.run(channel._read(request))

    texts = read(reading, {"kind": "schema_texts", "fingerprints": ["a", "b"]})
    assert texts == {"page": {"texts": {
        "a": {"schema": "text of a", "schemaType": "AVRO", "references": []},
        "b": {"schema": "text of b", "schemaType": "AVRO", "references": []},
    }}}  # fmt: skip
    missing = read(reading, {"kind": "schema_texts", "fingerprints": ["a", "gone"]})
    assert missing == {"error": "LookupError: schema text gone is missing from the bucket"}
    assert "fingerprints must be a list" in read(reading, {"kind": "schema_texts"})["error"]
    assert read(without, {"kind": "schema_texts", "fingerprints": ["a"]}) == {
        "error": "this agent reads no schema texts"
    }
    assert read(reading, {"kind": "offsets"}) == {"error": "this agent reads no 'offsets'"}
