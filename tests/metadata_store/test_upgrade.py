"""Upgrading a database made before the metadata store became its own app: the tables
and every row stay; the new code reads them and commits carry on from them."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from metadata_store import store
from metadata_store.agent_api.schemas import commit_batches
from metadata_store.models import Batch, GroupOffset, Partition, ProducerState, SegmentFile, Topic

# The last migrations of the release before the move (virtualclusters owned every table).
BEFORE = [("virtualclusters", "0005_jobrun"), ("metadata_store", None)]


def _migrate(targets) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return MigrationExecutor(connection)  # a fresh loader sees the applied set


def _fill_old_schema(apps) -> dict:
    """Topics, batches (through the old commit function), producer state and a group's
    offsets, written through the old schema's models as the previous release did."""
    organization = apps.get_model("controlplane", "Organization").objects.create(
        name="old-co", public_id="org_upgrade"
    )
    cluster = apps.get_model("virtualclusters", "VirtualCluster").objects.create(
        organization=organization, name="old-cluster", public_id="vci_upgrade"
    )
    topic = apps.get_model("virtualclusters", "Topic").objects.create(
        id=uuid.uuid4(), cluster=cluster, name="orders", partition_count=2, configs={}
    )
    partition_model = apps.get_model("virtualclusters", "Partition")
    parts = [partition_model.objects.create(topic=topic, index=i) for i in range(2)]
    with connection.cursor() as cursor:
        for n in range(3):
            cursor.execute(
                "SELECT floe_commit(%s, %s, %s, %s::bigint[], %s::int[], %s::bigint[], %s::int[],"
                " %s::bigint[], %s::bigint[], %s::int[], %s::int[])",
                [
                    cluster.pk,
                    f"vci_upgrade/segments/{n}.seg",
                    300,
                    [parts[0].pk, parts[1].pk],
                    [10, 5],
                    [0, 100],
                    [100, 100],
                    [1_700_000_000_000 + n, 1_700_000_000_000 + n],
                    [7, -1],
                    [0, -1],
                    [n * 10, -1],
                ],
            )
    apps.get_model("virtualclusters", "GroupOffset").objects.create(
        cluster=cluster, group_id="billing", partition=parts[0], committed_offset=20
    )
    return {"cluster_id": cluster.pk, "topic_id": topic.id}


def producer_commit(cluster_id: int, topic, name: str, *, records: int, sequence: int):
    """A file of one batch of producer 7 (epoch 0) in partition 0, committed."""
    batch = {"topic_id": str(topic.id), "partition": 0, "pos": 0, "len": 100}
    batch.update(records=records, producer_id=7, producer_epoch=0, base_sequence=sequence)
    return store.file_commit(
        cluster_id=cluster_id,
        file_key=f"vci_upgrade/segments/{name}.seg",
        size=100,
        batches=commit_batches([batch]),
    )


@pytest.mark.django_db(transaction=True)
def test_the_move_keeps_every_row_and_the_new_code_carries_on():
    old = _migrate(BEFORE)
    made = _fill_old_schema(old.loader.project_state(BEFORE[0]).apps)
    new = _migrate(old.loader.graph.leaf_nodes())
    assert not new.migration_plan(new.loader.graph.leaf_nodes())

    topic = Topic.objects.get(id=made["topic_id"])
    assert (topic.name, topic.partition_count) == ("orders", 2)
    assert list(
        Partition.objects.filter(topic=topic).order_by("index").values_list("high_watermark")
    ) == [(30,), (15,)]
    assert SegmentFile.objects.filter(cluster_id=made["cluster_id"]).count() == 3
    assert Batch.objects.filter(partition__topic=topic).count() == 6
    state = ProducerState.objects.get(producer_id=7)
    assert state.last_sequence == 29
    # One row per batch before runs: each is a run of one; the producer's recent batches
    # come from the rows before their producer columns went.
    assert set(Batch.objects.values_list("batch_count", flat=True)) == {1}
    assert (state.recent_sequences, state.recent_offsets) == ([0, 10, 20], [0, 10, 20])
    assert GroupOffset.objects.get(group_id="billing").committed_offset == 20

    (plan,) = store.fetch_plan(
        cluster_id=made["cluster_id"],
        partitions=[{"topic_id": str(topic.id), "partition": 0, "offset": 0}],
        max_bytes=1 << 20,
    )
    assert [(b["base_offset"], b["last_offset"]) for b in plan["batches"]] == [
        (0, 9),
        (10, 19),
        (20, 29),
    ]
    answer = producer_commit(made["cluster_id"], topic, "after", records=4, sequence=30)
    assert answer == [{"error_code": 0, "base_offset": 30, "log_start_offset": 0}]
    retried = producer_commit(made["cluster_id"], topic, "retry", records=10, sequence=10)
    assert retried == [
        {"error_code": 0, "base_offset": 10, "log_start_offset": 0, "duplicate": True}
    ]
    # A file committed before the upgrade, committed again (an agent's retry across it):
    # its first answer, from the jsonb the old function stored, and nothing changes.
    again = store.file_commit(
        cluster_id=made["cluster_id"],
        file_key="vci_upgrade/segments/1.seg",
        size=300,
        batches=commit_batches(
            [
                {
                    "topic_id": str(topic.id),
                    "partition": p,
                    "pos": p * 100,
                    "len": 100,
                    "records": r,
                }
                for p, r in ((0, 10), (1, 5))
            ]  # fmt: skip
        ),
    )
    assert [(a["error_code"], a["base_offset"]) for a in again] == [(0, 10), (0, 5)]
    assert SegmentFile.objects.filter(cluster_id=made["cluster_id"]).count() == 5
