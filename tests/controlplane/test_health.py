"""The web process's /healthz (issue 39): healthy only while the metadata store takes
writes, and it says the database's role and replication. The role "replica" and the lag of
real replicas are seen in the fault suite's HA cases (tests/faults/test_ha.py)."""

from __future__ import annotations

import pytest
from django.db import connection

from tests.faults.world import free_port


@pytest.mark.django_db
def test_healthz_says_ok_on_a_primary_it_can_write_to(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    database = body["database"]
    assert database["role"] == "primary" and database["writable"] is True
    assert database["replicas"] == []  # this test's PostgreSQL streams to nobody
    assert "error" not in database


@pytest.mark.django_db(transaction=True)
def test_healthz_says_unavailable_while_the_database_cannot_be_reached(client):
    saved = dict(connection.settings_dict)
    connection.close()
    connection.settings_dict["HOST"] = "127.0.0.1"
    connection.settings_dict["PORT"] = str(free_port())  # nothing listens there
    try:
        response = client.get("/healthz")
    finally:
        connection.close()
        connection.settings_dict.update(saved)
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["database"]["writable"] is False
    assert "connect" in body["database"]["error"].lower()
    # The next request, with the database back, is healthy again: nothing was kept broken.
    assert client.get("/healthz").status_code == 200
