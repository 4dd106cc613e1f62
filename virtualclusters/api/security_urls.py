"""``/api/v1/clusters/<id>/sasl-credentials/`` and ``/acls/`` (included by the API urls)."""

from django.urls import path

from virtualclusters.api import security_views as views

urlpatterns = [
    path(
        "clusters/<str:cluster_id>/sasl-credentials/",
        views.SaslCredentialListView.as_view(),
        name="api-sasl-credentials",
    ),
    path(
        "clusters/<str:cluster_id>/sasl-credentials/<str:credential_id>/",
        views.SaslCredentialDetailView.as_view(),
        name="api-sasl-credential",
    ),
    path("clusters/<str:cluster_id>/acls/", views.AclListView.as_view(), name="api-acls"),
    path(
        "clusters/<str:cluster_id>/acls/<str:acl_id>/",
        views.AclDetailView.as_view(),
        name="api-acl",
    ),
]
