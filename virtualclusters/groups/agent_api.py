"""Agent API calls for consumer groups (docs/AGENT_API.md: groups/report, groups/list,
groups/delete, offsets/delete). Thin adapters over `groups.py`."""

from __future__ import annotations

from typing import Any

from metadata_store.agent_api import schemas
from metadata_store.agent_api.endpoint import endpoint
from metadata_store.agent_api.schemas import as_dicts
from virtualclusters.groups.services import (
    group_offsets_delete,
    group_report_apply,
    group_summaries,
    groups_delete,
)
from virtualclusters.models import VirtualCluster


@endpoint(schemas.GroupsReportRequest)
def groups_report(cluster: VirtualCluster, body: schemas.GroupsReportRequest) -> dict[str, Any]:
    groups = as_dicts(body.groups)
    return {"forget": group_report_apply(cluster=cluster, agent_id=body.agent_id, groups=groups)}


@endpoint(schemas.GroupsListRequest)
def groups_list(cluster: VirtualCluster, body: schemas.GroupsListRequest) -> dict[str, Any]:
    summaries = group_summaries(cluster, body.group_ids)
    return {
        "groups": [
            {
                "group_id": s.group_id,
                "has_offsets": s.has_offsets,
                "protocol_type": s.protocol_type,
                "state": s.state,
                "agent_id": s.agent_id,
                "group_type": s.group_type,
            }
            for s in summaries.values()
        ]
    }


@endpoint(schemas.GroupsDeleteRequest)
def groups_delete_view(
    cluster: VirtualCluster, body: schemas.GroupsDeleteRequest
) -> dict[str, Any]:
    results = groups_delete(cluster=cluster, group_ids=body.group_ids)
    return {"groups": [{"group_id": g, "error_code": code} for g, code in results.items()]}


@endpoint(schemas.OffsetsDeleteRequest)
def offsets_delete(cluster: VirtualCluster, body: schemas.OffsetsDeleteRequest) -> dict[str, Any]:
    existed, results = group_offsets_delete(
        cluster=cluster, group_id=body.group_id, partitions=as_dicts(body.partitions)
    )
    return {"group_exists": existed, "partitions": results}
