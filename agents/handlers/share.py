"""Share groups (KIP-932): ShareGroupHeartbeat, ShareFetch, ShareAcknowledge.

Nothing of a share group lives in an agent but its members' share sessions: membership
and every partition's records in flight are the metadata store's
(`metadata_store.share_groups`), so any agent serves any member. A heartbeat is one
`share/heartbeat` call. A ShareFetch applies the acknowledgements it carries and
acquires the member's next records in one `share/fetch` call (at most its MaxRecords),
then reads those records through the read path like a Fetch, the answer's batches
within its MaxBytes (acquired records past them are given back uncounted); with nothing
to acquire it waits (up to its MaxWaitMs) for a commit to the partitions and asks again. A share session (KIP-932's,
like KIP-227's fetch sessions: the partitions a member fetches, by epoch) is this
agent's memory; a member that moves to another agent opens a new one.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from agents import read_path
from agents.context import AgentContext
from agents.zone_routing import client_zone
from core.kafka import RequestHeader
from core.kafka.errors import ErrorCode

MAX_WAIT_S = 30.0  # a bound on any client's MaxWaitMs
_SESSIONS_KEPT = 10_000  # share sessions an agent keeps (least recently used go first)
_READ_BYTES = 1024 * 1024  # a read's budget (the records past the acquired ones are cut)
_READ_ROUNDS = 8

Key = tuple[uuid.UUID, int]  # (topic id, partition)


@dataclass
class ShareSession:
    epoch: int
    partitions: dict[Key, None] = field(default_factory=dict)  # ordered set
    used: float = field(default_factory=time.monotonic)


_SESSIONS: dict[tuple[str, str], ShareSession] = {}
# Members that left through this agent (group id, member id): their ShareFetches still
# waiting here acquire nothing more (`handle_share_fetch`). Oldest forgotten first.
_LEFT: dict[tuple[str, str], None] = {}


def sessions_count() -> int:
    return len(_SESSIONS)


def _session_error(error: int, message: str) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": int(error),
        "error_message": message,
        "acquisition_lock_timeout_ms": 0,
        "responses": [],
        "node_endpoints": [],
    }


# --- ShareGroupHeartbeat --------------------------------------------------------------


async def handle_share_group_heartbeat(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Join (epoch 0), heartbeat, leave (-1): the store answers with the member's epoch
    and, when it changed, its assignment — every partition of its subscribed topics."""
    if not body["group_id"]:
        return _heartbeat_error(ErrorCode.INVALID_GROUP_ID, "GroupId can't be empty.")
    if body["member_epoch"] == 0 and not body.get("subscribed_topic_names"):
        return _heartbeat_error(ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set.")
    if not body["member_id"]:
        return _heartbeat_error(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
    member = (body["group_id"], body["member_id"])
    if body["member_epoch"] == -1:
        _LEFT[member] = None
        if len(_LEFT) > _SESSIONS_KEPT:
            del _LEFT[next(iter(_LEFT))]
    elif body["member_epoch"] == 0:
        _LEFT.pop(member, None)  # (re)joining
    answer = await ctx.client.call(
        "share/heartbeat",
        {
            "group_id": body["group_id"],
            "member_id": body["member_id"],
            "member_epoch": body["member_epoch"],
            "topics": body.get("subscribed_topic_names"),
            "client_id": (header.client_id or "")[:255],
            "rack_id": body.get("rack_id"),
            "agent_id": ctx.config.agent_id,
        },
    )
    assignment = answer.get("assignment")
    return {
        "throttle_time_ms": 0,
        "error_code": answer["error_code"],
        "error_message": answer.get("error_message"),
        "member_id": answer.get("member_id"),
        "member_epoch": answer["member_epoch"],
        "heartbeat_interval_ms": answer["heartbeat_interval_ms"],
        "assignment": None
        if assignment is None
        else {
            "topic_partitions": [
                {"topic_id": uuid.UUID(t["topic_id"]), "partitions": t["partitions"]}
                for t in assignment
            ]
        },
    }


def _heartbeat_error(error: int, message: str) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": int(error),
        "error_message": message,
        "member_id": None,
        "member_epoch": -1,
        "heartbeat_interval_ms": 0,
        "assignment": None,
    }


# --- ShareGroupDescribe -------------------------------------------------------------------


async def handle_share_group_describe(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """ShareGroupDescribe v1: each group's members and their assignments, from the store
    (a group it does not know: GROUP_ID_NOT_FOUND)."""
    answer = await ctx.client.call("share/groups/list", {"group_ids": body["group_ids"]})
    known = {g["group_id"]: g for g in answer["groups"]}
    topic_ids = {
        uuid.UUID(t["topic_id"])
        for g in known.values()
        for m in g["members"]
        for t in m.get("assigned") or ()
    }
    topics = await ctx.topics.by_ids(topic_ids) if topic_ids else {}
    groups = []
    for group_id in body["group_ids"]:
        group = known.get(group_id)
        if group is None:
            groups.append(
                {"error_code": int(ErrorCode.GROUP_ID_NOT_FOUND),
                 "error_message": f"Group {group_id} not found.", "group_id": group_id,
                 "group_state": "Dead", "group_epoch": -1, "assignment_epoch": -1,
                 "assignor_name": "", "members": []}
            )  # fmt: skip
            continue
        members = []
        for m in group["members"]:
            assigned = []
            for t in m.get("assigned") or ():
                info = topics.get(uuid.UUID(t["topic_id"]))
                assigned.append(
                    {"topic_id": uuid.UUID(t["topic_id"]), "topic_name": info.name if info else "",
                     "partitions": t["partitions"]}
                )  # fmt: skip
            members.append(
                {"member_id": m["member_id"], "rack_id": m.get("rack_id"),
                 "member_epoch": m.get("member_epoch", 0), "client_id": m.get("client_id", ""),
                 "client_host": m.get("client_host", ""),
                 "subscribed_topic_names": m.get("topics") or [],
                 "assignment": {"topic_partitions": assigned}}
            )  # fmt: skip
        groups.append(
            {"error_code": 0, "error_message": None, "group_id": group_id,
             "group_state": group["state"], "group_epoch": group["group_epoch"],
             "assignment_epoch": group["group_epoch"], "assignor_name": "simple",
             "members": members}
        )  # fmt: skip
    return {"throttle_time_ms": 0, "groups": groups}


# --- ShareFetch and ShareAcknowledge ---------------------------------------------------


def _acks(body: dict[str, Any]) -> dict[Key, list[dict[str, Any]]]:
    """Each partition's acknowledgement batches (a topic may be named more than once)."""
    out: dict[Key, list[dict[str, Any]]] = {}
    for topic in body.get("topics") or ():
        for p in topic["partitions"]:
            batches = p.get("acknowledgement_batches") or ()
            out.setdefault((topic["topic_id"], p["partition_index"]), []).extend(
                {"first": b["first_offset"], "last": b["last_offset"],
                 "types": b["acknowledge_types"]}
                for b in batches
            )  # fmt: skip
    return out


def _session_for(body: dict[str, Any], *, fetch: bool) -> ShareSession | dict[str, Any]:
    """The share session this request belongs to (opened, moved on, or closed), or the
    error answer. ShareAcknowledge never opens one (epoch 0 is INVALID_SHARE_SESSION_EPOCH)."""
    key = (body.get("group_id") or "", body.get("member_id") or "")
    epoch = body["share_session_epoch"]
    if epoch == 0:
        if not fetch:
            return _session_error(ErrorCode.INVALID_SHARE_SESSION_EPOCH, "epoch 0 acknowledges")
        session = _SESSIONS[key] = ShareSession(epoch=1)
        if len(_SESSIONS) > _SESSIONS_KEPT:
            oldest = min(_SESSIONS, key=lambda k: _SESSIONS[k].used)
            del _SESSIONS[oldest]
        return session
    existing = _SESSIONS.get(key)
    if epoch == -1:
        _SESSIONS.pop(key, None)
        return ShareSession(epoch=-1, partitions=existing.partitions if existing else {})
    if existing is None:
        return _session_error(ErrorCode.SHARE_SESSION_NOT_FOUND, "no such share session here")
    if epoch != existing.epoch:
        return _session_error(
            ErrorCode.INVALID_SHARE_SESSION_EPOCH, f"expected epoch {existing.epoch}, got {epoch}"
        )
    existing.epoch = epoch + 1 if epoch < 2**31 - 1 else 1
    existing.used = time.monotonic()
    return existing


async def handle_share_fetch(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """ShareFetch v1: acknowledge what the request carries, acquire and read the next
    records of the session's partitions (long-polling up to MaxWaitMs for some)."""
    if not body.get("group_id") or not body.get("member_id"):
        return _session_error(ErrorCode.INVALID_REQUEST, "GroupId and MemberId are required")
    session = _session_for(body, fetch=True)
    if isinstance(session, dict):
        return session
    acks = _acks(body)
    if session.epoch != -1:
        for topic in body.get("topics") or ():
            for p in topic["partitions"]:
                session.partitions[(topic["topic_id"], p["partition_index"])] = None
        for topic in body.get("forgotten_topics_data") or ():
            for index in topic["partitions"]:
                session.partitions.pop((topic["topic_id"], index), None)
    # MaxBytes 0 acquires nothing (as Kafka: an answer within 0 bytes has no records).
    fetching = (
        session.epoch != -1 and body.get("max_records", 0) > 0 and body.get("max_bytes", 1) > 0
    )
    # The session's partitions in turn, one step further each fetch: the first ones take
    # the MaxRecords and MaxBytes first, so no partition is starved by a busy one.
    turn = list(session.partitions) if fetching else []
    if turn:
        step = session.epoch % len(turn)
        turn = turn[step:] + turn[:step]
    # A closing session (epoch -1) releases what the member holds in its partitions.
    closing = list(session.partitions) if session.epoch == -1 else []
    keys = list(dict.fromkeys([*turn, *acks, *closing]))
    found = await ctx.topics.by_ids({t for t, _ in keys})
    known = {
        k: info
        for k in keys
        if (info := found.get(k[0])) is not None and 0 <= k[1] < info.partitions
    }
    deadline = time.monotonic() + min(max(body.get("max_wait_ms", 0), 0) / 1000, MAX_WAIT_S)
    answers: dict[Key, dict[str, Any]] = {}
    pending_acks = acks
    lock_ms = 0
    read_committed = False
    while True:
        seen = ctx.watch.snapshot([(known[k].topic_id_str, k[1]) for k in known])
        # A member that has left acquires nothing more: librdkafka sends its leave while
        # its last ShareFetch still waits here, and records acquired for it now would
        # reach no application — its session's close gives them back counted.
        if (body["group_id"], body["member_id"]) in _LEFT:
            fetching = False
        result = await _store_call(ctx, body, known, pending_acks, fetching, release=closing)
        closing = []
        for k, part in result.items():
            if k in pending_acks or part["acquired"] or part["error_code"]:
                answers[k] = part
        pending_acks = {}
        lock_ms = max(lock_ms, result.lock_ms)
        read_committed = read_committed or result.read_committed
        got = any(part["acquired"] for part in answers.values())
        remaining = deadline - time.monotonic()
        if got or not fetching or remaining <= 0 or not known:
            break
        await ctx.watch.wait(
            [(known[k].topic_id_str, k[1]) for k in known], min(remaining, 1.0), since=seen
        )
    if session.epoch != -1 and body.get("max_bytes", 1) <= 0:
        await asyncio.sleep(max(deadline - time.monotonic(), 0))  # nothing can come: wait
    for k in keys:
        if k not in known and (k in acks or fetching):
            answers[k] = {
                "error_code": int(ErrorCode.UNKNOWN_TOPIC_ID),
                "ack_error_code": int(ErrorCode.UNKNOWN_TOPIC_ID) if k in acks else 0,
                "acquired": [],
            }
    max_bytes = body.get("max_bytes", 0x7FFFFFFF)
    records, unsendable, unsent = await _read(
        ctx, header, known, answers, read_committed, max_bytes
    )
    if unsendable or unsent:
        # Transaction markers, and under read_committed aborted transactions' records,
        # are acquired offsets no member can be given: archived at once (KIP-932).
        # Records past MaxBytes go back, uncounted, for the next fetch (any member's).
        await _store_call(ctx, body, known, unsendable, acquire=False, give_back=unsent)
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "acquisition_lock_timeout_ms": lock_ms,
        "responses": _by_topic(ctx, answers, records, fetch=True),
        "node_endpoints": [],
    }


class _Result(dict[Key, dict[str, Any]]):
    """The store's answer per partition, with the acquisition lock and isolation level."""

    lock_ms: int = 0
    read_committed: bool = False


async def _store_call(
    ctx: AgentContext,
    body: dict[str, Any],
    known: dict[Key, Any],
    acks: dict[Key, list[dict[str, Any]]],
    acquire: bool,
    give_back: dict[Key, list[dict[str, Any]]] | None = None,
    release: list[Key] | None = None,
) -> _Result:
    """One `share/fetch` call: the acknowledgements, the records given back, then the
    acquisitions; `release` (the share session closed: its partitions): what the member
    still holds in them goes back to the group — not in those of its sessions with other
    agents, which may still acknowledge (KIP-932's share sessions are per broker)."""
    back = give_back or {}
    freed = set(release or ())
    partitions = [
        {"topic_id": str(k[0]), "partition": k[1], "acks": acks.get(k, []),
         "give_back": back.get(k, []), "acquire": acquire, "release": k in freed}
        for k in known
        if acquire or k in acks or k in back or k in freed
    ]  # fmt: skip
    out = _Result()
    if not partitions:
        return out
    answer = await ctx.client.call(
        "share/fetch",
        {
            "group_id": body["group_id"],
            "member_id": body["member_id"],
            "partitions": partitions,
            "max_records": max(body.get("max_records", 0), 0),
        },
    )
    out.lock_ms = int(answer["lock_ms"])
    out.read_committed = answer.get("isolation_level") == 1
    for part in answer["partitions"]:
        out[(uuid.UUID(part["topic_id"]), part["partition"])] = part
    return out


async def _read(
    ctx: AgentContext,
    header: RequestHeader,
    known: dict[Key, Any],
    answers: dict[Key, dict[str, Any]],
    read_committed: bool,
    max_bytes: int,
) -> tuple[dict[Key, bytes], dict[Key, list[dict[str, Any]]], dict[Key, list[dict[str, Any]]]]:
    """The record batches holding each partition's acquired records, the acquired
    offsets no member can be given (as GAP acknowledgements), and those past the
    request's MaxBytes (to give back), both taken out of the answer. A read stops at a
    plan's budget (a file's run that does not fit), so it goes on from where the last
    read ended until every acquired offset is covered (a few rounds). The answer's
    batches stay within MaxBytes, but for its first batch (KIP-74: a consumer always
    makes progress); every acquired offset past the batches kept is given back."""
    todo: dict[Key, tuple[int, int]] = {}
    for k, part in answers.items():
        if part["acquired"] and k in known:
            todo[k] = (min(a[0] for a in part["acquired"]), max(a[1] for a in part["acquired"]))
    reading = list(todo)
    out: dict[Key, list[bytes]] = {k: [] for k in todo}
    aborted: dict[Key, list[tuple[int, int]]] = {k: [] for k in todo}
    covered: dict[Key, int] = {}  # the last offset of each partition's batches kept
    failed: dict[Key, list[list[int]]] = {}  # a read's error before any batch: all back
    sent = 0
    for _ in range(_READ_ROUNDS):
        if not todo or (sent and sent >= max_bytes):
            break
        wanted = [
            (k, read_path.Wanted(known[k], {"partition": k[1], "fetch_offset": first,
                                            "partition_max_bytes": _READ_BYTES}))
            for k, (first, _) in todo.items()
        ]  # fmt: skip
        await read_path.fill(
            ctx,
            [w for _, w in wanted],
            {"max_wait_ms": 0, "min_bytes": 0, "max_bytes": _READ_BYTES,
             "isolation_level": 1 if read_committed else 0},
            client_zone(header.client_id),
        )  # fmt: skip
        for k, item in wanted:
            first, last = todo.pop(k)
            if item.answer["error_code"]:
                if not out[k]:
                    answers[k]["error_code"] = item.answer["error_code"]
                    failed[k], answers[k]["acquired"] = answers[k]["acquired"], []
                continue
            aborted[k].extend(
                (a["producer_id"], a["first_offset"])
                for a in item.answer.get("aborted_transactions") or ()
            )
            data = b"".join(item.answer["records"] or ())
            kept, end, full = _batches_until(data, last, max_bytes - sent, first_fits=not sent)
            if kept:
                out[k].append(data[:kept])
                sent += kept
                covered[k] = end
            if not full and kept and end < last:
                todo[k] = (end + 1, last)
    records = {k: b"".join(parts) for k, parts in out.items()}
    # Acquired offsets the answer holds no batch for (past MaxBytes, past the rounds, a
    # read that came back short or failed) go back uncounted: a client acknowledges an
    # acquired offset it got no record for as a GAP, which would archive it unseen.
    unsent: dict[Key, list[dict[str, Any]]] = {
        k: [{"first": f, "last": la} for f, la, _ in ranges] for k, ranges in failed.items()
    }
    for k in reading:
        if k in failed:
            continue
        kept_ranges, gone = _carve(answers[k]["acquired"], [(covered.get(k, -1) + 1, 2**63 - 1)])
        if gone:
            answers[k]["acquired"] = kept_ranges
            unsent[k] = [{"first": f, "last": la} for f, la in gone]
    unsendable: dict[Key, list[dict[str, Any]]] = {}
    for k, data in records.items():
        skip = _unsendable(data, sorted(set(aborted[k]), key=lambda a: a[1]), read_committed)
        if not skip:
            continue
        kept_ranges, gaps = _carve(answers[k]["acquired"], skip)
        answers[k]["acquired"] = kept_ranges
        if gaps:
            unsendable[k] = [{"first": f, "last": la, "types": [0]} for f, la in gaps]
    return records, unsendable, unsent


def _unsendable(
    data: bytes, aborted: list[tuple[int, int]], read_committed: bool
) -> list[tuple[int, int]]:
    """Offset ranges of control batches (transaction markers) and, read_committed, of
    aborted transactions' batches (KIP-98: a producer's transactional batches from its
    aborted transaction's first offset until its abort marker)."""
    skip: list[tuple[int, int]] = []
    active: set[int] = set()
    pending = list(aborted)
    pos = 0
    while pos + 61 <= len(data):
        base = int.from_bytes(data[pos : pos + 8], "big", signed=True)
        length = int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
        attributes = int.from_bytes(data[pos + 21 : pos + 23], "big")
        last = base + int.from_bytes(data[pos + 23 : pos + 27], "big", signed=True)
        producer = int.from_bytes(data[pos + 43 : pos + 51], "big", signed=True)
        while pending and pending[0][1] <= last:
            active.add(pending.pop(0)[0])
        if attributes & 0x20:  # a control batch: a commit or abort marker
            skip.append((base, last))
            active.discard(producer)
        elif read_committed and attributes & 0x10 and producer in active:
            skip.append((base, last))
        pos += 12 + length
    return skip


def _carve(
    acquired: list[list[int]], skip: list[tuple[int, int]]
) -> tuple[list[list[int]], list[tuple[int, int]]]:
    """The acquired ranges without the skipped offsets, and the acquired offsets skipped."""
    kept: list[list[int]] = []
    gaps: list[tuple[int, int]] = []
    for first, last, count in acquired:
        start = first
        for s_first, s_last in skip:
            if s_last < start or s_first > last:
                continue
            if s_first > start:
                kept.append([start, s_first - 1, count])
            gaps.append((max(s_first, start), min(s_last, last)))
            start = s_last + 1
        if start <= last:
            kept.append([start, last, count])
    return kept, gaps


def _batches_until(
    data: bytes, last: int, room: int, *, first_fits: bool = False
) -> tuple[int, int, bool]:
    """(bytes of the whole batches up to the one holding `last` that fit in `room` — the
    first one whatever its size when `first_fits` —, the last offset they hold, whether
    a batch did not fit): v2 batch headers are baseOffset int64, batchLength int32, …,
    lastOffsetDelta int32 at byte 23."""
    pos, end = 0, -1
    while pos + 27 <= len(data):
        base = int.from_bytes(data[pos : pos + 8], "big", signed=True)
        length = int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
        delta = int.from_bytes(data[pos + 23 : pos + 27], "big", signed=True)
        if base > last or pos + 12 + length > len(data):
            break
        if pos + 12 + length > room and not (first_fits and pos == 0):
            return pos, end, True
        pos += 12 + length
        end = base + delta
        if end >= last:
            break
    return pos, end, False


def _by_topic(
    ctx: AgentContext,
    answers: dict[Key, dict[str, Any]],
    records: dict[Key, bytes],
    *,
    fetch: bool,
) -> list[dict[str, Any]]:
    topics: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for (topic_id, index), part in answers.items():
        item: dict[str, Any] = {
            "partition_index": index,
            "error_code": part["error_code"] if fetch else part["ack_error_code"],
            "error_message": None,
            "current_leader": {"leader_id": ctx.node_id, "leader_epoch": 0},
        }
        if fetch:
            item.update(
                acknowledge_error_code=part["ack_error_code"],
                acknowledge_error_message=None,
                records=records.get((topic_id, index), b""),
                acquired_records=[
                    {"first_offset": a[0], "last_offset": a[1], "delivery_count": a[2]}
                    for a in part["acquired"]
                ],
            )
        topics.setdefault(topic_id, []).append(item)
    return [{"topic_id": t, "partitions": ps} for t, ps in topics.items()]


async def handle_share_acknowledge(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """ShareAcknowledge v1: apply the acknowledgement batches (one `share/fetch` call
    that acquires nothing); epoch -1 also closes the share session."""
    if not body.get("group_id") or not body.get("member_id"):
        return _session_error(ErrorCode.INVALID_REQUEST, "GroupId and MemberId are required")
    session = _session_for(body, fetch=False)
    if isinstance(session, dict):
        return {k: v for k, v in session.items() if k != "acquisition_lock_timeout_ms"}
    acks = _acks(body)
    closing = list(session.partitions) if session.epoch == -1 else []
    found = await ctx.topics.by_ids({t for t, _ in [*acks, *closing]})
    known = {
        k: info
        for k in dict.fromkeys([*acks, *closing])
        if (info := found.get(k[0])) is not None and 0 <= k[1] < info.partitions
    }
    result = await _store_call(ctx, body, known, acks, acquire=False, release=closing)
    answers: dict[Key, dict[str, Any]] = {}
    for k in acks:
        answers[k] = result.get(k) or {
            "error_code": int(ErrorCode.UNKNOWN_TOPIC_ID),
            "ack_error_code": int(ErrorCode.UNKNOWN_TOPIC_ID),
            "acquired": [],
        }
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "responses": _by_topic(ctx, answers, {}, fetch=False),
        "node_endpoints": [],
    }
