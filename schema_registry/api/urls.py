"""``/api/v1/clusters/<id>/schemas/…`` (included by the API urls)."""

from django.urls import path

from schema_registry.api import views

urlpatterns = [
    path(
        "clusters/<str:cluster_id>/schemas/config/",
        views.ConfigView.as_view(),
        name="api-schema-config",
    ),
    path(
        "clusters/<str:cluster_id>/schemas/subjects/",
        views.SubjectListView.as_view(),
        name="api-schema-subjects",
    ),
    path(
        "clusters/<str:cluster_id>/schemas/subjects/<str:subject>/",
        views.SubjectDetailView.as_view(),
        name="api-schema-subject",
    ),
    path(
        "clusters/<str:cluster_id>/schemas/subjects/<str:subject>/versions/",
        views.VersionListView.as_view(),
        name="api-schema-versions",
    ),
    path(
        "clusters/<str:cluster_id>/schemas/subjects/<str:subject>/versions/<int:version>/",
        views.VersionDetailView.as_view(),
        name="api-schema-version",
    ),
]
