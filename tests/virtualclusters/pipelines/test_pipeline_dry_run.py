"""A pipeline's dry run over the newest records of its input topics, read by a live agent
over the browse channel (kind ``pipeline_dry_run``) and run through the engine there;
the control plane's check of the agent's answer; what a dry run never does (write)."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer
from rest_framework.test import APIClient

from metadata_store.agent_api.schemas import BadBody
from metadata_store.models import Partition
from tests.agents.conftest import agent, bucket_url  # noqa: F401 - fixtures
from tests.factories import make_api_key, make_cluster, make_org
from tests.metadata_store.conftest import AgentApi
from virtualclusters.pipelines.dry_run import dry_run_check

pytestmark = [pytest.mark.kafka, pytest.mark.django_db(transaction=True)]

CONFIG = """\
input:
  kafka:
    topics: [orders]
processors:
  - parse_json: {}
  - filter: 'value.amount > 0'
  - remove: [secret]
outputs:
  default: {kafka: {topic: orders-clean}}
"""


def test_a_dry_run_reads_the_newest_records_through_a_live_agent(
    live_server,
    agent,  # noqa: F811
):
    _, org = make_org("Dry runs")
    cluster, key = make_cluster("dry", org=org)
    admin = AgentApi(key)
    admin.create_topic("orders", partitions=2)
    admin.create_topic("orders-clean")
    running = agent(key)
    producer = Producer({"bootstrap.servers": running.bootstrap, "linger.ms": 5})
    for n in range(6):  # three per partition, in time order
        value = {"amount": n, "secret": "s3cret"} if n != 4 else "not json"
        producer.produce("orders", json.dumps(value).encode()[: 99 if n != 4 else 8],
                         partition=n % 2, timestamp=1_700_000_000_000 + n)  # fmt: skip
    assert producer.flush(30) == 0
    del producer

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key(org)}")
    url = f"/api/v1/clusters/{cluster.public_id}/pipelines/"
    response = client.post(url, {"name": "clean", "config": CONFIG}, format="json")
    assert response.status_code == 201, response.content
    response = client.post(url + "clean/dry-run", {"limit": 3}, format="json")
    assert response.status_code == 200, response.content
    result = response.json()
    assert result["ok"] is True and result["agent"] == running.agent_id
    # The newest three of both partitions, oldest first: records 3, 4, 5.
    sources = [(r["source"]["partition"], r["source"]["offset"]) for r in result["records"]]
    assert sources == [(1, 1), (0, 2), (1, 2)]
    three, four, five = result["records"]
    assert [json.loads(o["value"]) for o in three["outputs"]] == [{"amount": 3}]  # no secret
    assert four["error"]["processor"] == 0 and four["outputs"] == []
    assert json.loads(five["outputs"][0]["value"]) == {"amount": 5}
    # Another configuration is tried without being saved; a filter that drops them all.
    response = client.post(
        url + "clean/dry-run",
        {"config": CONFIG.replace("> 0", "> 100"), "limit": 2},
        format="json",
    )
    tried = response.json()["records"]  # records 4 (not JSON) and 5 (filtered out now)
    assert [(r["filtered"], r["error"] is not None) for r in tried] == [
        (False, True),
        (True, False),
    ]
    assert client.get(url + "clean/").json()["version"] == 1
    # Nothing was written: the output topic is as empty as it was.
    clean = Partition.objects.get(topic__cluster=cluster, topic__name="orders-clean")
    assert clean.high_watermark == 0


def test_the_control_plane_refuses_an_answer_that_is_not_what_was_asked():
    owner = {"kind": "pipeline_dry_run", "topics": ["orders"], "limit": 1}
    record = {"source": {"topic": "orders", "partition": 0, "offset": 1}, "outputs": []}
    fine = {"ok": True, "problems": [], "records": [record]}
    assert dry_run_check(json.dumps(fine).encode(), owner)["records"][0]["filtered"] is False
    for wrong, why in (
        ({**fine, "records": [record, record]}, "more records than asked"),
        ({**fine, "records": [{**record, "source": {"topic": "secrets"}}]}, "not asked for"),
        ({"ok": "yes"}, "dry run"),
        ({**fine, "records": [{**record, "outputs": "x"}]}, "dry run"),
    ):
        with pytest.raises(BadBody, match=why):
            dry_run_check(json.dumps(wrong).encode(), owner)
    with pytest.raises(BadBody, match="larger than"):
        dry_run_check(b" " * (8 * 1024 * 1024 + 1), owner)
