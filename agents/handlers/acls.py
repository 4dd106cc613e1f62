"""CreateAcls, DescribeAcls and DeleteAcls: Kafka's wire numbers ↔ the control plane's
`acls/*` calls, which speak names (`"topic"`, `"prefixed"`, `"read"`, `"allow"`); and the
SCRAM credential APIs (KIP-554) ↔ `sasl/scram-describe`, `sasl/scram-alter`: the
cluster's SASL users, as the console shows them.

Who may call them is decided in `authorization` (ALTER / DESCRIBE on the cluster). This
agent's ACL cache is invalidated after a change so its next request sees it; other agents
see it within their refresh period.
"""

from __future__ import annotations

import base64
from enum import IntEnum
from typing import Any

from agents.context import AgentContext
from agents.security.session import current_session
from core.kafka import RequestHeader
from core.security.acl import AclOperation, AclPermission, PatternType, ResourceType


def _name(enum: type[IntEnum], value: int) -> str:
    try:
        return enum(value).name.lower()
    except ValueError:
        return "unknown"  # the control plane refuses it with a message


def _number(enum: type[IntEnum], name: str) -> int:
    return int(enum[name.upper()])


def _invalidate() -> None:
    cache = current_session().security.acls
    if cache is not None:
        cache.invalidate()


def _filter_json(item: dict[str, Any]) -> dict[str, Any]:
    return {
        "resource_type": _name(ResourceType, item["resource_type_filter"]),
        "resource_name": item.get("resource_name_filter"),
        "pattern_type": _name(PatternType, item["pattern_type_filter"]),
        "principal": item.get("principal_filter"),
        "host": item.get("host_filter"),
        "operation": _name(AclOperation, item["operation"]),
        "permission": _name(AclPermission, item["permission_type"]),
    }


async def handle_create_acls(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka CreateAcls: one result per creation, in order (KIP-140)."""
    bindings = [
        {
            "resource_type": _name(ResourceType, c["resource_type"]),
            "resource_name": c["resource_name"],
            "pattern_type": _name(PatternType, c["resource_pattern_type"]),
            "principal": c["principal"],
            "host": c["host"],
            "operation": _name(AclOperation, c["operation"]),
            "permission": _name(AclPermission, c["permission_type"]),
        }
        for c in body["creations"]
    ]
    results: list[dict[str, Any]] = []
    if bindings:
        answer = await ctx.client.call("acls/create", {"acls": bindings})
        results = [
            {"error_code": r["error_code"], "error_message": r.get("error_message")}
            for r in answer["results"]
        ]
        _invalidate()
    return {"throttle_time_ms": 0, "results": results}


async def handle_describe_acls(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka DescribeAcls: the bindings matching one filter, grouped by resource pattern."""
    answer = await ctx.client.call("acls/describe", {"filter": _filter_json(body)})
    resources: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for acl in answer.get("acls") or []:
        key = (acl["resource_type"], acl["resource_name"], acl["pattern_type"])
        resources.setdefault(key, []).append(
            {
                "principal": acl["principal"],
                "host": acl["host"],
                "operation": _number(AclOperation, acl["operation"]),
                "permission_type": _number(AclPermission, acl["permission"]),
            }
        )
    return {
        "throttle_time_ms": 0,
        "error_code": answer["error_code"],
        "error_message": answer.get("error_message"),
        "resources": [
            {
                "resource_type": _number(ResourceType, resource_type),
                "resource_name": name,
                "pattern_type": _number(PatternType, pattern),
                "acls": acls,
            }
            for (resource_type, name, pattern), acls in resources.items()
        ],
    }


async def handle_delete_acls(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka DeleteAcls: per filter, the bindings it matched and deleted."""
    filters = [_filter_json(f) for f in body["filters"]]
    results: list[dict[str, Any]] = []
    if filters:
        answer = await ctx.client.call("acls/delete", {"filters": filters})
        _invalidate()
        for result in answer["results"]:
            results.append(
                {
                    "error_code": result["error_code"],
                    "error_message": result.get("error_message"),
                    "matching_acls": [
                        {
                            "error_code": 0,
                            "error_message": None,
                            "resource_type": _number(ResourceType, acl["resource_type"]),
                            "resource_name": acl["resource_name"],
                            "pattern_type": _number(PatternType, acl["pattern_type"]),
                            "principal": acl["principal"],
                            "host": acl["host"],
                            "operation": _number(AclOperation, acl["operation"]),
                            "permission_type": _number(AclPermission, acl["permission"]),
                        }
                        for acl in result.get("acls") or []
                    ],
                }
            )
    return {"throttle_time_ms": 0, "filter_results": results}


# -- SCRAM credentials (KIP-554) -----------------------------------------------------------

SCRAM_MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
_MECHANISM_NUMBERS = {name: number for number, name in SCRAM_MECHANISMS.items()}


def _mechanism(number: int) -> str:
    return SCRAM_MECHANISMS.get(number, f"unknown mechanism {number}")  # refused per user


async def handle_describe_user_scram_credentials(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka DescribeUserScramCredentials: the cluster's SASL users' SCRAM mechanisms."""
    users = body.get("users")
    names = None if not users else [u["name"] for u in users]
    answer = await ctx.client.call("sasl/scram-describe", {"users": names})
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "results": [
            {
                "user": r["user"],
                "error_code": r["error_code"],
                "error_message": r.get("error_message"),
                "credential_infos": [
                    {
                        "mechanism": _MECHANISM_NUMBERS.get(i["mechanism"], 0),
                        "iterations": i["iterations"],
                    }
                    for i in r.get("credential_infos") or ()
                ],
            }
            for r in answer["results"]
        ],
    }


async def handle_alter_user_scram_credentials(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka AlterUserScramCredentials: the client's salted passwords become the users'
    SCRAM verifiers (the password itself never travels); this agent's logins see the
    change at once, other agents' within their credential cache's lifetime."""
    answer = await ctx.client.call(
        "sasl/scram-alter",
        {
            "deletions": [
                {"name": d["name"], "mechanism": _mechanism(d["mechanism"])}
                for d in body["deletions"]
            ],
            "upsertions": [
                {
                    "name": u["name"],
                    "mechanism": _mechanism(u["mechanism"]),
                    "iterations": u["iterations"],
                    "salt": base64.b64encode(u["salt"]).decode("ascii"),
                    "salted_password": base64.b64encode(u["salted_password"]).decode("ascii"),
                }
                for u in body["upsertions"]
            ],
        },
    )
    cache = current_session().security.credentials
    if cache is not None:
        for result in answer["results"]:
            cache.forget(result["user"])
    return {
        "throttle_time_ms": 0,
        "results": [
            {
                "user": r["user"],
                "error_code": r["error_code"],
                "error_message": r.get("error_message"),
            }
            for r in answer["results"]
        ],
    }
