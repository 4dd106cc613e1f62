"""The replicated metadata PostgreSQL keeps itself whole: a replica that lost its disk is
rebuilt from the bucket (the latest base backup plus the archived WAL) by Patroni alone,
and streams again; a planned switchover moves the primary and the multi-host DSN follows.
Real etcd, Patroni, PostgreSQL 15 and barman-cloud against moto's S3 server."""

from __future__ import annotations

import re
import time

import psycopg
import pytest

pytestmark = [pytest.mark.ha]


def _write(dsn: str, value: str) -> None:
    with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
        conn.execute("SET statement_timeout = '10s'")
        conn.execute("CREATE TABLE IF NOT EXISTS marks (value text PRIMARY KEY)")
        conn.execute("INSERT INTO marks VALUES (%s)", [value])


def _values_on(dsn: str) -> set[str]:
    with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
        return {row[0] for row in conn.execute("SELECT value FROM marks")}


def test_a_destroyed_replica_is_rebuilt_from_the_backup_and_streams_again(ha):
    _write(ha.dsn, "before the backup")
    ha.backup()
    _write(ha.dsn, "archived after the backup")
    name = ha.replicas()[0]
    methods_before = len(ha.replica_methods(name))
    ha.destroy_replica(name)
    started = time.monotonic()
    # The other standby is synchronous: commits go on while the replica is away.
    _write(ha.dsn, "while the replica is away")

    ha.wait_healthy(180)
    rebuilt_in = time.monotonic() - started

    assert ha.replica_methods(name)[methods_before:] == ["barman_cloud"], ha.describe()
    # The WAL archived since the backup came from the bucket (standbys have no
    # restore_command: the rebuild fetched it into pg_wal/ before the node started).
    fetched = re.findall(r"fetch_archived_wal: (\d+) archived WAL segments",
                         ha.node(name).log.read_text(errors="replace"))  # fmt: skip
    assert fetched and int(fetched[-1]) >= 1, ha.describe()
    status = ha.status(name)
    assert (status["role"], status["replication_state"]) == ("replica", "streaming"), status
    _write(ha.dsn, "after the rebuild")
    deadline = time.monotonic() + 30
    while _values_on(ha.node_dsn(name)) != {
        "before the backup", "archived after the backup", "while the replica is away",
        "after the rebuild",
    } and time.monotonic() < deadline:  # fmt: skip
        time.sleep(0.2)
    assert "after the rebuild" in _values_on(ha.node_dsn(name))
    print(f"\nreplica {name} rebuilt from the backup and streaming in {rebuilt_in:.1f} s")


def test_a_switchover_moves_the_primary_and_the_multi_host_dsn_follows(ha):
    old = ha.primary()
    _write(ha.dsn, "on the old primary")

    new = ha.switchover()

    assert new != old
    _write(ha.dsn, "on the new primary")  # target_session_attrs=read-write found it
    with psycopg.connect(ha.dsn, connect_timeout=5) as conn:
        port = conn.info.port
        assert not conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]
    assert port == ha.node(new).pg_port
    assert {"on the old primary", "on the new primary"} <= _values_on(ha.dsn)
    ha.wait_healthy(120)  # the old primary follows the new one
