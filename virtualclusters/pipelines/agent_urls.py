"""``/agent/v1/`` calls of the pipelines role (docs/AGENT_API.md)."""

from django.urls import path

from virtualclusters.pipelines import agent_api as p

urlpatterns = [
    path("pipelines/assignments", p.pipelines_assignments),
    path("pipelines/report", p.pipelines_report),
]
