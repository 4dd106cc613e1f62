"""Invariant 4: an agent key of cluster A can never see or change cluster B."""

from __future__ import annotations

import pytest

from metadata_store.models import Partition
from tests.metadata_store.conftest import batch

pytestmark = pytest.mark.django_db


@pytest.fixture
def bobs_topic(bob_agent_api, bob):
    tid = bob_agent_api.create_topic("secrets", 1)
    bob_agent_api(
        "commit",
        {
            "file_key": f"{bob['cluster'].public_id}/s/1.seg",
            "size": 10_000,
            "batches": [batch(tid, 0, 5)],
        },
    )
    bob_agent_api(
        "offsets/commit",
        {"group_id": "g", "offsets": [{"topic": "secrets", "partition": 0, "offset": 3}]},
    )
    return tid


def test_alices_agent_cannot_commit_to_bobs_partitions(agent_api, alice, bobs_topic):
    answer = agent_api(
        "commit",
        {
            "file_key": f"{alice['cluster'].public_id}/s/x.seg",
            "size": 10_000,
            "batches": [batch(bobs_topic, 0, 9)],
        },
    )
    assert answer["batches"][0]["error_code"] == 3
    assert Partition.objects.get(topic_id=bobs_topic).high_watermark == 5


def test_alices_agent_cannot_read_bobs_data_or_metadata(agent_api, bobs_topic):
    plan = agent_api(
        "fetch-plan",
        {
            "partitions": [
                {"topic_id": bobs_topic, "partition": 0, "offset": 0, "max_bytes": 1000}
            ],
            "max_bytes": 1000,
        },
    )
    assert plan["partitions"][0]["error_code"] == 3 and plan["partitions"][0]["batches"] == []
    offsets = agent_api(
        "list-offsets", {"partitions": [{"topic_id": bobs_topic, "partition": 0, "timestamp": -1}]}
    )
    assert offsets["partitions"][0]["error_code"] == 3
    assert agent_api("topics/list", {"names": None})["topics"] == []
    assert (
        agent_api("topics/describe-configs", {"names": ["secrets"]})["topics"][0]["error_code"] == 3
    )
    assert agent_api("offsets/fetch", {"group_id": "g", "partitions": None})["offsets"] == []


def test_alices_agent_cannot_change_bobs_topics(agent_api, bobs_topic):
    assert agent_api("topics/delete", {"topic_ids": [bobs_topic]})["topics"][0]["error_code"] == 100
    assert agent_api("topics/delete", {"names": ["secrets"]})["topics"][0]["error_code"] == 3
    assert (
        agent_api(
            "delete-records",
            {"partitions": [{"topic_id": bobs_topic, "partition": 0, "offset": 5}]},
        )["partitions"][0]["error_code"]
        == 3
    )
    assert Partition.objects.get(topic_id=bobs_topic).log_start_offset == 0


@pytest.mark.parametrize("header", [None, "Bearer floe_agent_nope", "Bearer floe_api_x"])
def test_bad_agent_keys_get_401(client, header):
    extra = {"HTTP_AUTHORIZATION": header} if header else {}
    response = client.post(
        "/agent/v1/topics/list", data="{}", content_type="application/json", **extra
    )
    assert response.status_code == 401 and response.json()["error"]


def test_a_revoked_agent_key_stops_working(agent_api, alice):
    from metadata_store.agent_api import endpoint as module
    from virtualclusters.services import agent_key_revoke

    agent_key_revoke(key=alice["cluster"].agent_keys.get())
    module._key_cache.clear()
    assert agent_api.raw("topics/list", {"names": None}).status_code == 401
