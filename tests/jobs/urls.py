"""The root URLs plus the jobs page and endpoint (until controlplane wires them in)."""

from django.urls import path

from controlplane.urls import urlpatterns as root
from virtualclusters.api import jobs_views
from virtualclusters.console import jobs as console_jobs

urlpatterns = [
    path(
        "api/v1/clusters/<str:cluster_id>/job-runs/",
        jobs_views.JobRunListView.as_view(),
        name="api-job-runs",
    ),
    path("clusters/<str:cluster_id>/jobs", console_jobs.cluster_jobs, name="cluster-jobs"),
    *root,
]
