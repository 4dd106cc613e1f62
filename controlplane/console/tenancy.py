"""The console's one choke point for tenancy: everything goes through the user's org."""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import get_object_or_404

from controlplane.models import Organization
from controlplane.services import organization_for_user
from virtualclusters.models import VirtualCluster


def current_org(request) -> Organization | None:
    """The signed-in user's organization, looked up once per request."""
    if not hasattr(request, "_floe_org"):
        request._floe_org = organization_for_user(request.user)
    return request._floe_org


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
