"""The metadata store's calls of the agent API (docs/AGENT_API.md)."""

from django.urls import path

from metadata_store.agent_api import views as a

urlpatterns = [
    path("register", a.register),
    path("heartbeat", a.heartbeat),
    path("commit", a.commit),
    path("mirror/commit", a.mirror_commit),
    path("fetch-plan", a.fetch_plan),
    path("tail-feed", a.tail_feed),
    path("list-offsets", a.list_offsets),
    path("delete-records", a.delete_records),
    path("init-producer-id", a.init_producer_id),
    path("topics/list", a.topics_list_view),
    path("topics/create", a.topics_create_view),
    path("topics/delete", a.topics_delete_view),
    path("topics/create-partitions", a.topics_create_partitions_view),
    path("topics/describe-configs", a.topics_describe_configs_view),
    path("topics/alter-configs", a.topics_alter_configs_view),
    path("broker-configs/describe", a.broker_configs_describe_view),
    path("broker-configs/alter", a.broker_configs_alter_view),
    path("offsets/commit", a.offsets_commit),
    path("offsets/fetch", a.offsets_fetch),
    path("groups/leases", a.groups_leases),
    path("groups/save", a.groups_save),
    path("journal/lease", a.journal_lease),
    path("journal/status", a.journal_status_view),
    path("txn/add-partitions", a.txn_add_partitions),
    path("txn/add-offsets", a.txn_add_offsets),
    path("txn/offset-commit", a.txn_offset_commit),
    path("txn/end", a.txn_end),
    path("txn/describe", a.txn_describe),
    path("txn/list", a.txn_list),
]
