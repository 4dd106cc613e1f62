"""``/agent/v1/``: the metadata API agents call (AGENT_API.md)."""

from django.urls import include, path, re_path

from . import agent_api as a
from . import agent_groups as g

urlpatterns = [
    path("register", a.register),
    path("heartbeat", a.heartbeat),
    path("commit", a.commit),
    path("fetch-plan", a.fetch_plan),
    path("list-offsets", a.list_offsets),
    path("delete-records", a.delete_records),
    path("init-producer-id", a.init_producer_id),
    path("topics/list", a.topics_list_view),
    path("topics/create", a.topics_create_view),
    path("topics/delete", a.topics_delete_view),
    path("topics/create-partitions", a.topics_create_partitions_view),
    path("topics/describe-configs", a.topics_describe_configs_view),
    path("topics/alter-configs", a.topics_alter_configs_view),
    path("offsets/commit", a.offsets_commit),
    path("offsets/fetch", a.offsets_fetch),
    path("offsets/delete", g.offsets_delete),
    path("groups/report", g.groups_report),
    path("groups/list", g.groups_list),
    path("groups/delete", g.groups_delete_view),
    path("", include("virtualclusters.agent_security_urls")),
    re_path(r"", a.unknown_call),  # anything else: a JSON 404, never an HTML page
]
