"""The agent API never waits on the database without limit: a commit whose partition is
locked by someone else ends in bounded time with a 503 (retriable, nothing written), and
goes through once the lock is gone."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from metadata_store.models import Partition, SegmentFile
from tests.metadata_store.conftest import batch

pytestmark = pytest.mark.django_db(transaction=True)


def _other_connection() -> psycopg.Connection:
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    return psycopg.connect(**params)


def test_a_commit_held_by_a_row_lock_answers_503_in_bounded_time(agent_api, alice):
    tid = agent_api.create_topic("locked")
    key = f"{alice['cluster'].public_id}/segments/held.seg"
    body = {"file_key": key, "size": 100, "batches": [batch(tid, 0, 5)]}
    partition = Partition.objects.get(topic_id=tid, index=0)
    release = threading.Event()
    locked = threading.Event()

    def hold_the_lock() -> None:
        # What a stuck job or a long manual transaction does: the partition row locked
        # for 35 s (released early once the test has seen the answer).
        with _other_connection() as other, other.transaction():
            other.execute("SELECT 1 FROM floe_partition WHERE id = %s FOR UPDATE", [partition.id])
            locked.set()
            release.wait(35)

    holder = threading.Thread(target=hold_the_lock)
    holder.start()
    try:
        assert locked.wait(10)
        started = time.monotonic()
        response = agent_api.raw("commit", body)
        took = time.monotonic() - started
    finally:
        release.set()
        holder.join(10)
    assert response.status_code == 503, response.content
    assert "timeout" in response.json()["error"]
    assert took < settings.FLOE_AGENT_API_STATEMENT_TIMEOUT_MS / 1000 + 1
    assert not SegmentFile.objects.filter(key=key).exists()
    # The agent's retry with the same file key goes through once the lock is gone.
    answer = agent_api("commit", body)
    assert answer["batches"][0]["base_offset"] == 0


def test_the_database_bounds_are_set_on_the_agent_api_connection(agent_api):
    agent_api.create_topic("bounded")
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        statement = cursor.fetchone()[0]
        cursor.execute("SHOW lock_timeout")
        lock = cursor.fetchone()[0]
    assert statement == f"{settings.FLOE_AGENT_API_STATEMENT_TIMEOUT_MS // 1000}s"
    assert lock == f"{settings.FLOE_AGENT_API_LOCK_TIMEOUT_MS // 1000}s"


def test_the_control_planes_sessions_do_not_jit_compile(agent_api):
    # A fetch plan over 100 partitions took 16 ms instead of 4 with JIT on (12 ms compiling).
    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        assert cursor.fetchone()[0] == "off"
