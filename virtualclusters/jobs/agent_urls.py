"""``/agent/v1/`` calls of the jobs role (docs/AGENT_API.md)."""

from django.urls import path

from virtualclusters.jobs import agent_api as j

urlpatterns = [
    path("jobs/lease", j.jobs_lease),
    path("jobs/heartbeat", j.jobs_heartbeat),
    path("jobs/report", j.jobs_report),
]
