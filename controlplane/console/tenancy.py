"""The console's one choke point for tenancy: everything goes through the user's org."""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import get_object_or_404, render

from controlplane.models import Membership, Organization
from controlplane.services import organization_for_user
from controlplane.team import can_change
from virtualclusters.models import VirtualCluster


def current_org(request) -> Organization | None:
    """The signed-in user's organization, looked up once per request."""
    if not hasattr(request, "_floe_org"):
        request._floe_org = organization_for_user(request.user)
    return request._floe_org


def current_membership(request) -> Membership | None:
    """The signed-in user's membership of their organization (its role)."""
    if not hasattr(request, "_floe_membership"):
        org = current_org(request)
        request._floe_membership = (
            Membership.objects.filter(organization=org, user=request.user).first()
            if org is not None
            else None
        )
    return request._floe_membership


class ReadOnlyMembers:
    """Middleware, the one check for console writes: a member with the read-only role
    gets a 403 for any POST but logging out and accepting an invitation."""

    OPEN_PATHS = ("/logout", "/login", "/signup", "/invite/", "/api/", "/agent/")

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if (
            request.method == "POST"
            and request.user.is_authenticated
            and not request.path.startswith(self.OPEN_PATHS)
        ):
            membership = current_membership(request)
            if membership is not None and not can_change(membership.role):
                return render(request, "console/read_only.html", status=403)
        return self.get_response(request)


def org_or_404(request) -> Organization:
    """The user's organization; a user without one (e.g. a bare superuser) sees nothing."""
    org = current_org(request)
    if org is None:
        raise Http404("You are not a member of any organization.")
    return org


def cluster_or_404(request, cluster_id: str) -> VirtualCluster:
    """A cluster of the user's organization; anyone else's is a 404, never a 403."""
    return get_object_or_404(
        VirtualCluster.objects.for_org(current_org(request)), public_id=cluster_id
    )
