"""The web console's pages: each app's, included from its ``urls``. Public ids only in
URLs; every write is a POST."""

from django.urls import include, path

urlpatterns = [
    path("", include("team.console.urls")),  # accounts, team, audit log, API keys
    path("", include("virtualclusters.console.urls")),  # dashboard, clusters and their pages
    path("", include("billing.console_urls")),
    path("", include("schema_registry.console_urls")),  # the Schemas pages
]
