"""Fixtures for the agent metadata API: an agent-key client for a cluster."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test import Client


class AgentApi:
    """Calls ``/agent/v1/<name>`` with an agent key, as agents do."""

    def __init__(self, key: str):
        self.client = Client()
        self.key = key

    def raw(self, name: str, body):
        return self.client.post(
            f"/agent/v1/{name}",
            data=body if isinstance(body, (str, bytes)) else json.dumps(body),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {self.key}",
        )

    def __call__(self, name: str, body: dict) -> dict:
        response = self.raw(name, body)
        assert response.status_code == 200, response.content
        return response.json()

    def create_topic(self, name: str, partitions: int = 1, **configs) -> str:
        answer = self(
            "topics/create",
            {"topics": [{"name": name, "num_partitions": partitions, "configs": configs}]},
        )
        assert answer["topics"][0]["error_code"] == 0, answer
        return answer["topics"][0]["topic_id"]


@pytest.fixture
def inject_trigger():
    """``inject_trigger(table, body)`` installs a BEFORE INSERT trigger running the PL/pgSQL
    ``body`` on ``table``; ``inject_trigger.drop()`` removes it early, and it is dropped after
    the test whether the test passed or not (a transactional test's DDL is not rolled back,
    and a leftover trigger fails later tests)."""
    installed: list[str] = []

    def drop() -> None:
        with connection.cursor() as cursor:
            for name in installed:
                cursor.execute(f"DROP FUNCTION IF EXISTS {name}() CASCADE")

    def install(table: str, body: str) -> None:
        name = f"test_inject_{len(installed)}"
        with connection.cursor() as cursor:
            cursor.execute(
                f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN {body} END $$"
            )
            cursor.execute(
                f"CREATE TRIGGER {name} BEFORE INSERT ON {table}"
                f" FOR EACH ROW EXECUTE FUNCTION {name}()"
            )
        installed.append(name)

    install.drop = drop
    yield install
    drop()


@pytest.fixture
def agent_api(alice):
    return AgentApi(alice["agent_key"])


@pytest.fixture
def bob_agent_api(bob):
    return AgentApi(bob["agent_key"])


def batch(
    topic_id: str, partition: int, records: int = 1, *, pos: int = 0, length: int = 100, **extra
) -> dict:
    """A commit entry for one batch."""
    return {
        "topic_id": topic_id,
        "partition": partition,
        "pos": pos,
        "len": length,
        "records": records,
        "base_ts": 1_700_000_000_000,
        "max_ts": extra.pop("max_ts", 1_700_000_000_000),
        "producer_id": -1,
        "producer_epoch": -1,
        "base_sequence": -1,
        **extra,
    }
