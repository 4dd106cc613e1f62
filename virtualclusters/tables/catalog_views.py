"""The Iceberg REST Catalog API of one cluster, under ``/iceberg/<cluster id>/v1/``:
config, namespaces (list, create, load, drop), tables (list, create, load, commit with
requirements, drop) — the subset PyIceberg, DuckDB, Spark and Trino use.

Callers authenticate with ``Authorization: Bearer <token>``: an API key of the
cluster's organization (reads need any role, changes an admin: ``tenancy.permissions``)
or an agent key of the cluster (its jobs-role agents commit appends). Another
organization's cluster is a 404, as everywhere. Errors follow the REST spec's error
model: ``{"error": {"message", "type", "code"}}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError as PydanticError
from pyiceberg.catalog.rest import CreateTableRequest
from pyiceberg.table import CommitTableRequest
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from metadata_store.clusters import agent_key_authenticate
from team.api.auth import ApiKeyAuthentication, ApiKeyPermission
from tenancy.models import Organization
from virtualclusters.models import VirtualCluster
from virtualclusters.tables import catalog
from virtualclusters.tables.catalog import NAMESPACE_SEPARATOR, CatalogError
from virtualclusters.tables.models import IcebergTable


@dataclass(frozen=True)
class AgentPrincipal:
    """A jobs-role agent, through its key: it reaches its own cluster's catalog only."""

    organization: Organization
    cluster_id: int
    is_authenticated: bool = True


class CatalogAuthentication(BaseAuthentication):
    """An agent key of the cluster, or an API key of its organization."""

    def authenticate(self, request: Request) -> tuple[object, object] | None:
        scheme, _, value = request.headers.get("Authorization", "").partition(" ")
        if scheme == "Bearer" and value.strip().startswith("floe_agent_"):
            key = agent_key_authenticate(value.strip())
            if key is None:
                raise exceptions.AuthenticationFailed("Unknown or revoked agent key.")
            principal = AgentPrincipal(key.cluster.organization, key.cluster_id)
            return principal, principal
        return ApiKeyAuthentication().authenticate(request)

    def authenticate_header(self, request: Request) -> str:
        return "Bearer"


class CatalogPermission(BasePermission):
    def has_permission(self, request: Request, view: APIView) -> bool:
        if isinstance(request.auth, AgentPrincipal):
            return True
        return ApiKeyPermission().has_permission(request, view)


class CatalogView(APIView):
    authentication_classes = [CatalogAuthentication]
    permission_classes = [CatalogPermission]
    schema = None  # Iceberg's own spec describes it, not the REST API's schema

    def cluster(self, cluster_id: str) -> VirtualCluster:
        principal = self.request.auth
        found = (
            VirtualCluster.objects.for_org(getattr(principal, "organization", None))
            .filter(public_id=cluster_id)
            .first()
        )
        if found is None or (
            isinstance(principal, AgentPrincipal) and principal.cluster_id != found.pk
        ):
            raise CatalogError(404, "NoSuchCatalogException", f"no catalog {cluster_id}")
        return found

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, CatalogError):
            return _error(exc.code, exc.kind, exc.message)
        if isinstance(exc, PydanticError):
            return _error(400, "BadRequestException", f"malformed request: {exc}"[:2000])
        if isinstance(exc, exceptions.APIException):
            response = super().handle_exception(exc)
            kind = {401: "NotAuthorizedException", 403: "ForbiddenException"}.get(
                response.status_code, type(exc).__name__
            )
            detail = response.data.get("detail", "") if isinstance(response.data, dict) else ""
            return _error(response.status_code, kind, str(detail or exc), headers=response)
        return super().handle_exception(exc)


def _error(code: int, kind: str, message: str, *, headers: Response | None = None) -> Response:
    response = Response({"error": {"message": message, "type": kind, "code": code}}, status=code)
    if headers is not None and headers.has_header("WWW-Authenticate"):
        response["WWW-Authenticate"] = headers["WWW-Authenticate"]
    return response


def _body(request: Request) -> dict[str, Any]:
    if not isinstance(request.data, dict):
        raise CatalogError(400, "BadRequestException", "the body must be a JSON object")
    return request.data


def _levels(namespace: str) -> str:
    return catalog.namespace_name(namespace.split(NAMESPACE_SEPARATOR))


def _table_answer(cluster: VirtualCluster, table: IcebergTable) -> dict[str, Any]:

    return {
        "metadata-location": table.metadata_location,
        "metadata": table.metadata,
        "config": catalog.catalog_properties(cluster),
    }


class ConfigView(CatalogView):
    def get(self, request: Request, cluster_id: str) -> Response:
        cluster = self.cluster(cluster_id)
        return Response({"defaults": {}, "overrides": catalog.catalog_properties(cluster)})


class NamespaceListView(CatalogView):
    def get(self, request: Request, cluster_id: str) -> Response:
        cluster = self.cluster(cluster_id)
        parent = request.query_params.get("parent", "")
        parent_name = _levels(parent) if parent else ""
        return Response({"namespaces": catalog.namespaces_list(cluster, parent=parent_name)})

    def post(self, request: Request, cluster_id: str) -> Response:
        cluster = self.cluster(cluster_id)
        body = _body(request)
        levels, properties = body.get("namespace"), body.get("properties") or {}
        if not isinstance(levels, list) or not all(isinstance(x, str) for x in levels):
            raise CatalogError(400, "BadRequestException", "namespace: a list of strings")
        if not isinstance(properties, dict):
            raise CatalogError(400, "BadRequestException", "properties: an object")
        name = catalog.namespace_name(levels)
        created = catalog.namespace_create(
            cluster=cluster, name=name, properties={str(k): str(v) for k, v in properties.items()}
        )
        return Response({"namespace": levels, "properties": created.properties})


class NamespaceDetailView(CatalogView):
    def get(self, request: Request, cluster_id: str, namespace: str) -> Response:
        name = _levels(namespace)
        found = catalog.namespace_get(self.cluster(cluster_id), name)
        return Response({"namespace": name.split("."), "properties": found.properties})

    def delete(self, request: Request, cluster_id: str, namespace: str) -> Response:
        catalog.namespace_drop(cluster=self.cluster(cluster_id), name=_levels(namespace))
        return Response(status=204)


class TableListView(CatalogView):
    def get(self, request: Request, cluster_id: str, namespace: str) -> Response:
        name = _levels(namespace)
        levels = name.split(".")
        tables = catalog.tables_list(self.cluster(cluster_id), name)
        return Response({"identifiers": [{"namespace": levels, "name": t} for t in tables]})

    def post(self, request: Request, cluster_id: str, namespace: str) -> Response:
        cluster = self.cluster(cluster_id)
        # Fields the spec makes optional that PyIceberg's model requires.
        optional = {"location": None, "partition-spec": None, "write-order": None}
        body = CreateTableRequest.model_validate({**optional, **_body(request)})
        if body.stage_create:
            raise CatalogError(400, "BadRequestException", "staged creation is not supported")
        table = catalog.table_create(
            cluster=cluster,
            namespace=_levels(namespace),
            name=body.name,
            schema=body.table_schema,
            partition_spec=body.partition_spec,
            sort_order=body.write_order,
            properties=body.properties,
        )
        return Response(_table_answer(cluster, table))


class TableDetailView(CatalogView):
    def get(self, request: Request, cluster_id: str, namespace: str, table: str) -> Response:
        cluster = self.cluster(cluster_id)
        return Response(
            _table_answer(cluster, catalog.table_get(cluster, _levels(namespace), table))
        )

    def post(self, request: Request, cluster_id: str, namespace: str, table: str) -> Response:
        cluster = self.cluster(cluster_id)
        body = CommitTableRequest.model_validate(_body(request))
        committed = catalog.table_commit(
            cluster=cluster, namespace=_levels(namespace), name=table, request=body
        )
        return Response(
            {"metadata-location": committed.metadata_location, "metadata": committed.metadata}
        )

    def delete(self, request: Request, cluster_id: str, namespace: str, table: str) -> Response:
        catalog.table_drop(
            cluster=self.cluster(cluster_id), namespace=_levels(namespace), name=table
        )
        return Response(status=204)
