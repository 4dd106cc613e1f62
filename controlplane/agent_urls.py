"""``/agent/v1/``: the agent API (docs/AGENT_API.md), from the apps that serve it."""

from django.urls import include, path, re_path

from metadata_store.agent_api.endpoint import unknown_call

urlpatterns = [
    path("", include("metadata_store.agent_api.urls")),
    path("", include("virtualclusters.groups.agent_urls")),
    path("", include("virtualclusters.security.agent_urls")),
    path("", include("virtualclusters.jobs.agent_urls")),
    path("", include("virtualclusters.mirror.agent_urls")),
    path("", include("virtualclusters.browsing.agent_urls")),
    path("", include("virtualclusters.pipelines.agent_urls")),
    path("", include("schema_registry.agent_urls")),
    re_path(r"", unknown_call),  # anything else: a JSON 404, never an HTML page
]
