"""The cluster pages' one way to a cluster: through the signed-in person's organization."""

from __future__ import annotations

from django.http import HttpRequest
from django.shortcuts import get_object_or_404

from tenancy.console.scope import current_org
from virtualclusters.models import VirtualCluster


def cluster_or_404(request: HttpRequest, cluster_id: str) -> VirtualCluster:
    """A cluster of the user's organization; anyone else's is a 404, never a 403."""
    return get_object_or_404(
        VirtualCluster.objects.for_org(current_org(request)), public_id=cluster_id
    )
