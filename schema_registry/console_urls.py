"""The console's Schemas pages of a cluster (included by `controlplane.console_urls`)."""

from django.urls import path

from schema_registry import console

urlpatterns = [
    path("clusters/<str:cluster_id>/schemas/", console.cluster_schemas, name="cluster-schemas"),
    path(
        "clusters/<str:cluster_id>/schemas-compatibility",
        console.cluster_schemas_config,
        name="cluster-schemas-config",
    ),
    path(
        "clusters/<str:cluster_id>/schemas/<str:subject>/",
        console.schema_subject,
        name="schema-subject",
    ),
    path(
        "clusters/<str:cluster_id>/schemas/<str:subject>/delete",
        console.schema_subject_delete,
        name="schema-subject-delete",
    ),
    path(
        "clusters/<str:cluster_id>/schemas/<str:subject>/delete-version",
        console.schema_version_delete,
        name="schema-version-delete",
    ),
    path(
        "clusters/<str:cluster_id>/schemas/<str:subject>/compatibility",
        console.schema_subject_config,
        name="schema-subject-config",
    ),
]
