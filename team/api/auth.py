"""API-key authentication for the REST API: ``Authorization: Bearer floe_api_…``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from team import audit
from team.models import ApiKey
from team.services import api_key_authenticate
from tenancy import permissions
from tenancy.models import Organization


@dataclass(frozen=True)
class ApiPrincipal:
    """Who is calling: an organization, through one of its API keys, with the role the
    key acts with now (``services.api_key_role``)."""

    organization: Organization
    key: ApiKey
    role: str
    is_authenticated: bool = True


class ApiKeyAuthentication(BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, ApiPrincipal] | None:
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
        found = api_key_authenticate(plaintext)
        if found is None:
            raise exceptions.AuthenticationFailed("Unknown or revoked API key.")
        key, role = found
        principal = ApiPrincipal(key.organization, key, role)
        audit.set_actor(key.owner, f"API key {key.name} ({key.public_id})")
        return principal, principal

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


class ApiKeyPermission(BasePermission):
    """The one rule per action (``tenancy.permissions``), for the key's role."""

    def has_permission(self, request: Request, view: Any) -> bool:
        principal = request.auth
        if not isinstance(principal, ApiPrincipal):
            return False
        url_name = request.resolver_match.url_name if request.resolver_match else None
        if permissions.allows(principal.role, url_name, request.method or ""):
            return True
        self.message = permissions.refusal(url_name)
        return False


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    """How the OpenAPI schema (and the docs page's Authorize button) describes API keys."""

    target_class = ApiKeyAuthentication
    name = "apiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key from the console's API keys page: "
            "`Authorization: Bearer floe_api_…`.",
        }
