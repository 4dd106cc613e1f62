"""Root URLs: the console, the REST API, the agent API, the Iceberg catalogs, health."""

from django.urls import include, path

from controlplane.health import healthz
from controlplane.metrics import metrics_view

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics_view, name="metrics"),
    path("api/v1/", include("controlplane.api.urls")),
    path("agent/v1/", include("controlplane.agent_urls")),
    path("iceberg/", include("virtualclusters.tables.catalog_urls")),
    path("", include("controlplane.console_urls")),
]

# 503 with Retry-After, not 500, while the metadata store is unreachable.
handler500 = "controlplane.unavailable.server_error"
