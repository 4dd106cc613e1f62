"""Group requests relayed from a client's front agent to the group's coordinator.

(A front stands in for a coordinator the client cannot be sent to: in another zone than
the one it names, in another agent group, or without a listener of its kind.)

A group's state lives in the memory of one agent, its coordinator (the holder of its
lease in the metadata store, `agents.groups.leases`), and
members of one group may run in several zones. A client that names its zone only knows
that zone's agents (Metadata), so FindCoordinator names the zone's *front* for the
group (`ring.front`); when the front is not the coordinator, it relays the client's
group requests — already authorized here — to the coordinator over the peer channel
and answers with the coordinator's answer. Only small group traffic crosses zones;
data never does. Requests naming several groups are split by coordinator and the
answers merged in request order.

The coordinator trusts a relayed request because the channel is signed with the
cluster's peer secret; it handles it as if received directly (and never relays it
again: `RELAYED`). A coordinator that cannot be reached gets the client a retriable
COORDINATOR_NOT_AVAILABLE, after which it looks the coordinator up again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

import msgspec

from agents.context import AgentContext
from agents.groups.ring import ListenerKind, Peer
from agents.metrics import Counter
from agents.peers.client import PeerError
from agents.security.session import connection_listener
from agents.zone_routing import client_zone
from core.kafka import ApiKey, RequestHeader
from core.kafka.errors import ErrorCode

log = logging.getLogger(__name__)

Handler = Callable[[AgentContext, RequestHeader, dict[str, Any]], Awaitable[dict[str, Any] | None]]

_RELAYS = Counter(
    "floe_group_relays_total",
    "Group requests this agent relayed to the group's coordinator, by API and outcome.",
    ("api", "outcome"),
)

RELAYED: ContextVar[bool] = ContextVar("floe_relayed", default=False)
# A JoinGroup or SyncGroup parks until the rebalance completes (its rebalance timeout);
# the relay waits that long plus this, and never more than MAX_RELAY_WAIT_S.
RELAY_SLACK_S = 5.0
MAX_RELAY_WAIT_S = 330.0
DEFAULT_RELAY_WAIT_S = 30.0

_SINGLE = frozenset(
    {
        ApiKey.JOIN_GROUP,
        ApiKey.SYNC_GROUP,
        ApiKey.HEARTBEAT,
        ApiKey.LEAVE_GROUP,
        ApiKey.OFFSET_COMMIT,
        ApiKey.OFFSET_DELETE,
        ApiKey.CONSUMER_GROUP_HEARTBEAT,
    }
)
# API -> (request list, how an item names its group, answer list)
_MULTI: dict[int, tuple[str, Callable[[Any], str], str]] = {
    ApiKey.DESCRIBE_GROUPS: ("groups", lambda item: item, "groups"),
    ApiKey.DELETE_GROUPS: ("groups_names", lambda item: item, "results"),
    ApiKey.CONSUMER_GROUP_DESCRIBE: ("group_ids", lambda item: item, "groups"),
}
_OFFSET_FETCH_BATCHED = ("groups", lambda item: item["group_id"], "groups")  # KIP-709, v8+
RELAYABLE = _SINGLE | set(_MULTI) | {ApiKey.OFFSET_FETCH}


class RelayRequest(msgspec.Struct, frozen=True):
    """What a front sends the coordinator: the client's request as it decoded it."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: dict[str, Any]


def _multi_spec(header: RequestHeader) -> tuple[str, Callable[[Any], str], str] | None:
    if header.api_key == ApiKey.OFFSET_FETCH:
        return _OFFSET_FETCH_BATCHED if header.api_version >= 8 else None
    return _MULTI.get(header.api_key)


def _group_ids(header: RequestHeader, body: dict[str, Any]) -> list[str]:
    spec = _multi_spec(header)
    if spec is not None:
        request_list, group_of, _ = spec
        return [group_of(item) for item in body.get(request_list) or ()]
    group_id = body.get("group_id")
    return [group_id] if group_id else []


async def _relay_target(
    ctx: AgentContext, group_id: str, zone: str | None, listener: ListenerKind | None
) -> Peer | None:
    """The coordinator (lease holder) to relay to, or None to handle the group here
    (this agent holds it, is not the client's front for it, or its holder is unknown:
    the handler then answers NOT_COORDINATOR and the client looks again)."""
    ring = ctx.groups.ring
    owner = await ctx.groups.coordinator_of(group_id)
    me = ring.me.agent_id
    if owner is None or owner.agent_id == me:
        return None
    if ring.front(group_id, zone, owner=owner, listener=listener).agent_id != me:
        return None
    return owner


def _wait_s(header: RequestHeader, body: dict[str, Any]) -> float:
    if header.api_key in (ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP):
        rebalance_ms = body.get("rebalance_timeout_ms") or body.get("session_timeout_ms") or 0
        if rebalance_ms > 0:
            return min(rebalance_ms / 1000 + RELAY_SLACK_S, MAX_RELAY_WAIT_S)
        return MAX_RELAY_WAIT_S if header.api_key == ApiKey.SYNC_GROUP else DEFAULT_RELAY_WAIT_S
    return DEFAULT_RELAY_WAIT_S


async def _call(
    ctx: AgentContext, owner: Peer, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """The coordinator's answer to `body`; raises `PeerError`."""
    payload = msgspec.msgpack.encode(
        RelayRequest(
            header.api_key, header.api_version, header.correlation_id, header.client_id, body
        )
    )
    api = ApiKey(header.api_key).name
    if ctx.peers is None:
        raise PeerError("no_channel", "this agent has no peer channel")
    try:
        raw = await ctx.peers.relay(owner, payload, _wait_s(header, body))
    except PeerError:
        _RELAYS.inc(1, api, "failed")
        raise
    _RELAYS.inc(1, api, "ok")
    try:
        answer = msgspec.msgpack.decode(raw)
    except msgspec.DecodeError as exc:
        raise PeerError("bad_answer", f"{owner.agent_id}: {exc}") from None
    if not isinstance(answer, dict):
        raise PeerError("bad_answer", f"{owner.agent_id}: the answer is not an object")
    return answer


def relaying(handler: Handler, error_response: Callable[..., dict[str, Any] | None]) -> Handler:
    """`handler`, relaying requests for groups another agent coordinates when this agent
    is the client zone's front for them. `error_response(header, body, code)` answers a
    request whose coordinator could not be reached."""

    async def run(
        ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
    ) -> dict[str, Any] | None:
        zone, listener = client_zone(header.client_id), connection_listener()
        if RELAYED.get() or ctx.peers is None:
            return await handler(ctx, header, body)
        if zone is None and ctx.groups.ring.sees_everyone(listener):
            return await handler(ctx, header, body)  # every coordinator is its own front
        ids = _group_ids(header, body)
        targets = {g: await _relay_target(ctx, g, zone, listener) for g in dict.fromkeys(ids)}
        if not any(targets.values()):
            return await handler(ctx, header, body)
        spec = _multi_spec(header)
        if spec is None:
            owner = targets[ids[0]]
            if owner is None:  # one group, so `any` above saw its target: not reached
                return await handler(ctx, header, body)
            try:
                return await _call(ctx, owner, header, body)
            except PeerError as exc:
                log.warning(
                    "relaying %s to %s failed: %s", ApiKey(header.api_key).name, owner.agent_id, exc
                )
                return error_response(header, body, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return await _split_and_merge(ctx, handler, header, body, spec, targets, error_response)

    run.__name__ = getattr(handler, "__name__", "relayed")
    return run


async def _split_and_merge(
    ctx: AgentContext,
    handler: Handler,
    header: RequestHeader,
    body: dict[str, Any],
    spec: tuple[str, Callable[[Any], str], str],
    targets: dict[str, Peer | None],
    error_response: Callable[..., dict[str, Any] | None],
) -> dict[str, Any] | None:
    request_list, group_of, answer_list = spec
    parts: dict[str | None, list[Any]] = {}
    owners: dict[str | None, Peer | None] = {}
    for item in body[request_list]:
        owner = targets[group_of(item)]
        key = owner.agent_id if owner else None
        parts.setdefault(key, []).append(item)
        owners[key] = owner

    async def answer_part(key: str | None, items: list[Any]) -> list[dict[str, Any]]:

        part = {**body, request_list: items}
        owner = owners[key]
        if owner is None:
            answer = await handler(ctx, header, part)
        else:
            try:
                answer = await _call(ctx, owner, header, part)
            except PeerError as exc:
                log.warning("relaying to %s failed: %s", owner.agent_id, exc)
                answer = error_response(header, part, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return list((answer or {}).get(answer_list) or ())

    answered = await asyncio.gather(*(answer_part(k, items) for k, items in parts.items()))
    by_group: dict[str, dict[str, Any]] = {}
    for entries in answered:
        for entry in entries:
            group_id = entry.get("group_id")
            if isinstance(group_id, str):
                by_group.setdefault(group_id, entry)
    merged = [by_group[group_of(item)] for item in body[request_list] if group_of(item) in by_group]
    return {"throttle_time_ms": 0, answer_list: merged}


async def handle_relayed(
    ctx: AgentContext,
    payload: bytes,
    handlers: dict[int, Handler],
    serves: Callable[[RequestHeader], bool],
) -> bytes:
    """Run a request a front relayed to this coordinator; the answer, msgpack-encoded.
    Raises ValueError for a payload that is not a relayable request at a version this
    agent serves."""
    try:
        request = msgspec.msgpack.decode(payload, type=RelayRequest)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ValueError(str(exc)) from None
    handler = handlers.get(request.api_key)
    if request.api_key not in RELAYABLE or handler is None:
        raise ValueError(f"api {request.api_key} is not relayed")
    header = RequestHeader(
        ApiKey(request.api_key), request.api_version, request.correlation_id, request.client_id
    )
    if not serves(header):
        raise ValueError(f"api {request.api_key} v{request.api_version} is not served here")
    token = RELAYED.set(True)
    try:
        answer = await handler(ctx, header, request.body)
    except (KeyError, TypeError) as exc:  # a body that does not fit the API
        raise ValueError(f"malformed body: {type(exc).__name__}: {exc}") from None
    finally:
        RELAYED.reset(token)
    return msgspec.msgpack.encode(answer)
