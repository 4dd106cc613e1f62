"""The console page of a cluster's background jobs: recent runs and the files they manage."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from virtualclusters.console.lookup import cluster_or_404
from virtualclusters.jobs import selectors as jobs_selectors

RUNS_SHOWN = 100


@login_required
def cluster_jobs(request: HttpRequest, cluster_id: str) -> HttpResponse:
    """Job runs (newest first) and the cluster's files per level."""
    cluster = cluster_or_404(request, cluster_id)
    return render(
        request,
        "virtualclusters/jobs.html",
        {
            "cluster": cluster,
            "runs": jobs_selectors.job_runs(cluster)[:RUNS_SHOWN],
            "storage": jobs_selectors.storage_summary(cluster),
        },
    )
