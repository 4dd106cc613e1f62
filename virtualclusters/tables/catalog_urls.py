"""``/iceberg/<cluster id>/v1/…``: each cluster's Iceberg REST catalog (``catalog_views``).
A catalog's base URI (``catalog_url``) is ``<control plane>/iceberg/<cluster id>``."""

from django.urls import path

from virtualclusters.tables import catalog_views as views

urlpatterns = [
    path("<str:cluster_id>/v1/config", views.ConfigView.as_view(), name="iceberg-config"),
    path(
        "<str:cluster_id>/v1/namespaces",
        views.NamespaceListView.as_view(),
        name="iceberg-namespaces",
    ),
    path(
        "<str:cluster_id>/v1/namespaces/<str:namespace>",
        views.NamespaceDetailView.as_view(),
        name="iceberg-namespace",
    ),
    path(
        "<str:cluster_id>/v1/namespaces/<str:namespace>/tables",
        views.TableListView.as_view(),
        name="iceberg-tables",
    ),
    path(
        "<str:cluster_id>/v1/namespaces/<str:namespace>/tables/<str:table>",
        views.TableDetailView.as_view(),
        name="iceberg-table",
    ),
]
