"""The web process's /healthz: healthy only while the metadata store takes
writes, and it says the database's role and replication. The role "replica" and the lag of
real replicas are seen in the fault suite's HA cases (tests/faults/test_ha.py)."""

from __future__ import annotations

import contextlib

import pytest
from django.db import connection

from tests.serving import free_port


@contextlib.contextmanager
def unreachable_database():
    """The default connection pointed at a port where nothing listens, then put back."""
    saved = dict(connection.settings_dict)
    connection.close()
    connection.settings_dict["HOST"] = "127.0.0.1"
    connection.settings_dict["PORT"] = str(free_port())
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict.update(saved)


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
    with unreachable_database():
        response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["database"]["writable"] is False
    assert "connect" in body["database"]["error"].lower()
    # The next request, with the database back, is healthy again: nothing was kept broken.
    assert client.get("/healthz").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_rest_api_answers_503_with_retry_after_while_the_database_cannot_be_reached(api):
    # The key lookup is the first database read: it fails, and the answer says why.
    with unreachable_database():
        response = api("floe_api_not_a_real_key_but_shaped_like_one").get("/api/v1/clusters/")
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert "metadata store cannot be reached" in response.json()["error"]


@pytest.mark.django_db(transaction=True)
def test_console_shows_a_503_page_while_the_database_cannot_be_reached():
    from django.test import Client

    browser = Client(raise_request_exception=False)
    browser.cookies["sessionid"] = "a" * 32  # a session to load: from the database
    with unreachable_database():
        response = browser.get("/")
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    page = response.content.decode()
    assert "Temporarily unavailable" in page and "nothing was changed" in page
