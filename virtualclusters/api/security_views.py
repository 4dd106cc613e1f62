"""REST API: a cluster's SASL credentials and ACLs."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from tenancy.api.pagination import PAGE_PARAMETERS, query_params
from tenancy.api.views import created
from virtualclusters.api.security_serializers import (
    AclCreateSerializer,
    AclQuerySerializer,
    AclSerializer,
    SaslCredentialCreatedSerializer,
    SaslCredentialCreateSerializer,
    SaslCredentialSerializer,
)
from virtualclusters.api.views import ClusterScopedView
from virtualclusters.security import services
from virtualclusters.security.models import Acl, SaslCredential


class SaslCredentialListView(ClusterScopedView):
    @extend_schema(
        responses=SaslCredentialSerializer(many=True),
        parameters=PAGE_PARAMETERS,
        summary="List a cluster's SASL users",
    )
    def get(self, request: Request, cluster_id: str) -> Response:
        credentials = self.cluster(cluster_id).sasl_credentials.order_by("username")
        return self.paginated(credentials, SaslCredentialSerializer)

    @extend_schema(
        request=SaslCredentialCreateSerializer,
        responses={201: SaslCredentialCreatedSerializer},
        summary="Create a SASL user (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)",
        description="The password is returned once; only verifiers are stored.",
    )
    def post(self, request: Request, cluster_id: str) -> Response:
        cluster = self.cluster(cluster_id)
        data = SaslCredentialCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        credential, password = services.sasl_credential_create(
            cluster=cluster, **data.validated_data
        )
        return created(
            {**SaslCredentialCreatedSerializer(credential).data, "password": password},
            "api-sasl-credential",
            cluster_id=cluster.public_id,
            credential_id=credential.public_id,
        )


class SaslCredentialDetailView(ClusterScopedView):
    def _credential(self, cluster_id: str, credential_id: str) -> SaslCredential:
        return get_object_or_404(self.cluster(cluster_id).sasl_credentials, public_id=credential_id)

    @extend_schema(responses=SaslCredentialSerializer, summary="Describe a SASL user")
    def get(self, request: Request, cluster_id: str, credential_id: str) -> Response:
        return Response(SaslCredentialSerializer(self._credential(cluster_id, credential_id)).data)

    @extend_schema(responses={204: None}, summary="Delete a SASL user")
    def delete(self, request: Request, cluster_id: str, credential_id: str) -> Response:
        services.sasl_credential_delete(credential=self._credential(cluster_id, credential_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class AclListView(ClusterScopedView):
    @extend_schema(
        parameters=[AclQuerySerializer, *PAGE_PARAMETERS],
        responses=AclSerializer(many=True),
        summary="List a cluster's ACLs (optionally filtered by exact field values)",
    )
    def get(self, request: Request, cluster_id: str) -> Response:
        acls = self.cluster(cluster_id).acls.order_by("resource_type", "resource_name", "id")
        acls = acls.filter(**query_params(request, AclQuerySerializer))
        return self.paginated(acls, AclSerializer)

    @extend_schema(
        request=AclCreateSerializer,
        responses={201: AclSerializer, 200: AclSerializer},
        summary="Create an ACL (200 with the existing one when identical)",
    )
    def post(self, request: Request, cluster_id: str) -> Response:
        cluster = self.cluster(cluster_id)
        data = AclCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        binding = services.acl_binding(dict(data.validated_data))
        acl, is_new = services.acl_create(cluster=cluster, binding=binding)
        if not is_new:
            return Response(AclSerializer(acl).data, status=status.HTTP_200_OK)
        return created(
            AclSerializer(acl).data, "api-acl", cluster_id=cluster.public_id, acl_id=acl.public_id
        )


class AclDetailView(ClusterScopedView):
    def _acl(self, cluster_id: str, acl_id: str) -> Acl:
        return get_object_or_404(self.cluster(cluster_id).acls, public_id=acl_id)

    @extend_schema(responses=AclSerializer, summary="Describe an ACL")
    def get(self, request: Request, cluster_id: str, acl_id: str) -> Response:
        return Response(AclSerializer(self._acl(cluster_id, acl_id)).data)

    @extend_schema(responses={204: None}, summary="Delete an ACL")
    def delete(self, request: Request, cluster_id: str, acl_id: str) -> Response:
        services.acl_delete(acl=self._acl(cluster_id, acl_id))
        return Response(status=status.HTTP_204_NO_CONTENT)
