"""The answer that gives one error code to every part of a request, built from the schemas.

A request that fails as a whole (its handler raised, the control plane is down, an ACL
denies it) is answered as Kafka's `AbstractRequest.getErrorResponse` answers it: the
response message of the request's version with the code in every place it has for one —
the top-level `error_code`, and each per-topic, per-partition, per-group or per-resource
entry that answers an entry of the request (the entry's keys copied from it) —, every
other field at its default (`throttle_time_ms` 0, arrays empty, ids -1 where Kafka's
answer has -1).

What the schemas (`core.kafka.messages`) do not say is which response array answers
which request array, and the few values that are not a field's default: `SHAPES` says
that, per API. An API without a shape, or whose shape `closes`, has no error answer
(Metadata: an empty answer would read as "no topics"; the client is better off with a
closed connection).

The ACL layer denies parts of a request (topics, partitions, groups, resources): it
answers them with `error_entries` — the entries the error answer gives those parts, with
the arrays a whole-request answer leaves empty (Fetch's topics, OffsetFetch's
partitions) answered too (`Shape.entries`).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .api_keys import ApiKey
from .messages import APIS
from .schema import Array, Field, Struct

# KIP-430: a describe answer's authorized operations when they were not asked for.
OPERATIONS_OMITTED = -(2**31)


@dataclass(frozen=True)
class Echo:
    """A response array that answers a request array entry by entry.

    `request` names the request's array (in the request entry at the same depth);
    `keys` maps a response field to the request entry's field it copies ("" = the
    entry itself, for arrays of strings or ints); `nested` answers arrays inside each
    entry the same way. Alternatives for one response array (a request field renamed
    across versions) are given as a tuple: the first whose request field the version
    has is used.
    """

    request: str
    keys: Mapping[str, str] = field(default_factory=dict)
    nested: Mapping[str, Echo | tuple[Echo, ...]] = field(default_factory=dict)
    # More request arrays answered in the same response array, after `request`'s
    # entries; entries with the same keys are answered once (AlterUserScramCredentials:
    # each user of the deletions and upsertions).
    also: tuple[str, ...] = ()


@dataclass(frozen=True)
class Shape:
    """How an API's error answer departs from its response schema's defaults.

    `echoes`: the top-level response arrays that answer request arrays; `copies`:
    top-level response fields copied from the request's; `values`: fields (at any depth)
    whose error value is not the schema's default; `error_fields`: the fields that get
    the code (`error_code` unless told). For the entries of denied parts
    (`error_entries`), `entries` and `entry_values` add to `echoes` and `values`.
    `closes`: a request failing as a whole gets no answer.
    """

    echoes: Mapping[str, Echo | tuple[Echo, ...]] = field(default_factory=dict)
    copies: Mapping[str, str] = field(default_factory=dict)
    values: Mapping[str, Any] = field(default_factory=dict)
    error_fields: frozenset[str] = frozenset({"error_code"})
    entries: Mapping[str, Echo | tuple[Echo, ...]] = field(default_factory=dict)
    entry_values: Mapping[str, Any] = field(default_factory=dict)
    closes: bool = False


_TOPIC_PARTITIONS = Echo(
    "topics",
    {"name": "name"},
    {"partitions": Echo("partitions", {"partition_index": "partition_index"})},
)
_OFFSET_FETCH_TOPICS = Echo(
    "topics",
    {"name": "name"},
    {"partitions": Echo("partition_indexes", {"partition_index": ""})},
)
_GROUP_DESCRIBE = Shape(
    echoes={"groups": Echo("group_ids", {"group_id": ""})},
    values={
        "group_epoch": -1,
        "assignment_epoch": -1,
        "authorized_operations": OPERATIONS_OMITTED,
    },
)

SHAPES: dict[ApiKey, Shape] = {
    # -- produce, fetch, offsets -------------------------------------------------------
    ApiKey.PRODUCE: Shape(
        echoes={
            "responses": Echo(
                "topic_data",
                {"name": "name", "topic_id": "topic_id"},
                {"partition_responses": Echo("partition_data", {"index": "index"})},
            )
        },
        values={"base_offset": -1, "log_append_time_ms": -1, "log_start_offset": -1},
    ),
    ApiKey.FETCH: Shape(
        entries={
            "responses": Echo(
                "topics",
                {"topic": "topic", "topic_id": "topic_id"},
                {"partitions": Echo("partitions", {"partition_index": "partition"})},
            )
        },
        entry_values={"high_watermark": -1, "records": b""},
    ),
    ApiKey.LIST_OFFSETS: Shape(echoes={"topics": _TOPIC_PARTITIONS}),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: Shape(
        echoes={
            "topics": Echo(
                "topics",
                {"topic": "topic"},
                {"partitions": Echo("partitions", {"partition": "partition"})},
            )
        }
    ),
    # The ACL layer's denials say -1 (Kafka's INVALID_LOW_WATERMARK); a failed request
    # has always answered the schema's 0.
    ApiKey.DELETE_RECORDS: Shape(
        echoes={"topics": _TOPIC_PARTITIONS}, entry_values={"low_watermark": -1}
    ),
    ApiKey.INIT_PRODUCER_ID: Shape(values={"producer_id": -1, "producer_epoch": -1}),
    # -- metadata and admin ---------------------------------------------------------------
    ApiKey.METADATA: Shape(
        closes=True,
        entries={"topics": Echo("topics", {"name": "name", "topic_id": "topic_id"})},
        values={"topic_authorized_operations": OPERATIONS_OMITTED},
    ),
    ApiKey.DESCRIBE_CLUSTER: Shape(),
    # A failed request's topics carry no configs (null, the schema's default); the ACL
    # layer's denied topics an empty list.
    ApiKey.CREATE_TOPICS: Shape(
        echoes={"topics": Echo("topics", {"name": "name"})}, entry_values={"configs": []}
    ),
    ApiKey.DELETE_TOPICS: Shape(
        echoes={
            "responses": (
                Echo("topics", {"name": "name", "topic_id": "topic_id"}),  # v6+
                Echo("topic_names", {"name": ""}),
            )
        }
    ),
    ApiKey.CREATE_PARTITIONS: Shape(echoes={"results": Echo("topics", {"name": "name"})}),
    **{
        key: Shape(
            echoes={
                answer: Echo(
                    "resources",
                    {"resource_type": "resource_type", "resource_name": "resource_name"},
                )
            }
        )
        for key, answer in (
            (ApiKey.DESCRIBE_CONFIGS, "results"),
            (ApiKey.ALTER_CONFIGS, "responses"),
            (ApiKey.INCREMENTAL_ALTER_CONFIGS, "responses"),
        )
    },
    # -- groups -------------------------------------------------------------------------
    ApiKey.FIND_COORDINATOR: Shape(
        echoes={"coordinators": Echo("coordinator_keys", {"key": ""})},  # v4+
        values={"node_id": -1, "port": -1},
    ),
    ApiKey.JOIN_GROUP: Shape(copies={"member_id": "member_id"}, values={"generation_id": -1}),
    ApiKey.SYNC_GROUP: Shape(),
    ApiKey.HEARTBEAT: Shape(),
    ApiKey.LEAVE_GROUP: Shape(),
    ApiKey.LIST_GROUPS: Shape(),
    ApiKey.DESCRIBE_GROUPS: Shape(
        echoes={"groups": Echo("groups", {"group_id": ""})},
        values={"authorized_operations": OPERATIONS_OMITTED},
    ),
    ApiKey.DELETE_GROUPS: Shape(echoes={"results": Echo("groups_names", {"group_id": ""})}),
    ApiKey.OFFSET_COMMIT: Shape(echoes={"topics": _TOPIC_PARTITIONS}),
    # OffsetFetch: each group (v8+) or the request (v2+) gets the code, no topics.
    ApiKey.OFFSET_FETCH: Shape(
        echoes={"groups": Echo("groups", {"group_id": "group_id"})},
        entries={
            "groups": Echo("groups", {"group_id": "group_id"}, {"topics": _OFFSET_FETCH_TOPICS}),
            "topics": _OFFSET_FETCH_TOPICS,  # before v8
        },
        entry_values={"committed_offset": -1, "metadata": ""},
    ),
    ApiKey.OFFSET_DELETE: Shape(entries={"topics": _TOPIC_PARTITIONS}),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: Shape(values={"member_epoch": -1}),
    ApiKey.CONSUMER_GROUP_DESCRIBE: _GROUP_DESCRIBE,
    # -- share groups (KIP-932) ---------------------------------------------------------
    ApiKey.SHARE_GROUP_HEARTBEAT: Shape(values={"member_epoch": -1, "error_message": ""}),
    ApiKey.SHARE_GROUP_DESCRIBE: _GROUP_DESCRIBE,
    ApiKey.SHARE_FETCH: Shape(values={"error_message": ""}),
    ApiKey.SHARE_ACKNOWLEDGE: Shape(values={"error_message": ""}),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: Shape(
        echoes={"groups": Echo("groups", {"group_id": "group_id"})},
        entries={
            "groups": Echo(
                "groups",
                {"group_id": "group_id"},
                {
                    "topics": Echo(
                        "topics",
                        {"topic_name": "topic_name"},
                        {"partitions": Echo("partitions", {"partition_index": ""})},
                    )
                },
            )
        },
        entry_values={"start_offset": -1, "leader_epoch": -1},
    ),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: Shape(
        entries={
            "responses": Echo(
                "topics",
                {"topic_name": "topic_name"},
                {"partitions": Echo("partitions", {"partition_index": "partition_index"})},
            )
        }
    ),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: Shape(
        entries={"responses": Echo("topics", {"topic_name": "topic_name"})}
    ),
    # -- transactions (KIP-98) ----------------------------------------------------------
    ApiKey.ADD_PARTITIONS_TO_TXN: Shape(
        echoes={
            "results_by_topic_v3_and_below": Echo(
                "v3_and_below_topics",
                {"name": "name"},
                {"results_by_partition": Echo("partitions", {"partition_index": ""})},
            )
        },
        error_fields=frozenset({"error_code", "partition_error_code"}),
    ),
    ApiKey.ADD_OFFSETS_TO_TXN: Shape(),
    ApiKey.END_TXN: Shape(),
    ApiKey.TXN_OFFSET_COMMIT: Shape(echoes={"topics": _TOPIC_PARTITIONS}),
    ApiKey.DESCRIBE_TRANSACTIONS: Shape(
        echoes={"transaction_states": Echo("transactional_ids", {"transactional_id": ""})},
        values={"transaction_start_time_ms": -1, "producer_id": -1, "producer_epoch": -1},
    ),
    ApiKey.LIST_TRANSACTIONS: Shape(),
    # -- ACLs and SCRAM credentials -----------------------------------------------------
    ApiKey.DESCRIBE_ACLS: Shape(),
    ApiKey.CREATE_ACLS: Shape(echoes={"results": Echo("creations")}),
    ApiKey.DELETE_ACLS: Shape(echoes={"filter_results": Echo("filters")}),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: Shape(),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: Shape(
        echoes={"results": Echo("deletions", {"user": "name"}, also=("upsertions",))}
    ),
}


def error_answer(
    api_key: int,
    version: int,
    request: Mapping[str, Any],
    error: int,
    message: str | None = None,
) -> dict[str, Any] | None:
    """The response to `request` (API `api_key`, `version`) giving `error` to every
    part of it; None when the API has no such answer (close the connection instead).

    `message` fills the `error_message` fields, where a shape does not fix them.
    """
    if api_key not in SHAPES:
        return None
    shape = SHAPES[ApiKey(api_key)]
    if shape.closes:
        return None
    if api_key == ApiKey.PRODUCE and request.get("acks") == 0:
        return None  # an acks=0 producer reads no answers
    return _build(shape, api_key, version, request, error, message, entries=False)


def error_entries(
    api_key: int,
    version: int,
    request: Mapping[str, Any],
    array: str,
    error: int,
    message: str | None = None,
) -> list[dict[str, Any]]:
    """The entries of the response's `array` answering the parts of `request` with
    `error` — the ACL layer's denied topics, groups, resources, keys (pass the request
    with only the denied parts)."""
    answer = _build(SHAPES[ApiKey(api_key)], api_key, version, request, error, message, True)
    entries: list[dict[str, Any]] = answer[array]
    return entries


def _build(
    shape: Shape,
    api_key: int,
    version: int,
    request: Mapping[str, Any],
    error: int,
    message: str | None,
    entries: bool,
) -> dict[str, Any]:
    answer = _run(_plan(api_key, version, entries), request, int(error), message)
    for name, source in shape.copies.items():
        if name in answer:
            answer[name] = request.get(source, answer[name])
    return answer


# -- the plan of an answer, compiled once per API, version and kind ---------------------
#
# A plan is a template of the response struct (its constant fields filled in) and the
# fields filled per answer: the error code, the message (or its fallback), an empty list,
# a copy of another mutable default, or the answers to a request array's entries (with
# the plan of each entry).

_EMPTY, _FRESH, _ERROR, _MESSAGE, _ECHO = range(5)


@dataclass(frozen=True)
class _Plan:
    template: dict[str, Any]
    steps: tuple[tuple[str, int, Any], ...]


@dataclass(frozen=True)
class _EchoPlan:
    sources: tuple[str, ...]  # the request arrays answered, in order
    keys: tuple[tuple[str, str], ...]  # (response field, request entry's field or "")
    element: _Plan | None  # None: an array of primitives, each answered by itself
    unique: bool


@functools.cache
def _plan(api_key: int, version: int, entries: bool) -> _Plan:
    shape = SHAPES[ApiKey(api_key)]
    api = APIS[api_key]
    values = {**shape.values, **shape.entry_values} if entries else dict(shape.values)
    echoes = {**shape.echoes, **shape.entries} if entries else shape.echoes
    return _compile(
        api.response.struct, api.request.struct, version, echoes, shape.error_fields, values
    )


def _compile(
    response: Struct,
    request: Struct,
    version: int,
    echoes: Mapping[str, Echo | tuple[Echo, ...]],
    error_fields: frozenset[str],
    values: Mapping[str, Any],
) -> _Plan:
    template: dict[str, Any] = {}
    steps: list[tuple[str, int, Any]] = []
    for f in response.fields:
        if version not in f.versions:
            continue
        template[f.name] = None
        echo = _echo(echoes.get(f.name), request, version)
        if echo is not None and isinstance(f.type, Array):
            rule, source = echo
            element: _Plan | None = None
            if isinstance(f.type.element, Struct):
                asked = source.type.element if isinstance(source.type, Array) else None
                element = _compile(
                    f.type.element,
                    asked if isinstance(asked, Struct) else Struct(),
                    version,
                    rule.nested,
                    error_fields,
                    values,
                )
            sources = (rule.request, *rule.also)
            plan = _EchoPlan(sources, tuple(rule.keys.items()), element, bool(rule.also))
            steps.append((f.name, _ECHO, plan))
        elif f.name in error_fields:
            steps.append((f.name, _ERROR, None))
        elif f.name == "error_message":
            steps.append((f.name, _MESSAGE, values.get(f.name, f.encode_default(version))))
        else:
            value = values[f.name] if f.name in values else f.encode_default(version)
            if value == []:
                steps.append((f.name, _EMPTY, None))
            elif isinstance(value, list | dict):
                steps.append((f.name, _FRESH, value))
            else:
                template[f.name] = value
    return _Plan(template, tuple(steps))


def _echo(
    rule: Echo | tuple[Echo, ...] | None, request: Struct, version: int
) -> tuple[Echo, Field] | None:
    """The first alternative whose request array this version has."""
    if rule is None:
        return None
    for candidate in rule if isinstance(rule, tuple) else (rule,):
        for f in request.fields:
            if f.name == candidate.request and version in f.versions:
                return candidate, f
    return None


def _run(plan: _Plan, entry: Mapping[str, Any], error: int, message: str | None) -> dict[str, Any]:
    out = plan.template.copy()
    for name, kind, data in plan.steps:
        if kind == _EMPTY:
            out[name] = []
        elif kind == _ERROR:
            out[name] = error
        elif kind == _MESSAGE:
            out[name] = message if message is not None else data
        elif kind == _FRESH:
            out[name] = copy.deepcopy(data)
        else:
            out[name] = _answers(data, entry, error, message)
    return out


def _answers(
    echo: _EchoPlan, entry: Mapping[str, Any], error: int, message: str | None
) -> list[Any]:
    """The answers to the request entries of `echo`'s arrays, their keys copied."""
    answers: list[Any] = []
    for source in echo.sources:
        for item in entry.get(source) or ():
            if echo.element is None:
                answers.append(item)
                continue
            answer = _run(echo.element, item if isinstance(item, dict) else {}, error, message)
            for name, key in echo.keys:
                if name in answer:
                    answer[name] = item.get(key) if key else item
            answers.append(answer)
    if echo.unique:  # one answer per key, in the order first named
        unique: dict[tuple[Any, ...], Any] = {}
        for answer in answers:
            unique.setdefault(tuple(answer[k] for k, _ in echo.keys), answer)
        answers = list(unique.values())
    return answers
