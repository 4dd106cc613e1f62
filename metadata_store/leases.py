"""Leases on a cluster's background work — a migration's copier, a job run: the one rule
both follow (docs/ARCHITECTURE.md "Leases").

A lease (`Lease`, one row per cluster and `subject`, e.g. "migration mig_…", "job jr_…")
has a holder (an agent id), an epoch that grows on every new lease of the subject, a
token new with every lease and an expiry on the database's clock (`clock_timestamp()`
plus the length asked for): no web process's or agent's clock decides it. A lease is
taken only when free or expired; renewing or checking it refuses (`LeaseLost`) a token
that is not the current one (superseded: another holder has a later epoch) or a lease
that expired, even when nobody took it since. `lease_check` runs in the caller's
transaction and share-locks the row until it ends, so a new lease of the subject waits
for every write that checked the old one: a write is either before the takeover or
refused.

It lives in the metadata store, below the apps whose work it leases, because the
store's own writes are fenced by it: a mirrored commit checks its migration's lease in
the commit's transaction (`metadata_store.mirroring`), and the store cannot import
`virtualclusters`.
"""

from __future__ import annotations

import secrets
from datetime import datetime

from django.db import connection, transaction

from metadata_store.models import Lease

_COLUMNS = "id, holder, epoch, token, expires_at"


class LeaseLost(Exception):
    """The lease is not (or no longer) held with this token: superseded, expired, ended."""


# How long a lease lasts: what its holder asks, within these bounds, per kind of work (a
# Spark step may run an hour between two renewals; a copier reports every few seconds).
SHORTEST_S = 10
LONGEST_S = {"job": 3600, "migration": 600}


def lease_seconds(subject: str, asked: float) -> float:
    """The length of a lease of `subject` (a job's, a migration's) whose holder asked for
    `asked` seconds: what its takers and renewers pass to `lease_take`/`lease_renew`."""
    return min(max(asked, SHORTEST_S), LONGEST_S[subject.split(" ", 1)[0]])


def migration_subject(migration_id: str) -> str:
    """The lease subject of a migration's copier."""
    return f"migration {migration_id}"


def job_subject(run_id: str) -> str:
    """The lease subject of a job run."""
    return f"job {run_id}"


def _lease(cluster_id: int, subject: str, row: tuple[int, str, int, str, datetime]) -> Lease:
    lease_id, holder, epoch, token, expires_at = row
    return Lease(
        id=lease_id,
        cluster_id=cluster_id,
        subject=subject,
        holder=holder,
        epoch=epoch,
        token=token,
        expires_at=expires_at,
    )


def lease_take(*, cluster_id: int, subject: str, holder: str, seconds: float) -> Lease | None:
    """A new lease of `subject` for `holder` (the next epoch, a new token) when nobody
    holds one that is still live; None when someone does."""
    token = secrets.token_hex(16)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO floe_lease AS l (cluster_id, subject, holder, epoch, token, expires_at)"
            " VALUES (%s, %s, %s, 1, %s, clock_timestamp() + make_interval(secs => %s))"
            " ON CONFLICT (cluster_id, subject) DO UPDATE SET holder = EXCLUDED.holder,"
            " epoch = l.epoch + 1, token = EXCLUDED.token, expires_at = EXCLUDED.expires_at"
            f" WHERE l.expires_at <= clock_timestamp() RETURNING {_COLUMNS}",
            [cluster_id, subject, holder, token, seconds],
        )
        row = cursor.fetchone()
    return None if row is None else _lease(cluster_id, subject, row)


def _refusal(cluster_id: int, subject: str, token: str) -> LeaseLost:
    """Why `token` does not hold `subject`'s lease, in words."""
    lease = Lease.objects.filter(cluster_id=cluster_id, subject=subject).first()
    if lease is None or not token:
        return LeaseLost(f"{subject} is not leased with this token")
    if not secrets.compare_digest(lease.token, token):
        return LeaseLost(
            f"{subject} is leased again (epoch {lease.epoch}, {lease.holder}): this lease "
            "was superseded"
        )
    return LeaseLost(f"the lease of {subject} (epoch {lease.epoch}) expired")


def lease_renew(*, cluster_id: int, subject: str, token: str, seconds: float) -> Lease:
    """Extend a live lease to `seconds` from now (the database's clock); `LeaseLost` for
    a superseded or expired one — an expired lease stays lost, even if nobody took it."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE floe_lease SET expires_at = clock_timestamp() + make_interval(secs => %s)"
            " WHERE cluster_id = %s AND subject = %s AND token = %s"
            f" AND expires_at > clock_timestamp() RETURNING {_COLUMNS}",
            [seconds, cluster_id, subject, token],
        )
        row = cursor.fetchone()
        if row is None:
            raise _refusal(cluster_id, subject, token)
    return _lease(cluster_id, subject, row)


def lease_check(*, cluster_id: int, subject: str, token: str) -> Lease:
    """The live lease `token` holds, share-locked until the caller's transaction ends
    (a takeover waits for the writes it guards); `LeaseLost` otherwise."""
    assert connection.in_atomic_block, "the check belongs to the guarded write's transaction"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {_COLUMNS} FROM floe_lease WHERE cluster_id = %s AND subject = %s"
            " AND token = %s AND expires_at > clock_timestamp() FOR SHARE",
            [cluster_id, subject, token],
        )
        row = cursor.fetchone()
        if row is None:
            raise _refusal(cluster_id, subject, token)
    return _lease(cluster_id, subject, row)


def lease_end(*, cluster_id: int, subject: str, token: str | None = None) -> None:
    """End the lease now (only the one `token` holds, when given): free for the next
    taker, its epoch kept."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE floe_lease SET expires_at = LEAST(expires_at, clock_timestamp())"
            " WHERE cluster_id = %s AND subject = %s AND (%s::text IS NULL OR token = %s)",
            [cluster_id, subject, token, token],
        )


def leases_expired(*, cluster_id: int, subjects: list[str]) -> set[str]:
    """The subjects among `subjects` whose lease expired (on the database's clock)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT subject FROM floe_lease WHERE cluster_id = %s AND subject = ANY(%s::text[])"
            " AND expires_at <= clock_timestamp()",
            [cluster_id, subjects],
        )
        return {row[0] for row in cursor.fetchall()}


def leases_live(*, cluster_id: int, subjects: list[str]) -> dict[str, Lease]:
    """The live leases among `subjects`' (on the database's clock), by subject."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT subject, {_COLUMNS} FROM floe_lease WHERE cluster_id = %s"
            " AND subject = ANY(%s::text[]) AND expires_at > clock_timestamp()",
            [cluster_id, subjects],
        )
        return {row[0]: _lease(cluster_id, row[0], row[1:]) for row in cursor.fetchall()}
