"""The console's one choke point for tenancy: everything goes through the user's org."""

from __future__ import annotations

from django.db.models import F
from django.http import Http404
from django.shortcuts import render

from tenancy import permissions
from tenancy.models import Membership, Organization
from tenancy.selectors import membership_for, memberships_of

# Keys in lists (API keys, agent keys): active ones (never revoked) first, newest first.
ACTIVE_FIRST = F("revoked_at").desc(nulls_first=True)

# The session remembers which of a person's organizations they work in (the switcher).
ORG_SESSION_KEY = "floe_org"


def current_membership(request) -> Membership | None:
    """The signed-in person's membership of the organization they work in (its role),
    looked up once per request."""
    if not hasattr(request, "_floe_membership"):
        session = getattr(request, "session", None)
        chosen = session.get(ORG_SESSION_KEY) if session is not None else None
        request._floe_memberships = memberships_of(request.user)
        request._floe_membership = membership_for(request._floe_memberships, chosen)
    return request._floe_membership


def my_memberships(request) -> list[Membership]:
    """All the signed-in person's memberships (the switcher lists them)."""
    current_membership(request)
    return request._floe_memberships


def current_org(request) -> Organization | None:
    """The organization the signed-in person works in."""
    membership = current_membership(request)
    return membership.organization if membership is not None else None


class RolePermissions:
    """Middleware, the console's side of ``tenancy.permissions``: a signed-in
    person whose role in the organization does not allow the page's action gets a 403
    that says why. (The REST API asks the same rule in ``team.api.auth.ApiKeyPermission``.)"""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.path.startswith(("/api/", "/agent/")) or not request.user.is_authenticated:
            return None
        url_name = request.resolver_match.url_name if request.resolver_match else None
        membership = current_membership(request)
        if membership is None or permissions.allows(membership.role, url_name, request.method):
            return None  # no organization: the views answer 404
        context = {"reason": permissions.refusal(url_name)}
        return render(request, "console/read_only.html", context, status=403)


def membership_or_404(request) -> Membership:
    """The user's membership of the organization they work in; a user without one (e.g.
    a bare superuser) sees nothing."""
    membership = current_membership(request)
    if membership is None:
        raise Http404("You are not a member of any organization.")
    return membership


def org_or_404(request) -> Organization:
    """The user's organization; a user without one (e.g. a bare superuser) sees nothing."""
    return membership_or_404(request).organization
