"""Group leases: which agent coordinates a consumer group, decided here, not by the agents.

A group is coordinated by the agent holding its lease (`GroupLease`): agents acquire a
free or expired lease, renew the ones they hold (all in one call, every second or so)
and release the ones they let go; each acquisition bumps the lease's epoch, the fencing
token every later write of the holder carries. Expiry is the database's clock plus the
lease's ttl — an agent's clock never decides it — and an agent stops acting on a lease a
margin before the ttl it asked for has passed since it *sent* the request, so it lets go
before the database would give the group to another agent.

A holder saves the group's state (generation, protocol, leader, members, assignments)
at each completed join and sync; a save, or an offset commit (`group_commit_check`, in
the commit's own transaction), from an agent whose epoch is not the lease's current one
or whose lease has expired is refused with NOT_COORDINATOR. A new holder loads the
saved state and has the members rejoin.

`now` is for tests only: a fixed database time instead of `clock_timestamp()`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper

from core.kafka.errors import ErrorCode

_STATE = "generation, protocol_type, protocol_name, leader, members, group_type, extra"


def _clock(cursor: CursorWrapper, now: datetime | None) -> datetime:
    cursor.execute("SELECT COALESCE(%s::timestamptz, clock_timestamp())", [now])
    clock: datetime = cursor.fetchone()[0]
    return clock


def _ms(delta: timedelta) -> int:
    return max(int(delta.total_seconds() * 1000), 0)


def _stamp_ms(moment: datetime) -> int:
    """A lease's expiry on the database's clock, in ms since the epoch: two answers of
    one lease compare exactly (a relative time left carries each answer's latency)."""
    return int(moment.timestamp() * 1000)


def _state(row: Sequence[Any]) -> dict[str, Any]:
    generation, protocol_type, protocol_name, leader, members, group_type, extra = row
    if isinstance(members, str):
        members = json.loads(members)
    if isinstance(extra, str):
        extra = json.loads(extra)
    return {
        "group_type": group_type,
        "generation": generation,
        "protocol_type": protocol_type,
        "protocol_name": protocol_name,
        "leader": leader,
        "members": members,
        "extra": extra,
    }


@transaction.atomic
def group_leases_exchange(
    *,
    cluster_id: int,
    agent_id: str,
    ttl_ms: int,
    acquire: list[str],
    renew: list[tuple[str, int]],
    release: list[tuple[str, int]],
    offer: Sequence[tuple[str, str]] = (),
    resume: Sequence[tuple[str, int]] = (),
    now: datetime | None = None,
) -> dict[str, Any]:
    """One agent's lease traffic: releases, renewals, then acquisitions.

    `acquire` takes a group's lease for this agent when it is free or expired (or
    already this agent's: a new epoch); `offer` (group id, agent id) gives a free or
    expired lease to another agent of the cluster — the rendezvous choice — which takes
    it up when the group's first request reaches it. Answers ``renewed``/``lost`` (group
    ids of `renew`) and ``leases``: for each group of `acquire` and `offer`, its holder
    (``agent_id``), ``epoch``, ``expires_in_ms``, ``expires_at_ms`` (the expiry on the
    database's clock: it moves exactly when the lease is renewed) and, when this agent
    got it, the saved ``state``.

    `resume` renews leases this agent kept through a control-plane outage (Ripcord): one
    that expired meanwhile is renewed too, as long as nobody took it since — its holder
    and epoch are still this agent's, and any acquisition would have changed the epoch,
    so nobody else acted on the group in between (the epoch fences). Its groups are
    answered in ``renewed``/``lost`` like `renew`'s."""
    with connection.cursor() as cursor:
        n = _clock(cursor, now)
        if release:
            groups, epochs = zip(*release, strict=True)
            cursor.execute(
                "UPDATE floe_group_lease SET expires_at = %s WHERE cluster_id = %s"
                " AND agent_id = %s AND expires_at > %s AND (group_id, epoch) IN"
                " (SELECT * FROM unnest(%s::text[], %s::bigint[]))",
                [n, cluster_id, agent_id, n, list(groups), list(epochs)],
            )
        renewed: list[str] = []
        if renew:
            groups, epochs = zip(*renew, strict=True)
            cursor.execute(
                "UPDATE floe_group_lease SET expires_at = %s + make_interval(secs => %s)"
                " WHERE cluster_id = %s AND agent_id = %s AND expires_at > %s"
                " AND (group_id, epoch) IN (SELECT * FROM unnest(%s::text[], %s::bigint[]))"
                " RETURNING group_id",
                [n, ttl_ms / 1000, cluster_id, agent_id, n, list(groups), list(epochs)],
            )
            renewed = [r[0] for r in cursor.fetchall()]
        if resume:
            groups, epochs = zip(*resume, strict=True)
            cursor.execute(
                "UPDATE floe_group_lease SET expires_at = %s + make_interval(secs => %s)"
                " WHERE cluster_id = %s AND agent_id = %s"
                " AND (group_id, epoch) IN (SELECT * FROM unnest(%s::text[], %s::bigint[]))"
                " RETURNING group_id",
                [n, ttl_ms / 1000, cluster_id, agent_id, list(groups), list(epochs)],
            )
            renewed += [r[0] for r in cursor.fetchall()]
        leases: list[dict[str, Any]] = []
        targets = dict(offer)
        targets.update((g, agent_id) for g in acquire)
        wanted = sorted(targets)  # sorted: concurrent acquirers lock rows in one order
        if wanted:
            # A free or expired lease goes to its target with the next epoch; so does
            # one this agent holds and asks for (it lost track of it: the new epoch
            # fences whatever it still had in flight).
            cursor.execute(
                "INSERT INTO floe_group_lease AS l (cluster_id, group_id, agent_id, epoch,"
                " expires_at, generation, protocol_type, protocol_name, leader, members,"
                " group_type, extra)"
                " SELECT %s, g, a, 1, %s + make_interval(secs => %s), 0, '', '', '', '[]',"
                " 'classic', '{}'"
                " FROM unnest(%s::text[], %s::text[]) AS t(g, a) ORDER BY g"
                " ON CONFLICT (cluster_id, group_id) DO UPDATE SET agent_id = EXCLUDED.agent_id,"
                " epoch = l.epoch + 1, expires_at = EXCLUDED.expires_at"
                " WHERE l.expires_at <= %s"
                " OR (l.agent_id = EXCLUDED.agent_id AND EXCLUDED.agent_id = %s)"
                f" RETURNING group_id, agent_id, epoch, {_STATE}",
                [cluster_id, n, ttl_ms / 1000, wanted, [targets[g] for g in wanted], n, agent_id],
            )
            got = {r[0]: r for r in cursor.fetchall()}
            for group_id, row in sorted(got.items()):
                leases.append(
                    {
                        "group_id": group_id,
                        "agent_id": row[1],
                        "epoch": row[2],
                        "expires_in_ms": ttl_ms,
                        "expires_at_ms": _stamp_ms(n + timedelta(milliseconds=ttl_ms)),
                        "state": _state(row[3:]) if row[1] == agent_id else None,
                    }
                )
            others = [g for g in wanted if g not in got]
            if others:
                cursor.execute(
                    "SELECT group_id, agent_id, epoch, expires_at FROM floe_group_lease"
                    " WHERE cluster_id = %s AND group_id = ANY(%s::text[])",
                    [cluster_id, others],
                )
                for group_id, holder, epoch, expires_at in cursor.fetchall():
                    leases.append(
                        {
                            "group_id": group_id,
                            "agent_id": holder,
                            "epoch": epoch,
                            "expires_in_ms": _ms(expires_at - n),
                            "expires_at_ms": _stamp_ms(expires_at),
                            "state": None,
                        }
                    )
    lost = [g for g, _ in (*renew, *resume) if g not in set(renewed)]
    return {"renewed": renewed, "lost": lost, "leases": leases}


def group_state_save(
    *,
    cluster_id: int,
    agent_id: str,
    group_id: str,
    epoch: int,
    state: dict[str, Any],
    now: datetime | None = None,
) -> ErrorCode:
    """Store a group's state for its lease holder; NOT_COORDINATOR for anyone else (an
    older epoch, another agent, or a lease that expired). The first save with members
    marks the group joined in Floe (`joined_at`: a migration no longer copies to it)."""
    with transaction.atomic(), connection.cursor() as cursor:
        n = _clock(cursor, now)
        cursor.execute(
            "UPDATE floe_group_lease SET generation = %s, protocol_type = %s,"
            " protocol_name = %s, leader = %s, members = %s::jsonb, group_type = %s,"
            " extra = %s::jsonb,"
            " joined_at = CASE WHEN %s THEN COALESCE(joined_at, %s) ELSE joined_at END"
            " WHERE cluster_id = %s AND group_id = %s AND agent_id = %s AND epoch = %s"
            " AND expires_at > %s",
            [
                state["generation"],
                state["protocol_type"] or "",
                state["protocol_name"] or "",
                state["leader"] or "",
                json.dumps(state["members"]),
                state.get("group_type") or "classic",
                json.dumps(state.get("extra") or {}),
                bool(state["members"]),
                n,
                cluster_id,
                group_id,
                agent_id,
                epoch,
                n,
            ],
        )
        return ErrorCode.NONE if cursor.rowcount == 1 else ErrorCode.NOT_COORDINATOR


def group_joined_at(*, cluster_id: int, group_id: str) -> datetime | None:
    """When a member first joined the group in Floe (None: never — only read, or only
    committed to without joining), its lease row locked until the caller's transaction
    ends: a join's save waits for the migration's copy that asked, or goes first."""
    assert connection.in_atomic_block, "the answer holds only in the caller's transaction"
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT joined_at, members <> '[]'::jsonb, clock_timestamp() FROM floe_group_lease"
            " WHERE cluster_id = %s AND group_id = %s FOR UPDATE",
            [cluster_id, group_id],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    joined: datetime | None = row[0] if row[0] is not None or not row[1] else row[2]
    return joined


def group_commit_check(
    *,
    cluster_id: int,
    group_id: str,
    agent_id: str | None,
    epoch: int | None,
    generation: int,
    member_id: str,
    group_instance_id: str | None,
    now: datetime | None = None,
) -> ErrorCode:
    """Kafka's OffsetCommit rules against the lease and the saved group, inside the
    caller's transaction (the lease row is share-locked until it ends, so a state save
    cannot slip between this check and the offsets it guards).

    With an epoch: the caller must hold the live lease of that epoch. Without one (a
    caller that is no coordinator): only while nobody holds the group."""
    assert connection.in_atomic_block, "the check belongs to the commit's transaction"
    with connection.cursor() as cursor:
        n = _clock(cursor, now)
        cursor.execute(
            f"SELECT agent_id, epoch, expires_at > %s, {_STATE} FROM floe_group_lease"
            " WHERE cluster_id = %s AND group_id = %s FOR SHARE",
            [n, cluster_id, group_id],
        )
        row = cursor.fetchone()
    if epoch is not None:
        if row is None or row[0] != agent_id or row[1] != epoch or not row[2]:
            return ErrorCode.NOT_COORDINATOR
    elif row is not None and row[2]:
        return ErrorCode.NOT_COORDINATOR
    state: dict[str, Any] = _state(row[3:]) if row is not None else {"generation": 0, "members": []}
    members = state["members"]
    if state.get("group_type") == "consumer":
        return _consumer_commit_check(members, generation, member_id)
    if generation < 0 and not members:
        # A commit outside group management (assign() consumers, admin tools, a KIP-848
        # consumer that names its own member id before joining): while the group has no
        # members (Kafka: Empty), whoever it names.
        return ErrorCode.NONE
    if generation < 0 and not member_id and group_instance_id is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if group_instance_id is not None:
        static = next((m for m in members if m.get("group_instance_id") == group_instance_id), None)
        if static is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if static["member_id"] != member_id:
            return ErrorCode.FENCED_INSTANCE_ID
    elif not any(m["member_id"] == member_id for m in members):
        return ErrorCode.UNKNOWN_MEMBER_ID
    if generation != state["generation"]:
        return ErrorCode.ILLEGAL_GENERATION
    return ErrorCode.NONE


def _consumer_commit_check(
    members: list[dict[str, Any]], member_epoch: int, member_id: str
) -> ErrorCode:
    """KIP-848's OffsetCommit rules (agents.groups.consumer): without a member only while
    the group has none; else a member of the group at its current epoch or the one
    before it (a commit made while it gives partitions up)."""
    if member_epoch < 0 and not members:
        return ErrorCode.NONE
    member = next((m for m in members if m["member_id"] == member_id), None)
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if member_epoch not in (member.get("member_epoch"), member.get("previous_member_epoch")):
        return ErrorCode.STALE_MEMBER_EPOCH
    return ErrorCode.NONE
