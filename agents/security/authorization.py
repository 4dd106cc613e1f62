"""The ACL check in front of every handler: one place, Kafka's rules and error codes.

`authorized_call(handler, ctx, header, body)` is what the dispatcher runs instead of
the handler. When the cluster's `acls_enabled` is off (and the session is not a read-only
SASL user) or the session is a superuser, it is just the handler. Otherwise the API's
rule splits the request as Kafka's KafkaApis does: the parts the principal may touch go
to the handler, the rest is answered right here with TOPIC_AUTHORIZATION_FAILED (29),
GROUP_AUTHORIZATION_FAILED (30), CLUSTER_AUTHORIZATION_FAILED (31) or
TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53), and both are merged into one response.
Handlers never see what they are not allowed to act on, and need no ACL code of their own.

Which operation each API needs is Kafka's (docs "Operations and Resources on Protocols"):
Produce WRITE topic, Fetch READ topic, Metadata/ListOffsets/OffsetForLeaderEpoch DESCRIBE
topic (unlisted when not describable), CreateTopics CREATE cluster-or-topic, DeleteTopics
and DeleteRecords DELETE topic, CreatePartitions ALTER topic, Describe/AlterConfigs
DESCRIBE_CONFIGS/ALTER_CONFIGS, consumer-group APIs READ/DESCRIBE/DELETE group (and READ
topic for offsets; share groups' offsets: Describe DESCRIBE group and topic, Alter READ
group and topic, Delete DELETE group and READ topic), ACL APIs DESCRIBE/ALTER cluster. An API without a rule needs ALTER on
the cluster: deny by default.

A read-only SASL user may only READ, DESCRIBE and DESCRIBE_CONFIGS, whatever the ACLs say
and even with ACLs off.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from agents.context import AgentContext
from agents.handlers.errors import CloseConnection, error_response
from agents.security.access import Access
from agents.security.session import CURRENT_SESSION
from core.kafka import ApiKey, RequestHeader
from core.kafka.codec import EncodedResponse
from core.kafka.error_answers import error_entries
from core.kafka.errors import ErrorCode
from core.kafka.types import ZERO_UUID
from core.security.acl import AclOperation, Authorizer, ResourceType

Handler = Callable[[AgentContext, RequestHeader, dict[str, Any]], Awaitable[dict[str, Any] | None]]
Call = Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]]

OPEN_APIS = frozenset(
    {
        ApiKey.API_VERSIONS,
        ApiKey.SASL_HANDSHAKE,
        ApiKey.SASL_AUTHENTICATE,
        ApiKey.DESCRIBE_CLUSTER,  # Kafka checks nothing unless authorized operations are asked
    }
)

OP = AclOperation
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
CLUSTER, TXN = ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
TXN_DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
_MESSAGES: dict[int, str] = {
    TOPIC_DENIED: "Topic authorization failed.",
    GROUP_DENIED: "Group authorization failed.",
    CLUSTER_DENIED: "Cluster authorization failed.",
    TXN_DENIED: "Transactional Id authorization failed.",
}
_RESOURCE_TOPIC, _RESOURCE_BROKER, _RESOURCE_BROKER_LOGGER = 2, 4, 8  # config resource types
_RESOURCE_GROUP = 32


async def authorized_call(
    handler: Handler, ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any] | None:
    """Run `handler` on what the current session may do; answer the rest as denied."""
    session = CURRENT_SESSION.get()
    if session is None or session.superuser or header.api_key in OPEN_APIS:
        return await handler(ctx, header, body)
    acls_enabled = bool(ctx.cluster_config.get("acls_enabled"))
    if not acls_enabled and not session.read_only:
        return await handler(ctx, header, body)
    authorizer = None
    if acls_enabled:
        cache = session.security.acls
        authorizer = await cache.authorizer() if cache is not None else Authorizer(())
    access = Access(session, authorizer)
    call = partial(handler, ctx, header)
    rule = RULES.get(header.api_key)
    if rule is None:
        if access.cluster(OP.ALTER):
            return await call(body)
        return _denied_without_rule(header, body)
    return await rule(access, ctx, header, body, call)


def _denied_without_rule(header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
    return _denied(header, body, CLUSTER_DENIED)


def _denied(
    header: RequestHeader, body: dict[str, Any], error: int, message: str | None = None
) -> dict[str, Any]:
    """The whole request denied: the error answer (`core.kafka.error_answers`)."""
    response = error_response(header, body, error, message)
    if response is None:
        raise CloseConnection(f"api {header.api_key}: not authorized and no error response")
    return response


def _entries(
    header: RequestHeader,
    request: dict[str, Any],
    array: str,
    error: int,
    message: str | None = None,
) -> list[dict[str, Any]]:
    """The answer's entries for the denied parts in `request` (a request holding only
    them), as the error answer builds them (`core.kafka.error_answers`)."""
    return error_entries(header.api_key, header.api_version, request, array, error, message)


def _denied_topics(
    header: RequestHeader,
    topics: list[dict[str, Any]],
    keep: list[bool],
    array: str = "topics",
    message: str | None = None,
    *,
    error: int = TOPIC_DENIED,
) -> list[dict[str, Any]]:
    """The answer's entries for the request's `topics` not kept."""
    refused = [t for t, ok in zip(topics, keep, strict=True) if not ok]
    return _entries(header, {"topics": refused}, array, error, message)


# --- helpers ---------------------------------------------------------------------------


async def _split(
    body: dict[str, Any],
    key: str,
    keep: list[bool],
    call: Call,
    response_key: str,
    denied: list[dict[str, Any]],
) -> dict[str, Any] | None:
    """Call the handler with the kept items of `body[key]`; append `denied` to its answer."""
    if all(keep):
        return await call(body)
    kept = [item for item, ok in zip(body[key], keep, strict=True) if ok]
    response = await call({**body, key: kept})
    if response is None:  # acks=0
        return None
    response[response_key] = [*response.get(response_key, []), *denied]
    return response


async def _topic_names(
    ctx: AgentContext, items: list[dict[str, Any]], name_key: str, id_key: str | None
) -> list[str | None]:
    """Each item's topic name, looking ids up where the request names topics by id."""
    ids = [
        topic_id
        for item in items
        if id_key
        and not item.get(name_key)
        and isinstance(topic_id := item.get(id_key), uuid.UUID)
        and topic_id != ZERO_UUID
    ]
    by_id = await ctx.topics.by_ids(ids) if ids else {}
    names: list[str | None] = []
    for item in items:
        name = item.get(name_key)
        if not name and id_key and isinstance(topic_id := item.get(id_key), uuid.UUID):
            topic = by_id.get(topic_id)
            name = topic.name if topic else None
        names.append(name or None)
    return names


# --- data ------------------------------------------------------------------------------


async def _produce(
    access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
) -> dict[str, Any] | None:
    topics = body["topic_data"]
    transactional_id = body.get("transactional_id")
    if transactional_id and not access.allows(OP.WRITE, TXN, transactional_id):
        keep, error = [False] * len(topics), TXN_DENIED
    else:
        names = await _topic_names(ctx, topics, "name", "topic_id")
        keep, error = [access.topic(OP.WRITE, n) for n in names], TOPIC_DENIED
    refused = [t for t, ok in zip(topics, keep, strict=True) if not ok]
    denied = _entries(header, {"topic_data": refused}, "responses", error, _MESSAGES[error])
    return await _split(body, "topic_data", keep, call, "responses", denied)


async def _fetch(
    access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
) -> dict[str, Any] | None:
    topics = body["topics"]
    names = await _topic_names(ctx, topics, "topic", "topic_id")
    keep = [access.topic(OP.READ, n) for n in names]
    if all(keep):
        return await call(body)
    refused = [
        {**t, "topic": name} for t, name, ok in zip(topics, names, keep, strict=True) if not ok
    ]
    denied = _entries(header, {"topics": refused}, "responses", TOPIC_DENIED)

    async def answer_as_dict(kept: dict[str, Any]) -> dict[str, Any] | None:
        # A shared answer (agents.shared_answers) is bytes; the denied topics join a dict.
        response = await call(kept)
        return response.decoded(header) if isinstance(response, EncodedResponse) else response

    return await _split(body, "topics", keep, answer_as_dict, "responses", denied)


async def _list_offsets(
    access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
) -> dict[str, Any] | None:
    topics = body["topics"]
    keep = [access.topic(OP.DESCRIBE, t["name"]) for t in topics]
    return await _split(body, "topics", keep, call, "topics", _denied_topics(header, topics, keep))


async def _offset_for_leader_epoch(
    access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
) -> dict[str, Any] | None:
    topics = body["topics"]
    keep = [access.topic(OP.DESCRIBE, t["topic"]) for t in topics]
    return await _split(body, "topics", keep, call, "topics", _denied_topics(header, topics, keep))


async def _delete_records(
    access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
) -> dict[str, Any] | None:
    topics = body["topics"]
    keep = [access.topic(OP.DELETE, t["name"]) for t in topics]
    return await _split(body, "topics", keep, call, "topics", _denied_topics(header, topics, keep))


async def _init_producer_id(
    access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
) -> dict[str, Any] | None:
    transactional_id = body.get("transactional_id")
    if transactional_id:
        allowed, error = access.allows(OP.WRITE, TXN, transactional_id), TXN_DENIED
    else:
        # Idempotent producers: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic
        # (Kafka 2.8+, KIP-679).
        allowed = access.cluster(OP.IDEMPOTENT_WRITE) or access.any_resource(OP.WRITE, TOPIC)
        error = CLUSTER_DENIED
    if allowed:
        return await call(body)
    return _denied(header, body, error)


# --- metadata and topic administration -------------------------------------------------


def _metadata_denied(
    header: RequestHeader, name: str | None, topic_id: Any, error: int
) -> dict[str, Any]:
    topic = {"name": name, "topic_id": topic_id if topic_id is not None else ZERO_UUID}
    return _entries(header, {"topics": [topic]}, "topics", error)[0]


async def _metadata(
    access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
) -> dict[str, Any] | None:
    requested = body.get("topics")
    if requested is None or (header.api_version == 0 and not requested):
        # All topics: list only the describable ones (Kafka's filterByAuthorized).
        response = await call(body)
        if response is None:
            return None
        response["topics"] = [
            t for t in response.get("topics", []) if access.topic(OP.DESCRIBE, t.get("name"))
        ]
        return response
    names = await _topic_names(ctx, requested, "name", "topic_id")
    kept, denied = [], []
    for item, name in zip(requested, names, strict=True):
        if access.topic(OP.DESCRIBE, name):
            kept.append(item)
        else:
            denied.append(
                _metadata_denied(header, item.get("name"), item.get("topic_id"), TOPIC_DENIED)
            )
    # Auto-creation needs CREATE on the cluster or the topic: a missing topic the principal
    # cannot create is answered as Kafka does, with TOPIC_AUTHORIZATION_FAILED.
    if kept and body.get("allow_auto_topic_creation", True) and ctx.auto_create_topics:
        wanted = [i["name"] for i in kept if i.get("name")]
        existing = await ctx.topics.by_names(wanted) if wanted else {}
        may_create_all = access.cluster(OP.CREATE)
        still = []
        for item in kept:
            name = item.get("name")
            if (
                name
                and existing.get(name) is None
                and not may_create_all
                and not access.allows(OP.CREATE, TOPIC, name)
            ):
                denied.append(_metadata_denied(header, name, item.get("topic_id"), TOPIC_DENIED))
            else:
                still.append(item)
        kept = still
    if not denied:
        return await call(body)
    if kept or header.api_version > 0:  # v0: an empty list would mean "all topics"
        response = await call({**body, "topics": kept})
    else:
        response = await call({**body, "topics": None})
        if response is not None:
            response["topics"] = []
    if response is None:
        return None
    response["topics"] = [*response.get("topics", []), *denied]
    return response


async def _create_topics(
    access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
) -> dict[str, Any] | None:
    topics = body["topics"]
    may_create_all = access.cluster(OP.CREATE)
    keep = [may_create_all or access.allows(OP.CREATE, TOPIC, t["name"]) for t in topics]
    denied = _denied_topics(header, topics, keep, "topics", _MESSAGES[TOPIC_DENIED])
    return await _split(body, "topics", keep, call, "topics", denied)


async def _delete_topics(
    access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
) -> dict[str, Any] | None:
    if header.api_version < 6:
        names = list(body["topic_names"])
        keep = [access.topic(OP.DELETE, n) for n in names]
        refused = [n for n, ok in zip(names, keep, strict=True) if not ok]
        denied = _entries(
            header, {"topic_names": refused}, "responses", TOPIC_DENIED, _MESSAGES[TOPIC_DENIED]
        )
        return await _split(body, "topic_names", keep, call, "responses", denied)
    topics = body["topics"]
    names = await _topic_names(ctx, topics, "name", "topic_id")
    keep = [access.topic(OP.DELETE, n) for n in names]
    refused = [
        {"name": name, "topic_id": t.get("topic_id") or ZERO_UUID}
        for t, name, ok in zip(topics, names, keep, strict=True)
        if not ok
    ]
    denied = _entries(
        header, {"topics": refused}, "responses", TOPIC_DENIED, _MESSAGES[TOPIC_DENIED]
    )
    return await _split(body, "topics", keep, call, "responses", denied)


async def _create_partitions(
    access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
) -> dict[str, Any] | None:
    topics = body["topics"]
    keep = [access.topic(OP.ALTER, t["name"]) for t in topics]
    denied = _denied_topics(header, topics, keep, "results", _MESSAGES[TOPIC_DENIED])
    return await _split(body, "topics", keep, call, "results", denied)


def _config_rule(operation: AclOperation, response_key: str) -> Rule:
    async def rule(
        access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
    ) -> dict[str, Any] | None:
        resources = body["resources"]
        keep, denied = [], []
        error: int
        for r in resources:
            kind = r["resource_type"]
            if kind == _RESOURCE_TOPIC:
                ok, error = access.topic(operation, r["resource_name"]), TOPIC_DENIED
            elif kind in (_RESOURCE_BROKER, _RESOURCE_BROKER_LOGGER):
                ok, error = access.cluster(operation), CLUSTER_DENIED
            elif kind == _RESOURCE_GROUP:
                ok, error = access.allows(operation, GROUP, r["resource_name"]), GROUP_DENIED
            else:
                ok, error = True, 0  # the handler refuses unknown resource types
            keep.append(ok)
            if not ok:
                denied += _entries(
                    header, {"resources": [r]}, response_key, error, _MESSAGES[error]
                )
        return await _split(body, "resources", keep, call, response_key, denied)

    return rule


# --- consumer groups -------------------------------------------------------------------


def _whole_group(operation: AclOperation) -> Rule:
    """JoinGroup, SyncGroup, Heartbeat, LeaveGroup: one group, all or nothing."""

    async def rule(
        access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
    ) -> dict[str, Any] | None:
        if access.allows(operation, GROUP, body["group_id"]):
            return await call(body)
        return _denied(header, body, GROUP_DENIED)

    return rule


async def _find_coordinator(
    access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
) -> dict[str, Any] | None:
    def check(key: str) -> int:
        if body.get("key_type", 0) == 1:
            return 0 if access.allows(OP.DESCRIBE, TXN, key) else TXN_DENIED
        return 0 if access.allows(OP.DESCRIBE, GROUP, key) else GROUP_DENIED

    if header.api_version < 4:
        error = check(body["key"])
        if not error:
            return await call(body)
        return _denied(header, body, error, _MESSAGES[error])
    keys = list(body["coordinator_keys"])
    errors = [check(k) for k in keys]
    denied = [
        entry
        for k, e in zip(keys, errors, strict=True)
        if e
        for entry in _entries(header, {"coordinator_keys": [k]}, "coordinators", e, _MESSAGES[e])
    ]
    return await _split(
        body, "coordinator_keys", [not e for e in errors], call, "coordinators", denied
    )


async def _offset_commit(
    access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
) -> dict[str, Any] | None:
    topics = body["topics"]
    if not access.allows(OP.READ, GROUP, body["group_id"]):
        keep, error = [False] * len(topics), GROUP_DENIED
    else:
        keep, error = [access.topic(OP.READ, t["name"]) for t in topics], TOPIC_DENIED
    denied = _denied_topics(header, topics, keep, error=error)
    return await _split(body, "topics", keep, call, "topics", denied)


def _fetched_denied(
    header: RequestHeader, topics: list[dict[str, Any]], error: int
) -> list[dict[str, Any]]:
    """OffsetFetch's entries for the denied topics (of a v8+ group, or the request)."""
    if header.api_version < 8:
        return _entries(header, {"topics": topics}, "topics", error)
    group = {"group_id": "", "topics": topics}
    entries: list[dict[str, Any]] = _entries(header, {"groups": [group]}, "groups", error)[0][
        "topics"
    ]
    return entries


async def _offset_fetch(
    access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
) -> dict[str, Any] | None:
    """OffsetFetch: DESCRIBE on the group; explicitly asked topics need DESCRIBE (29 each),
    an all-topics answer drops the ones the principal cannot describe (Kafka does both)."""
    if header.api_version < 8:
        group_id = body["group_id"]
        topics = body.get("topics")
        if not access.allows(OP.DESCRIBE, GROUP, group_id):
            if header.api_version >= 2:
                return _denied(header, body, GROUP_DENIED)
            return {"topics": _fetched_denied(header, topics or [], GROUP_DENIED)}
        if topics is None:
            response = await call(body)
            if response is not None:
                response["topics"] = [
                    t for t in response.get("topics", []) if access.topic(OP.DESCRIBE, t["name"])
                ]
            return response
        keep = [access.topic(OP.DESCRIBE, t["name"]) for t in topics]
        refused = [t for t, ok in zip(topics, keep, strict=True) if not ok]
        denied = _fetched_denied(header, refused, TOPIC_DENIED)
        return await _split(body, "topics", keep, call, "topics", denied)

    # v8+: many groups per request.
    groups = body["groups"]
    kept_groups, denied_groups = [], []
    asked: dict[str, list[dict[str, Any]]] = {}  # group → denied topic entries
    for group in groups:
        if not access.allows(OP.DESCRIBE, GROUP, group["group_id"]):
            denied_groups.append(group)
            continue
        topics = group.get("topics")
        if topics is not None:
            allowed = [t for t in topics if access.topic(OP.DESCRIBE, t.get("name"))]
            refused = [t for t in topics if t not in allowed]
            asked[group["group_id"]] = _fetched_denied(header, refused, TOPIC_DENIED)
            group = {**group, "topics": allowed}
        kept_groups.append(group)
    response = await call({**body, "groups": kept_groups}) if kept_groups else {"groups": []}
    if response is None:
        return None
    for group in response.get("groups", []):
        extra = asked.get(group.get("group_id"))
        if extra is None:  # all topics were asked for: hide the undescribable ones
            group["topics"] = [
                t for t in group.get("topics", []) if access.topic(OP.DESCRIBE, t.get("name"))
            ]
        else:
            group["topics"] = [*group.get("topics", []), *extra]
    response["groups"] = [*response.get("groups", []), *_denied_groups(header, denied_groups)]
    response.setdefault("throttle_time_ms", 0)
    return response


def _denied_groups(
    header: RequestHeader, groups: list[dict[str, Any]], message: str | None = None
) -> list[dict[str, Any]]:
    """The entries of groups denied as a whole (OffsetFetch v8+, DescribeShareGroupOffsets):
    the error answer's, no topics."""
    if not groups:
        return []
    entries: list[dict[str, Any]] = _denied(header, {"groups": groups}, GROUP_DENIED, message)[
        "groups"
    ]
    return entries


async def _describe_groups(
    access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
) -> dict[str, Any] | None:
    groups = list(body["groups"])
    keep = [access.allows(OP.DESCRIBE, GROUP, g) for g in groups]
    refused = [g for g, ok in zip(groups, keep, strict=True) if not ok]
    denied = _entries(header, {"groups": refused}, "groups", GROUP_DENIED)
    return await _split(body, "groups", keep, call, "groups", denied)


async def _share_records(
    access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
) -> dict[str, Any] | None:
    """ShareFetch, ShareAcknowledge (KIP-932): READ on the group and on every topic named
    (a denied topic denies the request: its partitions share the session)."""
    from_group = access.allows(OP.READ, GROUP, body.get("group_id") or "")
    names = await _topic_names(ctx, body.get("topics") or [], "topic", "topic_id")
    error = 0 if from_group else GROUP_DENIED
    if not error and not all(access.topic(OP.READ, n) for n in names):
        error = TOPIC_DENIED
    if not error:
        return await call(body)
    return _denied(header, body, error)


async def _describe_share_group_offsets(
    access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
) -> dict[str, Any] | None:
    """DescribeShareGroupOffsets: DESCRIBE on each group; named topics need DESCRIBE (29
    on each of their partitions), an all-topics answer drops the undescribable ones
    (Kafka does both, as for OffsetFetch)."""
    kept, denied_groups = [], []
    asked: dict[str, list[dict[str, Any]]] = {}  # group → denied topic entries
    for group in body["groups"]:
        group_id = group["group_id"]
        if not access.allows(OP.DESCRIBE, GROUP, group_id):
            denied_groups.append(group)
            continue
        topics = group.get("topics")
        if topics is not None:
            allowed = [t for t in topics if access.topic(OP.DESCRIBE, t["topic_name"])]
            refused = {"group_id": group_id, "topics": [t for t in topics if t not in allowed]}
            asked[group_id] = _entries(
                header, {"groups": [refused]}, "groups", TOPIC_DENIED, _MESSAGES[TOPIC_DENIED]
            )[0]["topics"]
            group = {**group, "topics": allowed}
        kept.append(group)
    response = await call({**body, "groups": kept}) if kept else {"groups": []}
    if response is None:
        return None
    for group in response.get("groups", []):
        extra = asked.get(group["group_id"])
        if extra is None:
            group["topics"] = [
                t for t in group.get("topics", []) if access.topic(OP.DESCRIBE, t["topic_name"])
            ]
        else:
            group["topics"] = [*group.get("topics", []), *extra]
    denied = _denied_groups(header, denied_groups, _MESSAGES[GROUP_DENIED])
    response["groups"] = [*response.get("groups", []), *denied]
    response.setdefault("throttle_time_ms", 0)
    return response


def _share_offsets_change(group_operation: AclOperation) -> Rule:
    """AlterShareGroupOffsets (READ on the group), DeleteShareGroupOffsets (DELETE): a
    top-level GROUP_AUTHORIZATION_FAILED, else READ on each topic (29 for each denied
    one's partitions, or the topic). Nothing left to change: the store is not asked."""

    async def rule(
        access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
    ) -> dict[str, Any] | None:
        if not access.allows(group_operation, GROUP, body["group_id"]):
            return error_response(header, body, GROUP_DENIED, _MESSAGES[GROUP_DENIED])
        topics = body["topics"]
        keep = [access.topic(OP.READ, t["topic_name"]) for t in topics]
        refused = [t for t, ok in zip(topics, keep, strict=True) if not ok]
        denied = _entries(
            header, {"topics": refused}, "responses", TOPIC_DENIED, _MESSAGES[TOPIC_DENIED]
        )
        if topics and not any(keep):
            return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
                    "responses": denied}  # fmt: skip
        return await _split(body, "topics", keep, call, "responses", denied)

    return rule


async def _consumer_group_describe(
    access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
) -> dict[str, Any] | None:
    groups = list(body["group_ids"])
    keep = [access.allows(OP.DESCRIBE, GROUP, g) for g in groups]
    refused = [g for g, ok in zip(groups, keep, strict=True) if not ok]
    denied = _entries(header, {"group_ids": refused}, "groups", GROUP_DENIED)
    return await _split(body, "group_ids", keep, call, "groups", denied)


async def _list_groups(
    access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
) -> dict[str, Any] | None:
    response = await call(body)
    if response is not None and not access.cluster(OP.DESCRIBE):
        response["groups"] = [
            g
            for g in response.get("groups", [])
            if access.allows(OP.DESCRIBE, GROUP, g["group_id"])
        ]
    return response


async def _delete_groups(
    access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
) -> dict[str, Any] | None:
    groups = list(body["groups_names"])
    keep = [access.allows(OP.DELETE, GROUP, g) for g in groups]
    refused = [g for g, ok in zip(groups, keep, strict=True) if not ok]
    denied = _entries(header, {"groups_names": refused}, "results", GROUP_DENIED)
    return await _split(body, "groups_names", keep, call, "results", denied)


async def _offset_delete(
    access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
) -> dict[str, Any] | None:
    if not access.allows(OP.DELETE, GROUP, body["group_id"]):
        return _denied(header, body, GROUP_DENIED)
    topics = body["topics"]
    keep = [access.topic(OP.READ, t["name"]) for t in topics]
    return await _split(body, "topics", keep, call, "topics", _denied_topics(header, topics, keep))


# --- ACLs --------------------------------------------------------------------------------


def _cluster_describe(listed: str) -> Rule:
    """DESCRIBE on the cluster, else a top-level CLUSTER_AUTHORIZATION_FAILED with an
    empty `listed` (DescribeAcls' resources, DescribeUserScramCredentials' results)."""

    async def rule(
        access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
    ) -> dict[str, Any] | None:
        if access.cluster(OP.DESCRIBE):
            return await call(body)
        return _denied(header, body, CLUSTER_DENIED, _MESSAGES[CLUSTER_DENIED])

    return rule


async def _alter_scram(
    access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
) -> dict[str, Any] | None:
    if access.cluster(OP.ALTER):
        return await call(body)
    return _denied(header, body, CLUSTER_DENIED, _MESSAGES[CLUSTER_DENIED])


async def _create_acls(
    access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
) -> dict[str, Any] | None:
    if access.cluster(OP.ALTER):
        return await call(body)
    return _denied(header, body, CLUSTER_DENIED, _MESSAGES[CLUSTER_DENIED])


async def _delete_acls(
    access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
) -> dict[str, Any] | None:
    if access.cluster(OP.ALTER):
        return await call(body)
    return _denied(header, body, CLUSTER_DENIED, _MESSAGES[CLUSTER_DENIED])


Rule = Callable[
    [Access, AgentContext, RequestHeader, dict[str, Any], Call], Awaitable[dict[str, Any] | None]
]


# --- transactions (KIP-98): WRITE on the transactional id, as Kafka ---------------------


def _txn_denied(header: RequestHeader, body: dict[str, Any], error: int) -> dict[str, Any]:
    return _denied(header, body, error)


async def _add_partitions_to_txn(
    access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
) -> dict[str, Any] | None:
    if header.api_version <= 3:
        txns = [(body["v3_and_below_transactional_id"], body["v3_and_below_topics"])]
    else:
        txns = [(t["transactional_id"], t["topics"]) for t in body["transactions"]]
    for transactional_id, topics in txns:
        if not access.allows(OP.WRITE, TXN, transactional_id):
            return _txn_denied(header, body, TXN_DENIED)
        if not all(access.topic(OP.WRITE, t["name"]) for t in topics):
            return _txn_denied(header, body, TOPIC_DENIED)
    return await call(body)


def _txn_write(*, group: bool = False) -> Rule:
    """AddOffsetsToTxn, TxnOffsetCommit (also READ on the group), EndTxn."""

    async def rule(
        access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
    ) -> dict[str, Any] | None:
        if not access.allows(OP.WRITE, TXN, body["transactional_id"]):
            return _txn_denied(header, body, TXN_DENIED)
        if group and not access.allows(OP.READ, GROUP, body["group_id"]):
            return _txn_denied(header, body, GROUP_DENIED)
        return await call(body)

    return rule


async def _describe_transactions(
    access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
) -> dict[str, Any] | None:
    ids = list(body["transactional_ids"])
    keep = [access.allows(OP.DESCRIBE, TXN, i) for i in ids]
    denied = _txn_denied(
        header, {"transactional_ids": [i for i, ok in zip(ids, keep) if not ok]}, TXN_DENIED
    )
    return await _split(
        body, "transactional_ids", keep, call, "transaction_states", denied["transaction_states"]
    )


async def _list_transactions(
    access: Access, ctx: AgentContext, header: RequestHeader, body: dict[str, Any], call: Call
) -> dict[str, Any] | None:
    """Lists only the transactional ids the principal may describe (as ListGroups)."""
    response = await call(body)
    if response is not None and "transaction_states" in response:
        response["transaction_states"] = [
            t
            for t in response["transaction_states"]
            if access.allows(OP.DESCRIBE, TXN, t["transactional_id"])
        ]
    return response


RULES: dict[int, Rule] = {
    ApiKey.PRODUCE: _produce,
    ApiKey.FETCH: _fetch,
    ApiKey.LIST_OFFSETS: _list_offsets,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _offset_for_leader_epoch,
    ApiKey.DELETE_RECORDS: _delete_records,
    ApiKey.INIT_PRODUCER_ID: _init_producer_id,
    ApiKey.METADATA: _metadata,
    ApiKey.CREATE_TOPICS: _create_topics,
    ApiKey.DELETE_TOPICS: _delete_topics,
    ApiKey.CREATE_PARTITIONS: _create_partitions,
    ApiKey.DESCRIBE_CONFIGS: _config_rule(OP.DESCRIBE_CONFIGS, "results"),
    ApiKey.ALTER_CONFIGS: _config_rule(OP.ALTER_CONFIGS, "responses"),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _config_rule(OP.ALTER_CONFIGS, "responses"),
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.JOIN_GROUP: _whole_group(OP.READ),
    ApiKey.SYNC_GROUP: _whole_group(OP.READ),
    ApiKey.HEARTBEAT: _whole_group(OP.READ),
    ApiKey.LEAVE_GROUP: _whole_group(OP.READ),
    ApiKey.OFFSET_COMMIT: _offset_commit,
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.DESCRIBE_GROUPS: _describe_groups,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: _whole_group(OP.READ),
    ApiKey.CONSUMER_GROUP_DESCRIBE: _consumer_group_describe,
    ApiKey.SHARE_GROUP_HEARTBEAT: _whole_group(OP.READ),
    ApiKey.SHARE_GROUP_DESCRIBE: _consumer_group_describe,
    ApiKey.SHARE_FETCH: _share_records,
    ApiKey.SHARE_ACKNOWLEDGE: _share_records,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: _describe_share_group_offsets,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: _share_offsets_change(OP.READ),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: _share_offsets_change(OP.DELETE),
    ApiKey.LIST_GROUPS: _list_groups,
    ApiKey.DELETE_GROUPS: _delete_groups,
    ApiKey.OFFSET_DELETE: _offset_delete,
    ApiKey.ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: _txn_write(group=True),
    ApiKey.TXN_OFFSET_COMMIT: _txn_write(group=True),
    ApiKey.END_TXN: _txn_write(),
    ApiKey.DESCRIBE_TRANSACTIONS: _describe_transactions,
    ApiKey.LIST_TRANSACTIONS: _list_transactions,
    ApiKey.DESCRIBE_ACLS: _cluster_describe("resources"),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: _cluster_describe("results"),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _alter_scram,
    ApiKey.CREATE_ACLS: _create_acls,
    ApiKey.DELETE_ACLS: _delete_acls,
}
