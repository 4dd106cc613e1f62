"""One coordinator per group, decided by the metadata store (issue 24): two agents of one
cluster, raw Kafka requests. Both name the lease holder, the other answers
NOT_COORDINATOR, and when the holder is SIGKILLed the survivor takes the lease with the
next epoch and the group's saved state: the generation goes on, the members rejoin once,
committed offsets stay, and a commit of the old generation is refused."""

from __future__ import annotations

import time

import pytest

from core.kafka import ApiKey
from core.kafka.errors import ErrorCode as E
from metadata_store.models import GroupLease
from tests.agents.groups.members import wait_until
from tests.agents.groups.test_clients import create_topic
from tests.agents.groups.test_coordination import Wire, join_body, sync_body

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka, pytest.mark.timeout(90)]

SESSION_S = 6.0  # join_body's session timeout


def find(wire: Wire, group: str) -> dict:
    return wire.call(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})


def commit(wire: Wire, group: str, generation: int, member_id: str, offset: int) -> int:
    answer = wire.call(
        ApiKey.OFFSET_COMMIT,
        7,
        {
            "group_id": group,
            "generation_id_or_member_epoch": generation,
            "member_id": member_id,
            "group_instance_id": None,
            "topics": [
                {
                    "name": "leased",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": offset,
                            "committed_leader_epoch": -1,
                            "committed_metadata": None,
                        }
                    ],
                }
            ],
        },
    )
    return answer["topics"][0]["partitions"][0]["error_code"]


def join_and_sync(wire: Wire, group: str, member_id: str = "") -> tuple[str, int]:
    joined = wire.call(ApiKey.JOIN_GROUP, 5, join_body(group, member_id))
    if joined["error_code"] == E.MEMBER_ID_REQUIRED:
        joined = wire.call(ApiKey.JOIN_GROUP, 5, join_body(group, joined["member_id"]))
    assert joined["error_code"] == 0, joined
    member_id, generation = joined["member_id"], joined["generation_id"]
    synced = wire.call(ApiKey.SYNC_GROUP, 5, sync_body(group, generation, member_id, b"\x00\x01"))
    assert synced["error_code"] == 0, synced
    return member_id, generation


def heartbeat(wire: Wire, group: str, member_id: str, generation: int) -> int:
    body = {
        "group_id": group,
        "generation_id": generation,
        "member_id": member_id,
        "group_instance_id": None,
    }
    return wire.call(ApiKey.HEARTBEAT, 3, body)["error_code"]


def test_the_lease_holder_coordinates_and_a_survivor_takes_over_with_the_saved_group(
    agent, cluster
):
    first, second = agent(cluster.key), agent(cluster.key)
    create_topic(first.bootstrap, "leased", 1)
    wires = {first.port: Wire(first.bootstrap), second.port: Wire(second.bootstrap)}
    group = "ledger"

    # Both agents name the one holder, whatever each knows of the other.
    answers = {port: find(w, group) for port, w in wires.items()}
    assert {(a["error_code"], a["port"]) for a in answers.values()} == {
        (0, answers[first.port]["port"])
    }
    lease = GroupLease.objects.get(cluster__public_id=first.cluster_id, group_id=group)
    by_port = {first.port: first, second.port: second}
    holder = by_port[answers[first.port]["port"]]
    survivor = second if holder is first else first
    assert lease.agent_id == holder.agent_id

    owner, other = wires[holder.port], wires[survivor.port]
    member_id, generation = join_and_sync(owner, group)
    assert commit(owner, group, generation, member_id, 7) == 0
    # The other agent starts no group of its own: NOT_COORDINATOR for every group call.
    assert other.call(ApiKey.JOIN_GROUP, 5, join_body(group))["error_code"] == E.NOT_COORDINATOR
    assert heartbeat(other, group, member_id, generation) == E.NOT_COORDINATOR
    assert commit(other, group, generation, member_id, 8) == E.NOT_COORDINATOR
    saved = GroupLease.objects.get(pk=lease.pk)
    assert (saved.generation, [m["member_id"] for m in saved.members]) == (generation, [member_id])

    holder.kill()
    killed = time.monotonic()
    wait_until(
        lambda: find(other, group)["port"] == survivor.port, SESSION_S, "the survivor takes over"
    )
    taken = GroupLease.objects.get(pk=lease.pk)
    assert taken.agent_id == survivor.agent_id and taken.epoch > lease.epoch
    # The saved group: the member is known, and told to rejoin (within its session).
    assert heartbeat(other, group, member_id, generation) == E.REBALANCE_IN_PROGRESS
    assert time.monotonic() - killed < SESSION_S
    assert commit(other, group, generation, member_id, 9) == 0  # allowed while rebalancing
    again, next_generation = join_and_sync(other, group, member_id)
    assert (again, next_generation) == (member_id, generation + 1)
    assert heartbeat(other, group, member_id, next_generation) == 0
    assert commit(other, group, generation, member_id, 10) == E.ILLEGAL_GENERATION
    fetched = other.call(
        ApiKey.OFFSET_FETCH,
        7,
        {"group_id": group, "topics": [{"name": "leased", "partition_indexes": [0]}]},
    )
    assert fetched["topics"][0]["partitions"][0]["committed_offset"] == 9
    for wire in wires.values():
        wire.close()
