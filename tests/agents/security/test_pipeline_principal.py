"""A pipeline on a cluster that asks for SASL and enforces ACLs: the runner logs in as the
pipeline's own principal (its SCRAM user, with ACLs for exactly its topics, group and
transactional ids) and moves the records; records POSTed to an agent's HTTP port need
one of the cluster's SASL users (basic auth)."""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Producer

from tests.agents.clients import Endpoint, create_topic
from tests.agents.security.conftest import ADMIN_PASSWORD, ADMIN_USER
from tests.agents.test_pipelines import _wait, read_committed
from tests.factories import make_api_key

pytestmark = [pytest.mark.kafka, pytest.mark.django_db(transaction=True)]


def _create(cluster, name: str, config: str) -> None:
    from rest_framework.test import APIClient

    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {make_api_key(cluster.cluster.organization)}")
    answer = api.post(
        f"/api/v1/clusters/{cluster.cluster.public_id}/pipelines/",
        {"name": name, "config": config, "state": "running"},
        format="json",
    )
    assert answer.status_code == 201, answer.content


def test_the_runner_logs_in_as_the_pipelines_principal_under_acls(agent, acl_cluster):
    a = agent(acl_cluster.key, extra=["--require-sasl"])
    admin = Endpoint(a.bootstrap, ADMIN_USER, ADMIN_PASSWORD)
    for topic in ("raw", "clean"):
        create_topic(admin, topic, 1)
    producer = Producer(admin.confluent())
    for i in range(50):
        producer.produce("raw", json.dumps({"i": i, "pin": "1234"}).encode())
    assert producer.flush(20) == 0
    _create(
        acl_cluster,
        "cleaner",
        """
input: {kafka: {topics: [raw]}}
processors: [{parse_json: {}}, {remove: [pin]}]
outputs: {default: {kafka: {topic: clean}}}
""",
    )
    got = read_committed(admin.confluent(), {"clean": 1}, 50, 40)["clean"]
    assert sorted(json.loads(m.value())["i"] for m in got) == list(range(50))
    assert all("pin" not in json.loads(m.value()) for m in got)


def test_records_posted_to_an_agent_need_a_sasl_user(agent, acl_cluster):
    a = agent(acl_cluster.key, extra=["--require-sasl"])
    admin = Endpoint(a.bootstrap, ADMIN_USER, ADMIN_PASSWORD)
    create_topic(admin, "intake", 1)
    _create(
        acl_cluster,
        "intake",
        "input: {http: {}}\noutputs: {default: {kafka: {topic: intake}}}\n",
    )
    url = f"{a.http_url}/pipelines/v1/intake/records"

    def post(login: str | None) -> int:
        request = urllib.request.Request(url, data=b'[{"n": 1}]', method="POST")
        if login:
            request.add_header(
                "Authorization", "Basic " + base64.b64encode(login.encode()).decode()
            )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code

    assert post(None) == 401
    assert post(f"{ADMIN_USER}:wrong") == 401
    _wait(lambda: post(f"{ADMIN_USER}:{ADMIN_PASSWORD}") == 200, 20, "the agent to take it")
    time.sleep(0.5)
    got = read_committed(admin.confluent(), {"intake": 1}, 1, 10)
    assert [json.loads(m.value()) for m in got["intake"]] == [{"n": 1}]
