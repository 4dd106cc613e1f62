"""API-key authentication for the REST API: ``Authorization: Bearer floe_api_…``."""

from __future__ import annotations

from dataclasses import dataclass

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions, permissions
from rest_framework.authentication import BaseAuthentication

from controlplane import audit
from controlplane.models import ApiKey, Organization
from controlplane.services import api_key_authenticate


@dataclass(frozen=True)
class ApiPrincipal:
    """Who is calling: an organization, through one of its API keys."""

    organization: Organization
    key: ApiKey
    is_authenticated: bool = True

    @property
    def read_only(self) -> bool:
        return self.key.read_only


class ApiKeyAuthentication(BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = request.headers.get("Authorization", "")
        plaintext = request.headers.get("X-Api-Key", "")
        if header:
            scheme, _, value = header.partition(" ")
            if scheme != self.keyword or not value.strip():
                raise exceptions.AuthenticationFailed(
                    "Use the header 'Authorization: Bearer <api key>'."
                )
            plaintext = value.strip()
        if not plaintext:
            return None
        key = api_key_authenticate(plaintext)
        if key is None:
            raise exceptions.AuthenticationFailed("Unknown or revoked API key.")
        principal = ApiPrincipal(key.organization, key)
        audit.set_actor(key.created_by, f"API key {key.name} ({key.public_id})")
        return principal, principal

    def authenticate_header(self, request) -> str:
        return self.keyword


class ApiKeyPermission(permissions.BasePermission):
    """Any valid key may read; only admin keys may write."""

    message = "This API key is read-only; use an admin key to make changes."

    def has_permission(self, request, view) -> bool:
        principal = request.auth
        if not isinstance(principal, ApiPrincipal):
            return False
        if request.method in permissions.SAFE_METHODS:
            return True
        return not principal.read_only


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    """How the OpenAPI schema (and the docs page's Authorize button) describes API keys."""

    target_class = ApiKeyAuthentication
    name = "apiKey"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key from the console's API keys page: "
            "`Authorization: Bearer floe_api_…`.",
        }
