"""Agent API calls for consumer groups (AGENT_API.md: groups/report, groups/list,
groups/delete, offsets/delete). Thin adapters over `groups.py`."""

from __future__ import annotations

from .agent_api import BadRequest, _endpoint, _list
from .groups import group_offsets_delete, group_report_apply, group_summaries, groups_delete
from .models import VirtualCluster


def _group_ids(body: dict, name: str = "group_ids", *, nullable: bool = False) -> list[str] | None:
    value = body.get(name)
    if value is None and nullable:
        return None
    if not isinstance(value, list):
        raise BadRequest(f"'{name}' must be a list")
    return [str(v) for v in value]


@_endpoint
def groups_report(cluster: VirtualCluster, body: dict) -> dict:
    agent_id = str(body.get("agent_id") or "")
    if not agent_id:
        raise BadRequest("agent_id is required")
    groups = _list(body, "groups")
    for group in groups:
        if not isinstance(group, dict) or not group.get("group_id"):
            raise BadRequest("every group needs a 'group_id'")
    return {"forget": group_report_apply(cluster=cluster, agent_id=agent_id, groups=groups)}


@_endpoint
def groups_list(cluster: VirtualCluster, body: dict) -> dict:
    summaries = group_summaries(cluster, _group_ids(body, nullable=True))
    return {
        "groups": [
            {
                "group_id": s.group_id,
                "has_offsets": s.has_offsets,
                "protocol_type": s.protocol_type,
                "state": s.state,
                "agent_id": s.agent_id,
            }
            for s in summaries.values()
        ]
    }


@_endpoint
def groups_delete_view(cluster: VirtualCluster, body: dict) -> dict:
    results = groups_delete(cluster=cluster, group_ids=_group_ids(body) or [])
    return {"groups": [{"group_id": g, "error_code": code} for g, code in results.items()]}


@_endpoint
def offsets_delete(cluster: VirtualCluster, body: dict) -> dict:
    partitions = _list(body, "partitions")
    existed, results = group_offsets_delete(
        cluster=cluster, group_id=str(body["group_id"]), partitions=partitions
    )
    return {"group_exists": existed, "partitions": results}
