"""``/agent/v1/`` calls of a migration's copier (docs/AGENT_API.md)."""

from django.urls import path

from virtualclusters.mirror import agent_api as m

urlpatterns = [
    path("migrations/lease", m.migrations_lease),
    path("migrations/report", m.migrations_report),
    path("migrations/topic", m.migrations_topic),
    path("migrations/group-offsets", m.migrations_group_offsets),
    path("migrations/link-subject", m.migrations_link_subject),
]
