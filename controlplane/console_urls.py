"""The web console's pages. Public ids only in URLs; every write is a POST."""

from django.urls import include, path, re_path

from billing import console as billing
from controlplane.console import (
    accounts,
    agent_keys,
    agents,
    api_keys,
    clusters,
    groups,
    team,
    throughput,
    topics,
)
from controlplane.console import audit as console_audit
from controlplane.console import jobs as console_jobs

urlpatterns = [
    path("signup", accounts.signup, name="signup"),
    path("login", accounts.log_in, name="login"),
    path("logout", accounts.log_out, name="logout"),
    path("", clusters.dashboard, name="dashboard"),
    path("clusters/new", clusters.cluster_new, name="cluster-new"),
    path("clusters/<str:cluster_id>/", clusters.cluster_detail, name="cluster-detail"),
    path("clusters/<str:cluster_id>/config", clusters.cluster_config, name="cluster-config"),
    path("clusters/<str:cluster_id>/rename", clusters.cluster_rename, name="cluster-rename"),
    path("clusters/<str:cluster_id>/delete", clusters.cluster_delete, name="cluster-delete"),
    path("clusters/<str:cluster_id>/agents/", agents.cluster_agents, name="cluster-agents"),
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
    path("clusters/<str:cluster_id>/jobs", console_jobs.cluster_jobs, name="cluster-jobs"),
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
    path("team", team.team_page, name="team"),
    path("audit", console_audit.audit_log, name="audit-log"),
    path("team/members/<str:email>", team.member_change, name="team-member"),
    path("invite/<str:token>", team.invitation_accept, name="invitation-accept"),
    path("orgs/switch", team.org_switch, name="org-switch"),
    path("api-keys", api_keys.api_key_list, name="console-api-keys"),
    path("api-keys/new", api_keys.api_key_create, name="console-api-key-create"),
    path("api-keys/<str:key_id>/revoke", api_keys.api_key_revoke, name="console-api-key-revoke"),
    path("", include("controlplane.console.security")),  # SASL users and ACLs
    path("", include("schema_registry.console_urls")),  # the Schemas pages
    path("billing", billing.billing_usage, name="billing-usage"),
    path("billing/plan", billing.billing_plan_change, name="billing-plan"),
    path("billing/budget", billing.billing_budget, name="billing-budget"),
    re_path(
        r"^billing/invoices/(?P<invoice_id>inv_\w+)\.(?P<fmt>pdf|csv)$",
        billing.billing_invoice_file,
        name="billing-invoice-file",
    ),
    path("billing/invoices/<str:invoice_id>", billing.billing_invoice, name="billing-invoice"),
]
