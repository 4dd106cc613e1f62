"""Shared fixtures: the live server, REST clients authenticated by API key,
organizations, clusters."""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter

import pytest
from rest_framework.test import APIClient

from tenancy.models import Membership
from tests import factories
from tests.faults.probe import FAULT_ROW, Outcome
from tests.openapi_responses import SchemaCheckedClient


class AsgiLiveServer:
    """pytest-django's ``live_server``, serving what the web server serves (`make run`,
    docker-compose): ``controlplane.asgi`` under uvicorn — the agent API on the event loop
    with its commit pipeline, the rest Django's WSGI app in threads (with static files, as
    Django's own live server) — so every test that talks HTTP to the control plane goes
    through the production paths."""

    def __init__(self, host: str = "localhost") -> None:
        import uvicorn
        from django.contrib.staticfiles.handlers import StaticFilesHandler
        from django.core.handlers.wsgi import WSGIHandler
        from django.test.utils import modify_settings

        from controlplane.asgi import web_app
        from controlplane.webserver import KEEP_ALIVE_S

        self.host = host
        self._socket = socket.socket()
        self._socket.bind((host, 0))
        self.port = self._socket.getsockname()[1]
        config = uvicorn.Config(
            web_app(StaticFilesHandler(WSGIHandler())),
            lifespan="on",
            log_level="warning",
            access_log=False,
            timeout_keep_alive=KEEP_ALIVE_S,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )
        self._live_server_modified_settings = modify_settings(ALLOWED_HOSTS={"append": host})
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the live server did not start")
            time.sleep(0.01)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __str__(self) -> str:
        return self.url

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self._socket.close()


def _wait_for_other_sessions_to_end(timeout_s: float = 10.0) -> None:
    """The server closed its connections; PostgreSQL ends their sessions a moment later,
    and the test database cannot be dropped while one is left."""
    from django.db import connection

    with connection.cursor() as cursor:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid()"
            )
            if cursor.fetchone()[0] == 0:
                break
            time.sleep(0.05)
    connection.close()


def _sql_flush_by_delete(truncate):
    """PostgreSQL's `sql_flush` for the tests: DELETE instead of one TRUNCATE.

    Every transactional test (a live server, agents) ends with Django's flush. TRUNCATE
    makes new files for each of the ~55 tables and their indexes: 0.6-3 s a test on
    these machines, against a few milliseconds to delete the few rows a test leaves. As
    TRUNCATE does, it takes every table's ACCESS EXCLUSIVE lock first (a write still in
    flight finishes before, none starts until the commit) and fires no trigger (replica
    role: neither the foreign keys' checks nor billing's immutability). That role is a
    superuser's: for any other user, and for CASCADE or sequence resets, TRUNCATE as
    Django writes it."""

    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if not tables or reset_sequences or allow_cascade or not _is_superuser(self.connection):
            return truncate(
                self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
            )
        names = [self.quote_name(table) for table in tables]
        return [
            f"LOCK TABLE {', '.join(names)} IN ACCESS EXCLUSIVE MODE",
            "SET LOCAL session_replication_role = replica",
            *(f"DELETE FROM {name}" for name in names),
        ]

    return sql_flush


def _is_superuser(connection) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('is_superuser')")
        return cursor.fetchone()[0] == "on"


@pytest.fixture(scope="session", autouse=True)
def _flush_by_delete():
    from django.db.backends.postgresql.operations import DatabaseOperations

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            DatabaseOperations, "sql_flush", _sql_flush_by_delete(DatabaseOperations.sql_flush)
        )
        yield


@pytest.fixture(scope="session")
def live_server(django_db_setup, django_db_blocker):
    """The control plane's web server on a free port, for the whole session (pytest-django's
    own helper grants the tests using it transactional database access). It needs the test
    database first, and stops (closing its connections) before the database is dropped."""
    server = AsgiLiveServer()
    yield server
    server.stop()
    with django_db_blocker.unblock():
        _wait_for_other_sessions_to_end()


@pytest.fixture
def alice(db):
    """Alice's organization with an admin and a read-only service-account key, her own
    owner key, and one cluster."""
    user, org = factories.make_org("alice-co")
    cluster, agent_key = factories.make_cluster("alice-cluster", org=org)
    return {
        "user": user,
        "org": org,
        "cluster": cluster,
        "agent_key": agent_key,
        "admin": factories.make_api_key(org),
        "reader": factories.make_api_key(org, role=Membership.Role.MEMBER),
        "owner": factories.make_api_key(org, role=Membership.Role.OWNER, owner=user),
    }


@pytest.fixture
def bob(db):
    """Another tenant, to prove Alice's things are invisible to him."""
    user, org = factories.make_org("bob-co")
    cluster, agent_key = factories.make_cluster("bob-cluster", org=org)
    return {
        "user": user,
        "org": org,
        "cluster": cluster,
        "agent_key": agent_key,
        "admin": factories.make_api_key(org),
    }


@pytest.fixture
def api():
    """A REST client; ``api(key)`` returns one that sends that API key. Every answer of a
    documented operation is checked against the OpenAPI schema (`tests.openapi_responses`)."""

    def client(key: str | None = None) -> APIClient:
        c = SchemaCheckedClient()
        if key:
            c.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
        return c

    return client


# The fault suite's table (tests/faults): each fault test's report carries its row, here in
# the process that reports the run (the one pytest-xdist's workers send their reports to).
_FAULT_ROWS: list[str] = []


def pytest_runtest_logreport(report) -> None:
    if report.when == "call":
        _FAULT_ROWS.extend(value for name, value in report.user_properties if name == FAULT_ROW)


def pytest_terminal_summary(terminalreporter) -> None:
    if not _FAULT_ROWS:
        return
    terminalreporter.section("fault suite: every acknowledged message read back once?")
    terminalreporter.write_line(Outcome.header())
    for row in _FAULT_ROWS:
        terminalreporter.write_line(row)


# Files whose tests take minutes (each says why in its docstring): handed out first, so
# the two workers do not finish the suite waiting on them one after the other.
LONGEST_FIRST = (
    "tests/ha/",  # three Patroni nodes: failover, switchover, rebuild, restore (issue 39)
    "tests/virtualclusters/security/test_rest_schemathesis_cli.py",
    "tests/faults/test_ripcord.py",  # a 60 s and a 30 s control-plane outage under load
    "tests/faults/test_ripcord_agent_killed.py",  # an agent killed in a 30 s outage (~3 min)
)


def _test_file(item) -> str:
    return item.nodeid.split("::", 1)[0]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items) -> None:
    """pytest-xdist hands tests out by node id: two tests with one id would run as one.

    `--dist loadfile` hands out whole files in the order of this list when its own
    reordering is off (`make test` passes `--no-loadscope-reorder`; by default it sorts
    the files by their number of tests, which put these one-test files last): the
    longest files first, then the others by their number of tests, as pytest-xdist
    would. Each file's tests stay together, in order."""
    twice = sorted(n for n, times in Counter(i.nodeid for i in items).items() if times > 1)
    if twice:
        raise pytest.UsageError(f"tests sharing a node id (one would not run): {twice[:3]}")
    tests = Counter(_test_file(item) for item in items)
    first_seen = {name: n for n, name in enumerate(dict.fromkeys(map(_test_file, items)))}

    def order(item) -> tuple[int, int, int]:
        name = _test_file(item)
        rank = next(
            (rank for rank, prefix in enumerate(LONGEST_FIRST) if name.startswith(prefix)),
            len(LONGEST_FIRST),
        )
        return rank, -tests[name], first_seen[name]

    items.sort(key=order)
