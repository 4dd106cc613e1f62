"""FindCoordinator and the group membership and admin APIs: JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, DescribeGroups, ListGroups, DeleteGroups, and KIP-848's
ConsumerGroupHeartbeat and ConsumerGroupDescribe (`agents.groups.consumer`).

FindCoordinator is answered by any agent — for a group, the holder of its lease in the
metadata store (`agents.groups.leases`; the answering agent takes a lease nobody holds);
every other group API is answered only by the lease holder and gets NOT_COORDINATOR
elsewhere, as on Kafka.
The state machine itself is `agents.groups.coordinator`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agents.context import AgentContext
from agents.control_plane import ControlPlaneError
from agents.groups.assignors import TopicPartition
from agents.groups.consumer import HeartbeatRequest, heartbeat_error
from agents.groups.consumer_state import GROUP_TYPE as CONSUMER_GROUP_TYPE
from agents.groups.consumer_state import ConsumerGroup, by_topic
from agents.groups.coordinator import JoinRequest, join_error, sync_error
from agents.groups.ring import GROUP_KEY, TRANSACTION_KEY
from agents.groups.state import GroupState
from agents.security.access import authorized_operations
from agents.security.session import connection_listener
from agents.zone_routing import client_zone
from core.kafka import RequestHeader
from core.kafka.errors import ErrorCode
from core.security.acl import ResourceType

_OPERATIONS_OMITTED = -(2**31)  # KIP-430
SHARE_GROUP_TYPE = "share"  # KIP-932 (agents/handlers/share.py)
# KIP-430: what a caller may do to a group — READ (3), DELETE (6), DESCRIBE (8).


# -- FindCoordinator ---------------------------------------------------------------------


async def _coordinator_of(
    ctx: AgentContext, key: str, key_type: int, client_id: str | None
) -> dict[str, Any]:
    if key_type not in (GROUP_KEY, TRANSACTION_KEY):
        return {
            "key": key,
            "node_id": -1,
            "host": "",
            "port": -1,
            "error_code": ErrorCode.INVALID_REQUEST,
            "error_message": f"unknown coordinator key type {key_type}",
        }
    if key_type == GROUP_KEY and key:
        owner = await ctx.groups.coordinator_of(key)
        if owner is None:
            return {
                "key": key,
                "node_id": -1,
                "host": "",
                "port": -1,
                "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
                "error_message": "the group's coordinator is not known yet",
            }
    else:
        owner = await ctx.groups.ring.resolve(key, key_type)
    # A client that names its zone only knows that zone's agents (Metadata), and any
    # client only those of its listener's kind: it is sent to its front for the key,
    # which relays to the owner (agents.groups.relay), at its address for that kind.
    listener = connection_listener()
    owner = ctx.groups.ring.front(key, client_zone(client_id), key_type, owner, listener=listener)
    owner = owner.at(listener)
    return {
        "key": key,
        "node_id": owner.node_id,
        "host": owner.host,
        "port": owner.port,
        "error_code": 0,
        "error_message": None,
    }


async def handle_find_coordinator(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka FindCoordinator v0–4 (v4 batches keys, KIP-699): a group's lease holder; a
    transactional id's highest rendezvous hash over the live agents."""
    key_type = body.get("key_type", GROUP_KEY)
    if header.api_version >= 4:  # the keys' lease lookups go out as one call
        found = await asyncio.gather(
            *(
                _coordinator_of(ctx, key, key_type, header.client_id)
                for key in body["coordinator_keys"]
            )
        )
        return {"throttle_time_ms": 0, "coordinators": list(found)}
    one = await _coordinator_of(ctx, body["key"], key_type, header.client_id)
    return {"throttle_time_ms": 0, **{k: v for k, v in one.items() if k != "key"}}


# -- JoinGroup, SyncGroup, Heartbeat, LeaveGroup -------------------------------------------


def _join_response(version: int, answer: dict[str, Any]) -> dict[str, Any]:
    if version < 7:  # the protocol name became nullable in v7
        answer = {**answer, "protocol_name": answer.get("protocol_name") or ""}
    return {"throttle_time_ms": 0, **answer}


async def handle_join_group(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka JoinGroup v0–9; parks until the rebalance completes."""
    version, group_id = header.api_version, body["group_id"]
    if not group_id:
        return _join_response(version, join_error(body["member_id"], ErrorCode.INVALID_GROUP_ID))
    if not await ctx.groups.owns(group_id):
        return _join_response(version, join_error(body["member_id"], ErrorCode.NOT_COORDINATOR))
    instance_id = body.get("group_instance_id") if version >= 5 else None
    request = JoinRequest(
        group_id=group_id,
        member_id=body["member_id"],
        group_instance_id=instance_id,
        protocol_type=body["protocol_type"],
        protocols=[(p["name"], bytes(p["metadata"])) for p in body["protocols"]],
        session_timeout_ms=body["session_timeout_ms"],
        rebalance_timeout_ms=body.get("rebalance_timeout_ms", -1) if version >= 1 else -1,
        client_id=header.client_id or "",
        client_host="",
        require_known_member_id=version >= 4 and instance_id is None,
        supports_skip_assignment=version >= 9,
        reason=body.get("reason"),
    )
    result = ctx.groups.join(request)
    answer = await result if isinstance(result, asyncio.Future) else result
    return _join_response(version, answer)


async def handle_sync_group(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka SyncGroup v0–5; followers park until the leader's assignment arrives."""
    group_id = body["group_id"]
    if not group_id:
        answer = sync_error(ErrorCode.INVALID_GROUP_ID)
    elif not await ctx.groups.owns(group_id):
        answer = sync_error(ErrorCode.NOT_COORDINATOR)
    else:
        result = ctx.groups.sync(
            group_id,
            body["generation_id"],
            body["member_id"],
            body.get("group_instance_id"),
            body.get("protocol_type"),
            body.get("protocol_name"),
            {a["member_id"]: bytes(a["assignment"]) for a in body["assignments"]},
        )
        answer = await result if isinstance(result, asyncio.Future) else result
    return {"throttle_time_ms": 0, **answer}


async def handle_heartbeat(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka Heartbeat v0–4: REBALANCE_IN_PROGRESS tells a member to rejoin."""
    group_id = body["group_id"]
    if not group_id:
        error = ErrorCode.INVALID_GROUP_ID
    elif not await ctx.groups.owns(group_id):
        error = ErrorCode.NOT_COORDINATOR
    else:
        error = ctx.groups.heartbeat(
            group_id, body["member_id"], body.get("group_instance_id"), body["generation_id"]
        )
    return {"throttle_time_ms": 0, "error_code": int(error)}


async def handle_leave_group(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka LeaveGroup v0–5; v3+ removes several members at once (KIP-345)."""
    version, group_id = header.api_version, body["group_id"]
    if version >= 3:
        identities = [(m["member_id"], m.get("group_instance_id")) for m in body["members"]]
    else:
        identities = [(body["member_id"], None)]
    results: list[tuple[str, str | None, ErrorCode]] = []
    if not group_id:
        top = ErrorCode.INVALID_GROUP_ID
    elif not await ctx.groups.owns(group_id):
        top = ErrorCode.NOT_COORDINATOR
    else:
        top, results = ctx.groups.leave(group_id, identities)
    if version < 3:
        if not top and results:
            top = results[0][2]
        return {"throttle_time_ms": 0, "error_code": int(top)}
    return {
        "throttle_time_ms": 0,
        "error_code": int(top),
        "members": [
            {"member_id": m, "group_instance_id": i, "error_code": int(e)} for m, i, e in results
        ],
    }


# -- DescribeGroups, ListGroups, DeleteGroups ----------------------------------------------


async def _stored_groups(
    ctx: AgentContext, group_ids: list[str] | None
) -> dict[str, dict[str, Any]]:
    """Groups the metadata store knows (committed offsets, reports), by id."""
    answer = await ctx.client.call("groups/list", {"group_ids": group_ids})
    return {g["group_id"]: g for g in answer["groups"]}


def _described(group_id: str, state: str, protocol_type: str, operations: int) -> dict[str, Any]:
    return {
        "error_code": 0,
        "group_id": group_id,
        "group_state": state,
        "protocol_type": protocol_type,
        "protocol_data": "",
        "members": [],
        "authorized_operations": operations,
    }


async def handle_describe_groups(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka DescribeGroups v0–5: members with metadata and assignments once Stable."""
    operations = _OPERATIONS_OMITTED
    described: dict[str, dict[str, Any]] = {}
    not_in_memory = []
    for group_id in body["groups"]:
        if not await ctx.groups.owns(group_id):
            described[group_id] = {
                **_described(group_id, "", "", operations),
                "error_code": ErrorCode.NOT_COORDINATOR,
            }
            continue
        consumer = ctx.groups.consumer.groups.get(group_id)
        if consumer is not None:
            described[group_id] = _described_consumer_group(consumer, operations)
            continue
        group = ctx.groups.groups.get(group_id)
        if group is None or not group.known:
            not_in_memory.append(group_id)
            continue
        stable = group.is_(GroupState.STABLE)
        entry = _described(group_id, group.state.value, group.protocol_type or "", operations)
        entry["protocol_data"] = (group.protocol_name or "") if stable else ""
        entry["members"] = [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_metadata": m.metadata(group.protocol_name or "") if stable else b"",
                "member_assignment": m.assignment if stable else b"",
            }
            for m in group.members.values()
        ]
        described[group_id] = entry
    if not_in_memory:
        try:
            stored = await _stored_groups(ctx, not_in_memory)
        except ControlPlaneError:
            stored = None
        for group_id in not_in_memory:
            if stored is None:
                described[group_id] = {
                    **_described(group_id, "", "", operations),
                    "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
                }
                continue
            known = stored.get(group_id)
            # Committed offsets and no members: Empty. Nothing at all: Dead, as Kafka
            # describes a group it has never heard of.
            if known is not None and known["has_offsets"]:
                described[group_id] = _described(
                    group_id, "Empty", known.get("protocol_type") or "", operations
                )
            else:
                described[group_id] = _described(group_id, "Dead", "", operations)
    if body.get("include_authorized_operations"):
        allowed = await authorized_operations(ctx, ResourceType.GROUP, list(described))
        for group_id, entry in described.items():
            entry["authorized_operations"] = allowed[group_id]
    return {"throttle_time_ms": 0, "groups": [described[g] for g in body["groups"]]}


def _described_consumer_group(group: ConsumerGroup, operations: int) -> dict[str, Any]:
    """DescribeGroups of a KIP-848 group, as Kafka answers it: the members without
    metadata or assignment bytes (ConsumerGroupDescribe has those)."""
    entry = _described(group.group_id, group.state.value, "consumer", operations)
    entry["protocol_data"] = group.assignor
    entry["members"] = [
        {
            "member_id": m.member_id,
            "group_instance_id": m.instance_id,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "member_metadata": b"",
            "member_assignment": b"",
        }
        for m in group.members.values()
    ]
    return entry


CLASSIC_GROUP_TYPE = "classic"


async def handle_list_groups(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka ListGroups v0–5: the groups this agent coordinates for the client — those
    whose lease it holds (one only committed to, by an assign-only consumer, as Empty
    right after the commit, as Kafka lists it), and those the metadata store knows whose last reporting
    coordinator (or, with none live, rendezvous choice) is this agent. Clients ask every
    broker of the Metadata answer and merge, so each group is listed by one agent; for a
    client that names its zone, by the zone's front for the group, with the state its
    coordinator last reported."""
    try:
        await ctx.groups.ring.check_all()
        stored = await _stored_groups(ctx, None)
    except ControlPlaneError:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
    ring, zone = ctx.groups.ring, client_zone(header.client_id)
    listener = connection_listener()
    me = ring.me.agent_id
    held = {g.group_id: g for g in ctx.groups.listing()}
    consumers = {g.group_id: g for g in ctx.groups.consumer.listing()}
    listed: dict[str, tuple[str, str, str]] = {}
    for group_id, known in stored.items():
        if group_id in held or group_id in consumers:
            continue
        group_type = known.get("group_type") or CLASSIC_GROUP_TYPE
        reporter = ring.peer(known.get("agent_id") or "")
        owner = reporter or ring.owner(group_id)
        if group_id in ctx.groups.groups:  # our lease, nobody joined: offsets only
            if (
                known["has_offsets"]
                and ring.front(group_id, zone, owner=ring.me, listener=listener).agent_id == me
            ):
                listed[group_id] = (known.get("protocol_type") or "", "Empty", group_type)
            continue
        if owner.agent_id == me and reporter is not None:
            continue  # reported by us, but no longer ours: its new holder lists it
        if ring.front(group_id, zone, owner=owner, listener=listener).agent_id != me:
            continue
        if zone is None and reporter is None:
            if known["has_offsets"]:
                listed[group_id] = (known.get("protocol_type") or "", "Empty", group_type)
        elif known["has_offsets"] or known.get("agent_id"):
            state = known.get("state") or "Empty"
            listed[group_id] = (known.get("protocol_type") or "", state, group_type)
    for group in held.values():
        if ring.front(group.group_id, zone, owner=ring.me, listener=listener).agent_id == me:
            listed[group.group_id] = (
                group.protocol_type or "",
                group.state.value,
                CLASSIC_GROUP_TYPE,
            )
    for consumer in consumers.values():
        if ring.front(consumer.group_id, zone, owner=ring.me, listener=listener).agent_id == me:
            listed[consumer.group_id] = ("consumer", consumer.state.value, CONSUMER_GROUP_TYPE)
    # KIP-932 share groups live in the store: each listed by the agent its id hashes to.
    try:
        shares = (await ctx.client.call("share/groups/list", {}))["groups"]
    except ControlPlaneError:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
    for share in shares:
        group_id = share["group_id"]
        if group_id not in listed and ring.front(group_id, zone, listener=listener).agent_id == me:
            listed[group_id] = ("share", share["state"], SHARE_GROUP_TYPE)
    wanted = {s.lower() for s in body.get("states_filter") or ()}
    types = {t.lower() for t in body.get("types_filter") or ()}  # KIP-848's group types
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "groups": [
            {
                "group_id": group_id,
                "protocol_type": protocol_type,
                "group_state": state,
                "group_type": group_type,
            }
            for group_id, (protocol_type, state, group_type) in sorted(listed.items())
            if (not wanted or state.lower() in wanted) and (not types or group_type in types)
        ],
    }


async def handle_delete_groups(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka DeleteGroups v0–2: only groups without members; their offsets go too."""
    results: dict[str, int] = {}
    deletable: dict[str, bool] = {}  # group id -> it was in this agent's memory
    try:  # KIP-932 share groups first: any agent deletes them (their state is the store's)
        shares = await ctx.client.call("share/groups/delete", {"group_ids": body["groups_names"]})
    except ControlPlaneError:
        shares = {"groups": []}
    for item in shares["groups"]:
        if item["error_code"] != ErrorCode.GROUP_ID_NOT_FOUND:
            results[item["group_id"]] = item["error_code"]
    for group_id in body["groups_names"]:
        if group_id in results:
            continue
        if not await ctx.groups.owns(group_id):
            results[group_id] = ErrorCode.NOT_COORDINATOR
            continue
        error, was_here = ctx.groups.delete(group_id)
        if error is not None:
            results[group_id] = error
        else:
            deletable[group_id] = was_here
    if deletable:
        try:
            answer = await ctx.client.call("groups/delete", {"group_ids": list(deletable)})
            for item in answer["groups"]:
                code = item["error_code"]
                if code == ErrorCode.GROUP_ID_NOT_FOUND and deletable.get(item["group_id"]):
                    code = 0  # it lived in memory only: never committed
                results[item["group_id"]] = code
        except ControlPlaneError:
            for group_id in deletable:
                results[group_id] = ErrorCode.COORDINATOR_NOT_AVAILABLE
    return {
        "throttle_time_ms": 0,
        "results": [
            {"group_id": g, "error_code": int(results.get(g, 0))} for g in body["groups_names"]
        ],
    }


# -- ConsumerGroupHeartbeat, ConsumerGroupDescribe (KIP-848) ------------------------------


def _heartbeat_response(answer: dict[str, Any]) -> dict[str, Any]:
    return {"throttle_time_ms": 0, **answer}


async def handle_consumer_group_heartbeat(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """KIP-848 ConsumerGroupHeartbeat v0–1: join, heartbeat with the owned partitions,
    leave (member epoch -1); the coordinator answers the member's epoch and assignment."""
    group_id = body["group_id"]
    if not group_id:
        return _heartbeat_response(heartbeat_error(ErrorCode.INVALID_GROUP_ID))
    if not await ctx.groups.owns(group_id):
        return _heartbeat_response(heartbeat_error(ErrorCode.NOT_COORDINATOR))
    owned = body.get("topic_partitions")
    request = HeartbeatRequest(
        group_id=group_id,
        member_id=body["member_id"],
        member_epoch=body["member_epoch"],
        instance_id=body.get("instance_id"),
        rack_id=body.get("rack_id"),
        rebalance_timeout_ms=body.get("rebalance_timeout_ms", -1),
        topic_names=body.get("subscribed_topic_names"),
        topic_regex=body.get("subscribed_topic_regex"),
        server_assignor=body.get("server_assignor"),
        owned=None
        if owned is None
        else {(str(t["topic_id"]), p) for t in owned for p in t["partitions"]},
        client_id=header.client_id or "",
        version=header.api_version,
    )

    async def lookup(names: set[str], everything: bool) -> dict[str, Any]:
        found = dict(await ctx.topics.by_names(names)) if names else {}
        if everything:
            found.update((t.name, t) for t in await ctx.topics.all_topics())
        return found

    return _heartbeat_response(await ctx.groups.consumer.heartbeat(request, lookup))


def _described_partitions(group: ConsumerGroup, partitions: set[TopicPartition]) -> dict[str, Any]:
    names = {topic_id: name for name, (topic_id, _) in (group.topics or {}).items()}
    return {
        "topic_partitions": [
            {"topic_id": topic_id, "topic_name": names.get(topic_id, ""), "partitions": ps}
            for topic_id, ps in by_topic(partitions).items()
        ]
    }


def _consumer_group_description(group: ConsumerGroup, operations: int) -> dict[str, Any]:
    return {
        "error_code": 0,
        "error_message": None,
        "group_id": group.group_id,
        "group_state": group.state.value,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignor_name": group.assignor,
        "members": [
            {
                "member_id": m.member_id,
                "instance_id": m.instance_id,
                "rack_id": m.rack_id,
                "member_epoch": m.member_epoch,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "subscribed_topic_names": m.topic_names,
                "subscribed_topic_regex": m.topic_regex,
                "assignment": _described_partitions(group, m.assigned),
                "target_assignment": _described_partitions(
                    group, group.target.get(m.member_id, set())
                ),
            }
            for m in group.members.values()
        ],
        "authorized_operations": operations,
    }


def _describe_error(group_id: str, error: int, message: str | None = None) -> dict[str, Any]:
    return {
        "error_code": int(error),
        "error_message": message,
        "group_id": group_id,
        "group_state": "",
        "group_epoch": -1,
        "assignment_epoch": -1,
        "assignor_name": "",
        "members": [],
        "authorized_operations": _OPERATIONS_OMITTED,
    }


async def handle_consumer_group_describe(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """KIP-848 ConsumerGroupDescribe v0: members with their epochs, subscriptions,
    assignments and targets. A classic group, or one nobody knows, is GROUP_ID_NOT_FOUND
    (admin clients then describe it with DescribeGroups)."""
    described: dict[str, dict[str, Any]] = {}
    for group_id in body["group_ids"]:
        if not group_id:
            described[group_id] = _describe_error(group_id, ErrorCode.INVALID_GROUP_ID)
        elif not await ctx.groups.owns(group_id):
            described[group_id] = _describe_error(group_id, ErrorCode.NOT_COORDINATOR)
        else:
            group = ctx.groups.consumer.groups.get(group_id)
            if group is None:
                described[group_id] = _describe_error(
                    group_id,
                    ErrorCode.GROUP_ID_NOT_FOUND,
                    f"Group {group_id} is not a consumer group.",
                )
            else:
                described[group_id] = _consumer_group_description(group, _OPERATIONS_OMITTED)
    if body.get("include_authorized_operations"):
        found = [g for g, entry in described.items() if not entry["error_code"]]
        if found:
            allowed = await authorized_operations(ctx, ResourceType.GROUP, found)
            for group_id in found:
                described[group_id]["authorized_operations"] = allowed[group_id]
    return {"throttle_time_ms": 0, "groups": [described[g] for g in body["group_ids"]]}
