"""Builders for group reports and committed offsets, as agents send them."""

from __future__ import annotations

from tests.metadata_store.conftest import AgentApi


def member(member_id: str, *partitions: int, topic: str = "orders") -> dict:
    return {
        "member_id": member_id,
        "group_instance_id": None,
        "client_id": member_id.split("-")[0],
        "client_host": "",
        "assignment": [{"topic": topic, "partitions": list(partitions)}] if partitions else [],
    }


def report(group_id: str, state: str = "Stable", members=(), **extra) -> dict:
    return {
        "group_id": group_id,
        "state": state,
        "protocol_type": "consumer",
        "protocol": "range" if members else "",
        "generation": 3,
        "leader": members[0]["member_id"] if members else "",
        "members": list(members),
        **extra,
    }


def commit_offsets(api: AgentApi, group_id: str, topic: str, offsets: dict[int, int]) -> None:
    answer = api(
        "offsets/commit",
        {
            "group_id": group_id,
            "offsets": [{"topic": topic, "partition": p, "offset": o} for p, o in offsets.items()],
        },
    )
    assert all(o["error_code"] == 0 for o in answer["offsets"])
