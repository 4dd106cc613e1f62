"""REST API: a cluster's Schema Registry, read and deleted as in the console. Subjects,
versions and levels come from the metadata store; a version's text is read by a live
agent of the cluster over the browse channel (`schema_registry.browser`)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from schema_registry import selectors, services
from schema_registry.api.serializers import (
    ConfigSerializer,
    DeleteQuerySerializer,
    SubjectDetailSerializer,
    SubjectListQuerySerializer,
    SubjectPatchSerializer,
    SubjectSerializer,
    VersionSerializer,
    VersionTextSerializer,
)
from schema_registry.browser import schema_texts
from schema_registry.services import RegistryError
from tenancy.api.pagination import PAGE_PARAMETERS, query_params
from tenancy.errors import conflict
from virtualclusters.api.views import AGENT_READ_ERRORS, ClusterScopedView, agent_read_errors

# Confluent's codes for a state that refuses the delete (soft-deleted already, not
# soft-deleted first, referenced, too many): the request was fine, the state is not.
_CONFLICTS = {40404, 40405, 40406, 40407, 42205, 42206}


def _refusal(exc: RegistryError) -> Exception:
    """The REST answer of a registry refusal: 404, 409 or 400, with its message."""
    if exc.error_code in (40401, 40402, 40403, 40408):
        return NotFound(str(exc))
    if exc.error_code in _CONFLICTS:
        return conflict("subject", str(exc))
    return ValidationError({"compatibility": [str(exc)]})


class SubjectScopedView(ClusterScopedView):
    def subject(self, cluster_id: str, subject: str) -> tuple[Any, ...]:
        """(the cluster, the subject's versions as the registry answers them); 404
        without a version (soft-deleted ones count)."""
        cluster = self.cluster(cluster_id)
        try:
            detail = selectors.subject_detail(cluster=cluster, subject=subject)
        except RegistryError as exc:
            raise _refusal(exc) from None
        return cluster, detail


class SubjectListView(ClusterScopedView):
    @extend_schema(
        parameters=[SubjectListQuerySerializer, *PAGE_PARAMETERS],
        responses=SubjectSerializer(many=True),
        summary="List a cluster's schema subjects",
    )
    def get(self, request: Request, cluster_id: str) -> Response:
        cluster = self.cluster(cluster_id)
        deleted = query_params(request, SubjectListQuerySerializer)["deleted"]
        return self.paginated(
            selectors.subjects_overview(cluster=cluster, deleted=deleted), SubjectSerializer
        )


def _summary(detail: dict[str, Any]) -> dict[str, Any]:
    live = [v["version"] for v in detail["versions"] if not v["deleted"]]
    return {
        "name": detail["name"],
        "compatibility": detail["compatibility"],
        "compatibility_own": detail["compatibility_own"],
        "versions": len(detail["versions"]),
        "latest_version": live[-1] if live else None,
    }


class SubjectDetailView(SubjectScopedView):
    @extend_schema(responses=SubjectDetailSerializer, summary="Describe a schema subject")
    def get(self, request: Request, cluster_id: str, subject: str) -> Response:
        _, detail = self.subject(cluster_id, subject)
        return Response(SubjectDetailSerializer(_summary(detail)).data)

    @extend_schema(
        request=SubjectPatchSerializer,
        responses=SubjectDetailSerializer,
        summary="Set a subject's compatibility level (null: follow the cluster's)",
    )
    def patch(self, request: Request, cluster_id: str, subject: str) -> Response:
        cluster, detail = self.subject(cluster_id, subject)
        data = SubjectPatchSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        level = data.validated_data["compatibility"]
        try:
            if level is not None:
                services.config_set(cluster=cluster, subject=subject, compatibility=level)
            elif detail["compatibility_own"] is not None:
                services.config_delete(cluster=cluster, subject=subject)
        except RegistryError as exc:
            raise _refusal(exc) from None
        _, detail = self.subject(cluster_id, subject)
        return Response(SubjectDetailSerializer(_summary(detail)).data)

    @extend_schema(
        parameters=[DeleteQuerySerializer],
        responses={204: None, 409: OpenApiResponse(description="Refused by the subject's state")},
        summary="Delete a schema subject (soft, or permanently after a soft delete)",
    )
    def delete(self, request: Request, cluster_id: str, subject: str) -> Response:
        cluster, _ = self.subject(cluster_id, subject)
        permanent = query_params(request, DeleteQuerySerializer)["permanent"]
        try:
            services.subject_delete(cluster=cluster, subject=subject, permanent=permanent)
        except RegistryError as exc:
            raise _refusal(exc) from None
        return Response(status=status.HTTP_204_NO_CONTENT)


class VersionListView(SubjectScopedView):
    @extend_schema(
        parameters=PAGE_PARAMETERS,
        responses=VersionSerializer(many=True),
        summary="List a subject's versions (soft-deleted ones included)",
    )
    def get(self, request: Request, cluster_id: str, subject: str) -> Response:
        _, detail = self.subject(cluster_id, subject)
        return self.paginated(detail["versions"], VersionSerializer)


class VersionDetailView(SubjectScopedView):
    def _version(self, cluster_id: str, subject: str, version: int) -> tuple[Any, ...]:
        cluster, detail = self.subject(cluster_id, subject)
        found = next((v for v in detail["versions"] if v["version"] == version), None)
        if found is None:
            raise NotFound(f"Version {version} not found.")
        return cluster, found

    @extend_schema(
        responses={200: VersionTextSerializer, **AGENT_READ_ERRORS},
        summary="A subject's version with its schema text (read through a live agent)",
        description="The control plane holds no bucket credentials: a live agent of the "
        "cluster, connected over the channel it opens, reads the text from the bucket and "
        "it is passed on, never stored.",
    )
    def get(self, request: Request, cluster_id: str, subject: str, version: int) -> Response:
        cluster, found = self._version(cluster_id, subject, version)
        with agent_read_errors():
            page = schema_texts(cluster, [found["fingerprint"]])
        body = {
            **found,
            "schema": page["texts"][found["fingerprint"]]["schema"],
            "referenced_by": selectors.referenced_by(
                cluster=cluster, subject=subject, version=version
            ),
            "agent": page["agent"],
        }
        return Response(VersionTextSerializer(body).data)

    @extend_schema(
        parameters=[DeleteQuerySerializer],
        responses={204: None, 409: OpenApiResponse(description="Refused by the version's state")},
        summary="Delete a subject's version (soft, or permanently after a soft delete)",
    )
    def delete(self, request: Request, cluster_id: str, subject: str, version: int) -> Response:
        cluster, found = self._version(cluster_id, subject, version)
        permanent = query_params(request, DeleteQuerySerializer)["permanent"]
        try:
            services.version_delete(
                cluster=cluster, subject=subject, version=version, permanent=permanent
            )
        except RegistryError as exc:
            raise _refusal(exc) from None
        return Response(status=status.HTTP_204_NO_CONTENT)


class ConfigView(ClusterScopedView):
    @extend_schema(responses=ConfigSerializer, summary="The cluster's compatibility level")
    def get(self, request: Request, cluster_id: str) -> Response:
        cluster = self.cluster(cluster_id)
        return Response({"compatibility": selectors.global_compatibility(cluster)})

    @extend_schema(
        request=ConfigSerializer,
        responses=ConfigSerializer,
        summary="Set the cluster's compatibility level",
    )
    def put(self, request: Request, cluster_id: str) -> Response:
        cluster = self.cluster(cluster_id)
        data = ConfigSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        level = services.config_set(
            cluster=cluster, subject=None, compatibility=data.validated_data["compatibility"]
        )
        return Response({"compatibility": level})
