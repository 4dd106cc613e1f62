"""Agent-API calls for SASL verifiers and ACLs (contract: docs/AGENT_API.md, "SASL and ACLs").

Same authentication and error conventions as ``agent_api``: the agent key names the
cluster; Kafka-level refusals are ``error_code`` fields, never HTTP errors.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError

from core.kafka.errors import ErrorCode
from core.security.acl import AclFilter
from metadata_store.agent_api import schemas
from metadata_store.agent_api.endpoint import endpoint
from virtualclusters.models import VirtualCluster
from virtualclusters.security import services
from virtualclusters.security.models import Acl


def _message(exc: ValidationError) -> str:
    if hasattr(exc, "error_dict"):
        field, errors = next(iter(exc.message_dict.items()))
        return f"{field}: {errors[0]}"
    return exc.messages[0]


@endpoint(schemas.SaslCredentialRequest)
def sasl_credential(cluster: VirtualCluster, body: schemas.SaslCredentialRequest) -> dict[str, Any]:
    return services.sasl_credential_for_agent(cluster, body.username)


@endpoint(schemas.ScramCredentialsDescribeRequest)
def scram_credentials_describe(
    cluster: VirtualCluster, body: schemas.ScramCredentialsDescribeRequest
) -> dict[str, Any]:
    users = None if body.users is None else list(body.users)
    return {"results": services.scram_credentials_describe(cluster, users)}


@endpoint(schemas.ScramCredentialsAlterRequest)
def scram_credentials_alter(
    cluster: VirtualCluster, body: schemas.ScramCredentialsAlterRequest
) -> dict[str, Any]:
    deletions = [{"name": d.name, "mechanism": d.mechanism} for d in body.deletions]
    upsertions = [
        {
            "name": u.name,
            "mechanism": u.mechanism,
            "iterations": u.iterations,
            "salt": u.salt,
            "salted_password": u.salted_password,
        }
        for u in body.upsertions
    ]
    return {"results": services.scram_credentials_alter(cluster, deletions, upsertions)}


@endpoint(schemas.AclsListRequest)
def acls_list(cluster: VirtualCluster, body: schemas.AclsListRequest) -> dict[str, Any]:
    version = services.acl_version(cluster)
    if body.version == version:
        return {"version": version, "acls": None}
    rows = Acl.objects.filter(cluster=cluster).order_by("id")
    return {"version": version, "acls": [acl.binding_json() for acl in rows]}


@endpoint(schemas.AclsCreateRequest)
def acls_create(cluster: VirtualCluster, body: schemas.AclsCreateRequest) -> dict[str, Any]:
    results = []
    for item in body.acls:
        try:
            services.acl_create(cluster=cluster, binding=services.acl_binding(item))
        except ValidationError as exc:
            results.append(
                {"error_code": int(ErrorCode.INVALID_REQUEST), "error_message": _message(exc)}
            )
            continue
        results.append({"error_code": 0, "error_message": None})
    return {"results": results}


@endpoint(schemas.AclsDescribeRequest)
def acls_describe(cluster: VirtualCluster, body: schemas.AclsDescribeRequest) -> dict[str, Any]:
    try:
        acl_filter = AclFilter.from_json(body.filter)
    except ValueError as exc:
        return {"error_code": int(ErrorCode.INVALID_REQUEST), "error_message": str(exc), "acls": []}
    acls = services.acls_matching(cluster, acl_filter)
    return {"error_code": 0, "error_message": None, "acls": [a.binding_json() for a in acls]}


@endpoint(schemas.AclsDeleteRequest)
def acls_delete(cluster: VirtualCluster, body: schemas.AclsDeleteRequest) -> dict[str, Any]:
    parsed: list[AclFilter | str] = []
    for item in body.filters:
        try:
            parsed.append(AclFilter.from_json(item))
        except ValueError as exc:
            parsed.append(str(exc))
    valid = [f for f in parsed if isinstance(f, AclFilter)]
    deleted = iter(services.acls_delete_matching(cluster=cluster, filters=valid))
    results = []
    for outcome in parsed:
        if isinstance(outcome, str):
            results.append(
                {"error_code": int(ErrorCode.INVALID_REQUEST), "error_message": outcome, "acls": []}
            )
        else:
            acls = next(deleted)
            results.append(
                {"error_code": 0, "error_message": None, "acls": [a.binding_json() for a in acls]}
            )
    return {"results": results}
