"""``/api/v1/``: the REST API (everything the console does)."""

from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from controlplane.api.cluster_metrics import ClusterMetricsView
from team.api import views
from virtualclusters.api import agents as vc_agents
from virtualclusters.api import files as vc_files
from virtualclusters.api import groups as vc_groups
from virtualclusters.api import (
    jobs_views,
    migrations_views,
    pipelines_views,
    share_groups,
    tables_views,
)
from virtualclusters.api import views as vc

urlpatterns = [
    path(
        "schema/",
        SpectacularAPIView.as_view(permission_classes=[], authentication_classes=[]),
        name="api-schema",
    ),
    path(
        "docs/",
        SpectacularSwaggerView.as_view(
            url_name="api-schema", permission_classes=[], authentication_classes=[]
        ),
        name="api-docs",
    ),
    path(
        "redoc/",
        SpectacularRedocView.as_view(
            url_name="api-schema", permission_classes=[], authentication_classes=[]
        ),
        name="api-redoc",
    ),
    path("api-keys/", views.ApiKeyListView.as_view(), name="api-keys"),
    path("audit-events/", views.AuditEventListView.as_view(), name="api-audit-events"),
    path("members/", views.MemberListView.as_view(), name="api-members"),
    path("members/<str:email>/", views.MemberDetailView.as_view(), name="api-member"),
    path("invitations/", views.InvitationListView.as_view(), name="api-invitations"),
    path("api-keys/<str:key_id>/", views.ApiKeyDetailView.as_view(), name="api-key"),
    path("clusters/", vc.ClusterListView.as_view(), name="api-clusters"),
    path("clusters/<str:cluster_id>/", vc.ClusterDetailView.as_view(), name="api-cluster"),
    path(
        "clusters/<str:cluster_id>/config/",
        vc.ClusterConfigView.as_view(),
        name="api-cluster-config",
    ),
    path(
        "clusters/<str:cluster_id>/bucket/",
        vc.ClusterBucketView.as_view(),
        name="api-cluster-bucket",
    ),
    path(
        "clusters/<str:cluster_id>/agent-keys/",
        vc.AgentKeyListView.as_view(),
        name="api-agent-keys",
    ),
    path(
        "clusters/<str:cluster_id>/agent-keys/<str:key_id>/",
        vc.AgentKeyDetailView.as_view(),
        name="api-agent-key",
    ),
    path(
        "clusters/<str:cluster_id>/agents/",
        vc_agents.AgentListView.as_view(),
        name="api-agents",
    ),
    path(
        "clusters/<str:cluster_id>/metrics",
        ClusterMetricsView.as_view(),
        name="api-cluster-metrics",
    ),
    path("clusters/<str:cluster_id>/topics/", vc.TopicListView.as_view(), name="api-topics"),
    path(
        "clusters/<str:cluster_id>/topics/<str:name>/partitions/<int:partition>/locate",
        vc_files.RecordLocateView.as_view(),
        name="api-record-locate",
    ),
    path(
        "clusters/<str:cluster_id>/files/", vc_files.KnownFileListView.as_view(), name="api-files"
    ),
    path(
        "clusters/<str:cluster_id>/topics/<str:name>/",
        vc.TopicDetailView.as_view(),
        name="api-topic",
    ),
    path(
        "clusters/<str:cluster_id>/topics/<str:name>/table/",
        tables_views.TopicTableView.as_view(),
        name="api-topic-table",
    ),
    path(
        "clusters/<str:cluster_id>/diagnostics/",
        vc.DiagnosticsView.as_view(),
        name="api-diagnostics",
    ),
    path(
        "clusters/<str:cluster_id>/throughput/",
        vc.ThroughputView.as_view(),
        name="api-throughput",
    ),
    path(
        "clusters/<str:cluster_id>/topics/<str:name>/records/",
        vc.TopicRecordsView.as_view(),
        name="api-topic-records",
    ),
    path(
        "clusters/<str:cluster_id>/groups/",
        vc_groups.GroupListView.as_view(),
        name="api-groups",
    ),
    path(
        "clusters/<str:cluster_id>/groups/<path:group_id>/",
        vc_groups.GroupDetailView.as_view(),
        name="api-group",
    ),
    path(
        "clusters/<str:cluster_id>/share-groups/",
        share_groups.ShareGroupListView.as_view(),
        name="api-share-groups",
    ),
    path(
        "clusters/<str:cluster_id>/share-groups/<path:group_id>/reset-offsets/",
        share_groups.ShareOffsetsResetView.as_view(),
        name="api-share-group-reset-offsets",
    ),
    path(
        "clusters/<str:cluster_id>/share-groups/<path:group_id>/delete-offsets/",
        share_groups.ShareOffsetsDeleteView.as_view(),
        name="api-share-group-delete-offsets",
    ),
    path(
        "clusters/<str:cluster_id>/share-groups/<path:group_id>/",
        share_groups.ShareGroupDetailView.as_view(),
        name="api-share-group",
    ),
    path(
        "clusters/<str:cluster_id>/job-runs/",
        jobs_views.JobRunListView.as_view(),
        name="api-job-runs",
    ),
    path(
        "clusters/<str:cluster_id>/migrations/",
        migrations_views.MigrationListView.as_view(),
        name="api-migrations",
    ),
    path(
        "clusters/<str:cluster_id>/migrations/<str:migration_id>/",
        migrations_views.MigrationDetailView.as_view(),
        name="api-migration",
    ),
    path(
        "clusters/<str:cluster_id>/migrations/<str:migration_id>/cutover/",
        migrations_views.MigrationCutoverView.as_view(),
        name="api-migration-cutover",
    ),
    path(
        "clusters/<str:cluster_id>/pipelines/",
        pipelines_views.PipelineListView.as_view(),
        name="api-pipelines",
    ),
    path(
        "clusters/<str:cluster_id>/pipelines/<str:name>/",
        pipelines_views.PipelineDetailView.as_view(),
        name="api-pipeline",
    ),
    path(
        "clusters/<str:cluster_id>/pipelines/<str:name>/configurations/",
        pipelines_views.ConfigurationListView.as_view(),
        name="api-pipeline-configurations",
    ),
    path(
        "clusters/<str:cluster_id>/pipelines/<str:name>/configurations/<int:version>/",
        pipelines_views.ConfigurationDetailView.as_view(),
        name="api-pipeline-configuration",
    ),
    path(
        "clusters/<str:cluster_id>/pipelines/<str:name>/state",
        pipelines_views.PipelineStateView.as_view(),
        name="api-pipeline-state",
    ),
    path(
        "clusters/<str:cluster_id>/pipelines/<str:name>/dry-run",
        pipelines_views.PipelineDryRunView.as_view(),
        name="api-pipeline-dry-run",
    ),
    path("", include("virtualclusters.api.security_urls")),
    path("", include("schema_registry.api.urls")),
    path("billing/", include("billing.api.urls")),
    re_path(r"^[\s\S]*$", views.not_found),  # last: anything else under /api/v1/ is a JSON 404
]
