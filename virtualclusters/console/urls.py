"""The cluster pages' URLs (the project's ``console_urls`` includes them at the root)."""

from django.urls import include, path

from virtualclusters.console import (
    agent_keys,
    agents,
    clusters,
    diagnostics,
    groups,
    jobs,
    share_groups,
    throughput,
    topics,
)

urlpatterns = [
    path("", clusters.dashboard, name="dashboard"),
    path("clusters/new", clusters.cluster_new, name="cluster-new"),
    path("clusters/<str:cluster_id>/", clusters.cluster_detail, name="cluster-detail"),
    path("clusters/<str:cluster_id>/config", clusters.cluster_config, name="cluster-config"),
    path("clusters/<str:cluster_id>/rename", clusters.cluster_rename, name="cluster-rename"),
    path("clusters/<str:cluster_id>/delete", clusters.cluster_delete, name="cluster-delete"),
    path("clusters/<str:cluster_id>/agents/", agents.cluster_agents, name="cluster-agents"),
    path(
        "clusters/<str:cluster_id>/diagnostics/",
        diagnostics.cluster_diagnostics_page,
        name="cluster-diagnostics",
    ),
    path(
        "clusters/<str:cluster_id>/throughput",
        throughput.cluster_throughput,
        name="cluster-throughput",
    ),
    path("clusters/<str:cluster_id>/topics/new", topics.topic_new, name="topic-new"),
    path("clusters/<str:cluster_id>/topics/<str:name>/", topics.topic_detail, name="topic-detail"),
    path(
        "clusters/<str:cluster_id>/topics/<str:name>/config",
        topics.topic_config,
        name="topic-config",
    ),
    path(
        "clusters/<str:cluster_id>/topics/<str:name>/delete",
        topics.topic_remove,
        name="topic-delete",
    ),
    path("clusters/<str:cluster_id>/groups/", groups.cluster_groups, name="cluster-groups"),
    path(
        "clusters/<str:cluster_id>/share-groups/",
        share_groups.cluster_share_groups,
        name="cluster-share-groups",
    ),
    path("clusters/<str:cluster_id>/jobs", jobs.cluster_jobs, name="cluster-jobs"),
    path(
        "clusters/<str:cluster_id>/agent-keys/new",
        agent_keys.agent_key_create,
        name="agent-key-create",
    ),
    path(
        "clusters/<str:cluster_id>/agent-keys/<str:key_id>/revoke",
        agent_keys.agent_key_revoke,
        name="agent-key-revoke",
    ),
    path("", include("virtualclusters.console.security")),  # SASL users and ACLs
    path("", include("virtualclusters.console.migrations")),  # from another Kafka
    path("", include("virtualclusters.console.pipelines")),  # managed data pipelines
]
