"""A cluster's Diagnostics page: small files per agent, producers' batching and zone
hints, each problem with advice (`virtualclusters.diagnostics`; the REST API's
``GET /api/v1/clusters/{id}/diagnostics/`` says the same)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from virtualclusters.console.lookup import cluster_or_404
from virtualclusters.diagnostics import SMALL_FILE_BYTES, cluster_diagnostics


@login_required
@require_GET
def cluster_diagnostics_page(request: HttpRequest, cluster_id: str) -> HttpResponse:
    cluster = cluster_or_404(request, cluster_id)
    context = {"cluster": cluster, "small_file_bytes": SMALL_FILE_BYTES,
               **cluster_diagnostics(cluster)}  # fmt: skip
    return render(request, "console/diagnostics.html", context)
