"""Who answers group APIs, over raw Kafka requests to two live agents: every agent names
the same coordinator, the others answer NOT_COORDINATOR, and the coordinator applies
KIP-394 and the batched/multi-group request forms."""

from __future__ import annotations

import socket
import struct

import pytest

from core.kafka import ApiKey, decode_response, encode_request
from core.kafka.errors import ErrorCode as E
from tests.agents.groups.members import wait_until
from tests.agents.groups.test_clients import create_topic
from tests.agents.groups.test_coordinator import subscription

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka, pytest.mark.timeout(90)]


class Wire:
    """One raw connection: each call sends a request and reads its response."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=15)
        self.correlation = 0

    def _read(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise ConnectionError("closed by the agent")
            data += chunk
        return data

    def call(self, api_key: int, version: int, body: dict) -> dict:
        self.correlation += 1
        self.sock.sendall(encode_request(api_key, version, self.correlation, "wire", body))
        (size,) = struct.unpack(">i", self._read(4))
        correlation, response = decode_response(api_key, version, self._read(size))
        assert correlation == self.correlation
        return response

    def close(self) -> None:
        self.sock.close()


def join_body(group: str, member_id: str = "") -> dict:
    return {
        "group_id": group,
        "session_timeout_ms": 6000,
        "rebalance_timeout_ms": 6000,
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": subscription("t")}],
        "reason": None,
    }


def sync_body(group: str, generation: int, member_id: str, assignment: bytes = b"") -> dict:
    """A leader's SyncGroup, assigning `assignment` to itself."""
    return {
        "group_id": group,
        "generation_id": generation,
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocol_name": "range",
        "assignments": [{"member_id": member_id, "assignment": assignment}],
    }


def test_agents_agree_on_coordinators_and_others_refuse_group_calls(agent, cluster):
    first, second = agent(cluster.key), agent(cluster.key)
    wires = {first.port: Wire(first.bootstrap), second.port: Wire(second.bootstrap)}
    groups = [f"group-{i}" for i in range(12)]

    def coordinators(wire: Wire) -> dict[str, int]:
        found = wire.call(ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": groups})
        assert all(c["error_code"] == 0 for c in found["coordinators"])
        return {c["key"]: c["port"] for c in found["coordinators"]}

    def brokers(wire: Wire) -> set[int]:
        return {b["port"] for b in wire.call(ApiKey.METADATA, 9, {"topics": []})["brokers"]}

    # Once each has heard the other's heartbeat, the rendezvous choice spreads the free
    # leases over both; the lease holders are what both answer (v4 batches).
    wait_until(
        lambda: all(brokers(w) == {first.port, second.port} for w in wires.values()),
        15,
        "the agents know each other",
    )
    owners = coordinators(wires[first.port])
    assert coordinators(wires[second.port]) == owners
    assert set(owners.values()) == {first.port, second.port}, "groups spread over both agents"

    group = groups[0]
    owner = wires[owners[group]]
    other = wires[next(p for p in wires if p != owners[group])]
    one = other.call(ApiKey.FIND_COORDINATOR, 1, {"key": group, "key_type": 0})
    assert (one["error_code"], one["port"]) == (0, owners[group])
    bad_type = other.call(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 7})
    assert bad_type["error_code"] == E.INVALID_REQUEST
    txn = other.call(ApiKey.FIND_COORDINATOR, 3, {"key": "txn-1", "key_type": 1})
    assert txn["error_code"] == 0 and txn["port"] in wires

    # The other agent: NOT_COORDINATOR for every group API.
    assert other.call(ApiKey.JOIN_GROUP, 5, join_body(group))["error_code"] == E.NOT_COORDINATOR
    hb = {"group_id": group, "generation_id": 1, "member_id": "m", "group_instance_id": None}
    assert other.call(ApiKey.HEARTBEAT, 3, hb)["error_code"] == E.NOT_COORDINATOR
    fetched = other.call(
        ApiKey.OFFSET_FETCH,
        8,
        {"groups": [{"group_id": group, "topics": None}], "require_stable": False},
    )
    assert fetched["groups"][0]["error_code"] == E.NOT_COORDINATOR

    # The coordinator: KIP-394 first, then a real join.
    first_try = owner.call(ApiKey.JOIN_GROUP, 5, join_body(group))
    assert first_try["error_code"] == E.MEMBER_ID_REQUIRED and first_try["member_id"]
    joined = owner.call(ApiKey.JOIN_GROUP, 5, join_body(group, first_try["member_id"]))
    assert joined["error_code"] == 0 and joined["leader"] == first_try["member_id"]
    member_id, generation = joined["member_id"], joined["generation_id"]
    sync = owner.call(ApiKey.SYNC_GROUP, 5, sync_body(group, generation, member_id))
    assert sync["error_code"] == 0 and sync["protocol_name"] == "range"
    hb.update(member_id=member_id, generation_id=generation)
    assert owner.call(ApiKey.HEARTBEAT, 3, hb)["error_code"] == 0
    hb.update(generation_id=generation + 1)
    assert owner.call(ApiKey.HEARTBEAT, 3, hb)["error_code"] == E.ILLEGAL_GENERATION
    left = owner.call(
        ApiKey.LEAVE_GROUP,
        5,
        {
            "group_id": group,
            "members": [
                {"member_id": member_id, "group_instance_id": None, "reason": "done"},
                {"member_id": "nobody", "group_instance_id": None, "reason": None},
            ],
        },
    )
    assert [m["error_code"] for m in left["members"]] == [0, E.UNKNOWN_MEMBER_ID]
    for wire in wires.values():
        wire.close()


def test_offset_commit_and_fetch_in_every_form(agent, cluster):
    a = agent(cluster.key)
    create_topic(a.bootstrap, "t", 2)
    wire = Wire(a.bootstrap)
    commit = {
        "group_id": "simple",
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "retention_time_ms": -1,
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 5,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "m",
                    },
                    {
                        "partition_index": 9,
                        "committed_offset": 1,
                        "committed_leader_epoch": -1,
                        "committed_metadata": None,
                    },
                    {
                        "partition_index": 1,
                        "committed_offset": 2,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "x" * 5000,
                    },
                ],
            },
            {
                "name": "missing",
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 1,
                        "committed_leader_epoch": -1,
                        "committed_metadata": None,
                    }
                ],
            },
        ],
    }
    for version in (0, 2, 8):
        answer = wire.call(ApiKey.OFFSET_COMMIT, version, commit)
        codes = [[p["error_code"] for p in t["partitions"]] for t in answer["topics"]]
        assert codes == [
            [0, E.UNKNOWN_TOPIC_OR_PARTITION, E.OFFSET_METADATA_TOO_LARGE],
            [E.UNKNOWN_TOPIC_OR_PARTITION],
        ], version
    # A generation from nowhere is refused.
    stale = dict(commit, group_id="nobody-joined", generation_id_or_member_epoch=3, member_id="m")
    assert (
        wire.call(ApiKey.OFFSET_COMMIT, 7, stale)["topics"][0]["partitions"][0]["error_code"]
        == E.ILLEGAL_GENERATION
    )

    asked = [{"name": "t", "partition_indexes": [0, 1]}]
    v1 = wire.call(ApiKey.OFFSET_FETCH, 1, {"group_id": "simple", "topics": asked})
    assert [
        (p["partition_index"], p["committed_offset"], p["metadata"])
        for p in v1["topics"][0]["partitions"]
    ] == [(0, 5, "m"), (1, -1, "")]
    everything = wire.call(
        ApiKey.OFFSET_FETCH, 7, {"group_id": "simple", "topics": None, "require_stable": True}
    )
    assert everything["error_code"] == 0
    assert [
        (t["name"], [p["committed_offset"] for p in t["partitions"]]) for t in everything["topics"]
    ] == [("t", [5])]
    many = wire.call(
        ApiKey.OFFSET_FETCH,
        8,
        {
            "groups": [
                {"group_id": "simple", "topics": [{"name": "t", "partition_indexes": [0]}]},
                {"group_id": "never", "topics": None},
            ],
            "require_stable": False,
        },
    )
    assert [(g["group_id"], g["error_code"], g["topics"]) for g in many["groups"]] == [
        (
            "simple",
            0,
            [
                {
                    "name": "t",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 5,
                            "committed_leader_epoch": -1,
                            "metadata": "m",
                            "error_code": 0,
                        }
                    ],
                }
            ],
        ),
        ("never", 0, []),
    ]
    wire.close()
