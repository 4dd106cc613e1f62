"""DATABASE_URL → Django's DATABASES entry: one host, a socket folder, and several hosts as
libpq takes them (issue 39), each connection bounded in time."""

from __future__ import annotations

import psycopg
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from controlplane.env import database_from_url
from tests.serving import free_port


def test_one_host_keeps_its_port_and_gets_the_connect_bounds():
    entry = database_from_url("postgres://floe:s%40cret@db.internal:6432/meta?sslmode=require")
    assert (entry["HOST"], entry["PORT"], entry["NAME"]) == ("db.internal", "6432", "meta")
    assert (entry["USER"], entry["PASSWORD"]) == ("floe", "s@cret")
    assert entry["OPTIONS"]["sslmode"] == "require"
    assert entry["OPTIONS"]["connect_timeout"] == "3"
    assert entry["OPTIONS"]["keepalives_idle"] == "5"


def test_a_url_names_its_own_connect_timeout():
    entry = database_from_url("postgres://u@h/db?connect_timeout=10")
    assert entry["OPTIONS"]["connect_timeout"] == "10"
    assert entry["PORT"] == ""


def test_several_hosts_become_libpq_lists_paired_by_position():
    entry = database_from_url(
        "postgresql://u@pg1:5432,pg2:5433,[fd00::3]:5434/floe?target_session_attrs=read-write"
    )
    assert entry["HOST"] == "pg1,pg2,fd00::3"
    assert entry["PORT"] == "5432,5433,5434"
    assert entry["OPTIONS"]["target_session_attrs"] == "read-write"


def test_a_host_without_its_port_gets_the_default_one_beside_hosts_with_theirs():
    entry = database_from_url("postgres://u@pg1,pg2:6000,pg3/floe")
    assert (entry["HOST"], entry["PORT"]) == ("pg1,pg2,pg3", "5432,6000,5432")
    # Several hosts and no target_session_attrs: the primary is wanted, not any node.
    assert entry["OPTIONS"]["target_session_attrs"] == "read-write"
    assert "target_session_attrs" not in database_from_url("postgres://u@pg1/floe")["OPTIONS"]


def test_a_socket_folder_wins_over_the_network_location():
    entry = database_from_url("postgresql://postgres:@/postgres?host=/tmp/pg")
    assert (entry["HOST"], entry["PORT"]) == ("/tmp/pg", "")


@pytest.mark.parametrize(
    "url",
    [
        "mysql://u@h/db",
        "postgres://u@h:99999/db",
        "postgres://u@h:abc/db",
        "postgres://u@pg1,,pg2/db",
        "postgres://u@[::1/db",
    ],
)
def test_a_malformed_url_is_refused_with_the_variable_named(url):
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL"):
        database_from_url(url)


@pytest.mark.django_db
def test_libpq_skips_a_host_that_is_down_and_a_host_that_cannot_write():
    """A real connection: the first host refuses (nothing listens), the second is this
    test's PostgreSQL, named twice — as a standby would be, it is skipped when the
    session must be read-write and is not (``target_session_attrs=standby`` stands in for
    "is not the primary" on a single server), then taken when read-write is wanted."""
    params = connection.get_connection_params()
    host, port = params.get("host") or "127.0.0.1", params.get("port") or 5432
    dead = free_port()
    url = f"postgres://{params['user']}@127.0.0.1:{dead},{host}:{port}/{params['dbname']}"
    entry = database_from_url(url + "?target_session_attrs=read-write")
    conninfo = psycopg.conninfo.make_conninfo(
        "",
        host=entry["HOST"],
        port=entry["PORT"],
        dbname=entry["NAME"],
        user=entry["USER"],
        password=params.get("password", ""),
        **entry["OPTIONS"],
    )
    with psycopg.connect(conninfo) as conn:
        assert conn.info.port == int(port)
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (False,)
    standby_only = conninfo.replace("read-write", "standby")
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(standby_only).close()
