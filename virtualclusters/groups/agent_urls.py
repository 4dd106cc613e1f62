"""``/agent/v1/`` calls for consumer groups (docs/AGENT_API.md)."""

from django.urls import path

from virtualclusters.groups import agent_api as g

urlpatterns = [
    path("offsets/delete", g.offsets_delete),
    path("groups/report", g.groups_report),
    path("groups/list", g.groups_list),
    path("groups/delete", g.groups_delete_view),
]
