"""`/healthz` of the web process: healthy only while the metadata store takes writes.

A load balancer or Kubernetes takes a web process out of service while this answers 503:
during a failover there is no primary, and every commit and console write would fail. The
answer also says what the operator wants to see during one: the role of the node this
process is connected to, and — on a primary — each replica's state and how far behind it
is (``pg_stat_replication``); on a replica, how far its replay is behind
(``pg_last_wal_replay_lsn``).

The write check is ``txid_current()``: it assigns a transaction id, which a standby refuses
("cannot assign TransactionIds during recovery") and which, on a primary in synchronous
mode, commits through the synchronous standby like a real write — without a table. Every
statement is bounded (``statement_timeout``), so the probe answers within seconds whatever
the database does.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from django.db import DatabaseError, connection, transaction
from django.http import HttpRequest, JsonResponse

log = logging.getLogger(__name__)

# The probe's statements together stay well under a load balancer's usual check timeout.
STATEMENT_TIMEOUT_MS = 2000

_REPLICAS_SQL = """
SELECT application_name, state, sync_state,
       pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::bigint,
       EXTRACT(EPOCH FROM replay_lag)::float8
  FROM pg_stat_replication ORDER BY application_name
"""
_REPLAY_SQL = """
SELECT pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())::bigint,
       EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp())::float8
"""


def database_health() -> dict[str, Any]:
    """The metadata store as this process sees it: ``writable``, ``role``, the server's
    address, and replication (see the module's docstring). Never raises a database error:
    a database that cannot be reached is ``{"writable": False, "error": …}``."""
    started = time.perf_counter()
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET LOCAL statement_timeout = %s", [STATEMENT_TIMEOUT_MS])
            cursor.execute(
                "SELECT pg_is_in_recovery(), inet_server_addr()::text, inet_server_port()"
            )
            in_recovery, address, port = cursor.fetchone()
            health: dict[str, Any] = {
                "role": "replica" if in_recovery else "primary",
                "server": f"{address}:{port}" if address else "local socket",
            }
            if in_recovery:
                cursor.execute(_REPLAY_SQL)
                behind, seconds = cursor.fetchone()
                health["replay_lag_bytes"] = behind
                health["replay_lag_s"] = seconds
            else:
                cursor.execute(_REPLICAS_SQL)
                health["replicas"] = [
                    {
                        "name": name,
                        "state": state,
                        "sync_state": sync_state,
                        "lag_bytes": lag_bytes,
                        "lag_s": lag_s or 0.0,
                    }
                    for name, state, sync_state, lag_bytes, lag_s in cursor.fetchall()
                ]
        writable, error = _can_write()
    except DatabaseError as exc:
        health, writable, error = {}, False, _first_line(exc)
    finally:
        # A broken connection (the old primary gone) is not kept for the next request.
        if connection.connection is not None and (
            connection.connection.closed or connection.connection.broken
        ):
            connection.close()
    health["writable"] = writable
    if error:
        health["error"] = error
    health["checked_in_ms"] = round((time.perf_counter() - started) * 1000, 1)
    return health


def _can_write() -> tuple[bool, str | None]:
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET LOCAL statement_timeout = %s", [STATEMENT_TIMEOUT_MS])
            cursor.execute("SELECT txid_current()")
        return True, None
    except DatabaseError as exc:
        return False, _first_line(exc)


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def healthz(request: HttpRequest) -> JsonResponse:
    """200 while the metadata store takes writes, else 503; the body says why."""
    database = database_health()
    ok = database["writable"]
    if not ok:
        log.warning("healthz: the metadata store does not take writes: %s", database)
    return JsonResponse(
        {"status": "ok" if ok else "unavailable", "database": database},
        status=200 if ok else 503,
    )
