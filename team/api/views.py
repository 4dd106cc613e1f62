"""REST API of the team: application API keys, the audit log, members and invitations
of the caller's organization."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import JsonResponse
from django.shortcuts import get_object_or_404
from django.urls import Resolver404, resolve
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from team import members as team
from team.api.auth import ApiPrincipal
from team.audit import ACTIONS, TARGET_TYPES, audit_events
from team.models import ApiKey, AuditEvent
from team.services import api_key_create, api_key_revoke
from tenancy.api.pagination import (
    PAGE_PARAMETERS,
    KeyListQuerySerializer,
    query_params,
)
from tenancy.api.strict import StrictSerializer
from tenancy.api.typed import ModelSerializer, Serializer
from tenancy.api.views import OrgScopedView, created
from tenancy.models import Membership


class ApiKeySerializer(ModelSerializer):
    id = serializers.CharField(source="public_id", read_only=True)
    owner = serializers.EmailField(
        source="owner.email",
        default=None,
        allow_null=True,
        read_only=True,
        help_text="The person the key belongs to; null for a service-account key.",
    )
    revoked = serializers.SerializerMethodField()

    class Meta:
        model = ApiKey
        fields = [
            "id",
            "name",
            "role",
            "owner",
            "service_account",
            "display_prefix",
            "created_at",
            "last_used_at",
            "revoked_at",
            "revoked",
        ]
        read_only_fields = fields

    def get_revoked(self, key: ApiKey) -> bool:
        return key.revoked_at is not None


class ApiKeyCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=100)
    role = serializers.ChoiceField(
        choices=Membership.Role.choices,
        default=Membership.Role.ADMIN,
        help_text="At most the calling key's own role (a service account: at most admin).",
    )
    service_account = serializers.BooleanField(
        default=False,
        help_text="The organization's key rather than the calling key's owner's "
        "(a service account's key always makes service-account keys).",
    )


class ApiKeyCreatedSerializer(ApiKeySerializer):
    key = serializers.CharField(read_only=True, help_text="The secret. Shown once; store it now.")

    class Meta(ApiKeySerializer.Meta):
        fields = [*ApiKeySerializer.Meta.fields, "key"]
        read_only_fields = fields


class ApiKeyListView(OrgScopedView):
    @extend_schema(
        responses=ApiKeySerializer(many=True),
        parameters=[KeyListQuerySerializer, *PAGE_PARAMETERS],
        summary="List API keys (active ones; revoked ones too on request)",
    )
    def get(self, request: Request) -> Response:
        keys = (
            ApiKey.objects.for_org(self.organization)
            .select_related("owner")
            .order_by("-created_at", "id")
        )
        if not query_params(request, KeyListQuerySerializer)["include_revoked"]:
            keys = keys.active()
        return self.paginated(keys, ApiKeySerializer)

    @extend_schema(
        request=ApiKeyCreateSerializer,
        responses={201: ApiKeyCreatedSerializer},
        summary="Create an API key",
    )
    def post(self, request: Request) -> Response:
        data = ApiKeyCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        caller = _principal(request).key
        service_account = data.validated_data["service_account"] or caller.service_account
        key, plaintext = api_key_create(
            organization=self.organization,
            name=data.validated_data["name"],
            role=data.validated_data["role"],
            owner=None if service_account else caller.owner,
            service_account=service_account,
            created_by=caller.owner,
            ceiling=_principal(request).role,
        )
        shown = {**ApiKeyCreatedSerializer(key).data, "key": plaintext}
        return created(shown, "api-key", key_id=key.public_id)


class ApiKeyDetailView(OrgScopedView):
    def _key(self, key_id: str) -> ApiKey:
        """An active key of the caller's organization: a revoked (deleted) key is a 404."""
        keys = ApiKey.objects.for_org(self.organization).active()
        key: ApiKey = get_object_or_404(keys, public_id=key_id)
        return key

    @extend_schema(responses=ApiKeySerializer, summary="Describe an API key")
    def get(self, request: Request, key_id: str) -> Response:
        return Response(ApiKeySerializer(self._key(key_id)).data)

    @extend_schema(responses={204: None}, summary="Revoke an API key")
    def delete(self, request: Request, key_id: str) -> Response:
        api_key_revoke(key=self._key(key_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


@csrf_exempt
def not_found(request: Request, *args: Any, **kwargs: Any) -> JsonResponse:
    """Any other ``/api/v1/`` path: a JSON 404 (never the HTML debug page), with a hint
    when the path only lacks its trailing slash."""
    message = f"No API endpoint at {request.path}."
    if not request.path.endswith("/"):
        try:
            match = resolve(request.path + "/")
        except Resolver404:
            match = None
        if match is not None and match.func is not not_found:
            message += f" Did you mean {request.path}/ (with a trailing slash)?"
    return JsonResponse({"error": message}, status=404)


class AuditEventSerializer(ModelSerializer):
    class Meta:
        model = AuditEvent
        fields = ["at", "actor_label", "action", "target_type", "target_id", "target_name"]
        read_only_fields = fields


class AuditQuerySerializer(Serializer):
    action = serializers.ChoiceField(choices=list(ACTIONS), required=False)
    target_type = serializers.ChoiceField(choices=list(TARGET_TYPES), required=False)
    actor = serializers.CharField(
        required=False, max_length=100, help_text="Contained in the actor's label."
    )


class AuditEventListView(OrgScopedView):
    @extend_schema(
        parameters=[AuditQuerySerializer, *PAGE_PARAMETERS],
        responses=AuditEventSerializer(many=True),
        summary="The organization's audit log, newest first",
    )
    def get(self, request: Request) -> Response:
        query = query_params(request, AuditQuerySerializer)
        return self.paginated(audit_events(self.organization, **query), AuditEventSerializer)


# The roles a member can be given (the owner is made by handing ownership on).
TEAM_ROLES = [Membership.Role.ADMIN.value, Membership.Role.MEMBER.value]


class MemberSerializer(ModelSerializer):
    email = serializers.EmailField(source="user.email", read_only=True)

    class Meta:
        model = Membership
        fields = ["email", "role", "created_at"]
        read_only_fields = fields


class MemberRoleSerializer(StrictSerializer):
    role = serializers.ChoiceField(choices=TEAM_ROLES, required=False)


class InvitationCreateSerializer(StrictSerializer):
    email = serializers.EmailField()
    role = serializers.ChoiceField(choices=TEAM_ROLES)


class InvitationCreatedSerializer(Serializer):
    email = serializers.EmailField()
    role = serializers.CharField()
    link = serializers.CharField(help_text="Works once. Shown once; pass it on now.")
    emailed = serializers.BooleanField()


def _principal(request: Request) -> ApiPrincipal:
    """The caller, as `ApiKeyAuthentication` found it (the views' permission requires one)."""
    if not isinstance(request.auth, ApiPrincipal):
        raise NotAuthenticated("This operation takes an API key.")
    return request.auth


def _api_actor(request: Request) -> Membership:
    """An API key acts as a member of its organization with the key's role now."""
    principal = _principal(request)
    return Membership(organization=principal.organization, role=principal.role)


class MemberListView(OrgScopedView):
    @extend_schema(
        responses=MemberSerializer(many=True),
        parameters=PAGE_PARAMETERS,
        summary="List the organization's members and their roles",
    )
    def get(self, request: Request) -> Response:
        members = Membership.objects.filter(organization=self.organization).select_related("user")
        return self.paginated(members.order_by("user__email"), MemberSerializer)


class MemberDetailView(OrgScopedView):
    def _member(self, email: str) -> Membership:
        return get_object_or_404(
            Membership.objects.select_related("user"),
            organization=self.organization,
            user__email=email,
        )

    @extend_schema(
        request=MemberRoleSerializer, responses=MemberSerializer, summary="Change a member's role"
    )
    def patch(self, request: Request, email: str) -> Response:
        member = self._member(email)
        data = MemberRoleSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        if "role" in data.validated_data:  # PATCH {} changes nothing
            team.member_role_change(
                actor=_api_actor(request),
                target=member,
                role=data.validated_data["role"],
            )
        return Response(MemberSerializer(member).data)

    @extend_schema(responses={204: None}, summary="Remove a member (not the owner)")
    def delete(self, request: Request, email: str) -> Response:
        team.member_remove(actor=_api_actor(request), target=self._member(email))
        return Response(status=status.HTTP_204_NO_CONTENT)


class InvitationListView(OrgScopedView):
    @extend_schema(
        request=InvitationCreateSerializer,
        responses={201: InvitationCreatedSerializer},
        summary="Invite someone by email (the link is also in the answer, once)",
    )
    def post(self, request: Request) -> Response:
        data = InvitationCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        invitation, link, sent = team.invitation_create(
            organization=self.organization,
            invited_by=_principal(request).key.owner,
            link_base=settings.FLOE_PUBLIC_URL,
            **data.validated_data,
        )
        body = {"email": invitation.email, "role": invitation.role, "link": link, "emailed": sent}
        return Response(InvitationCreatedSerializer(body).data, status=status.HTTP_201_CREATED)
