"""Consumer groups in the control plane: agent-API clients for the metadata store and a
topic with committed batches."""

import time

import pytest

from tests.metadata_store.conftest import AgentApi, batch


@pytest.fixture
def agent_api(alice):
    return AgentApi(alice["agent_key"])


@pytest.fixture
def bob_agent_api(bob):
    return AgentApi(bob["agent_key"])


@pytest.fixture
def orders(agent_api, alice):
    """Topic `orders`, 2 partitions; partition 0 has 20 records in two batches written
    60 s and 30 s ago, partition 1 has 5."""
    tid = agent_api.create_topic("orders", 2)
    now_ms = int(time.time() * 1000)
    agent_api(
        "commit",
        {
            "file_key": f"{alice['cluster'].public_id}/seg/1",
            "size": 300,
            "batches": [
                batch(tid, 0, 10, max_ts=now_ms - 60_000),
                batch(tid, 0, 10, pos=100, max_ts=now_ms - 30_000),
                batch(tid, 1, 5, pos=200, max_ts=now_ms - 10_000),
            ],
        },
    )
    return tid
