"""Retention: log start offsets move, index rows go, files go after their grace period."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from metadata_store import store as metadata
from metadata_store.models import Batch, Partition, SegmentFile
from tests.jobs import driver
from tests.jobs.segments import batch, now_ms, read_partition
from virtualclusters.jobs import services as jobs_services
from virtualclusters.jobs.models import JobRun

HOUR_MS = 3600 * 1000


def retain(tenant) -> JobRun:
    run = jobs_services.job_dispatch(cluster=tenant, kind=JobRun.Kind.RETENTION)
    assert run is not None, "retention should be due"
    run = driver.job_run_execute(run_id=run.id)
    assert run.state == "succeeded", run.error
    return run


def records(n: int, tag: str) -> list[tuple[bytes, bytes]]:
    return [(f"{tag}-{n}-{i}".encode(), f"{tag}/{n}/{i}".encode()) for i in range(5)]


def test_records_older_than_retention_ms_vanish_and_their_files_go_after_the_grace(writer, tenant):
    logs = writer.topic("logs", 2, retention_ms=str(HOUR_MS))
    forever = writer.topic("forever", 1, retention_ms="-1")
    old = now_ms() - 2 * HOUR_MS
    old_only = [
        writer.commit([(logs, p, batch(records(n, "old"), timestamp=old)) for p in range(2)])
        for n in range(6)
    ]
    # An old file that also holds a batch of a topic kept forever stays live.
    writer.commit(
        [
            (logs, 0, batch(records(6, "old"), timestamp=old)),
            (forever, 0, batch(records(6, "f"), timestamp=old)),
        ]
    )
    for n in range(7, 10):
        writer.commit([(logs, p, batch(records(n, "new"))) for p in range(2)])
    assert len(old_only) == 6

    run = retain(tenant)

    assert run.details["partitions_advanced"] == 2
    assert run.details["batches_deleted"] == 13
    assert run.details["files_released"] == 6
    assert run.input_files == 0  # nothing is past its grace period yet
    starts = {p.index: p.log_start_offset for p in Partition.objects.filter(topic=logs)}
    assert starts == {0: 35, 1: 30}
    earliest = metadata.list_offsets(
        cluster_id=tenant.id,
        partitions=[{"topic_id": str(logs.id), "partition": p, "timestamp": -2} for p in (0, 1)],
    )
    assert [a["offset"] for a in earliest] == [35, 30]
    for p in (0, 1):
        assert {r.value.split(b"/")[0] for r in read_partition(writer, logs, p)} == {b"new"}
    stale = metadata.fetch_plan(
        cluster_id=tenant.id,
        partitions=[{"topic_id": str(logs.id), "partition": 1, "offset": 0}],
        max_bytes=1 << 20,
    )
    assert stale[0]["error_code"] != 0  # OFFSET_OUT_OF_RANGE: consumers reset to 30
    assert len(read_partition(writer, forever, 0)) == 5

    released = SegmentFile.objects.filter(cluster=tenant, state="replaced").order_by("id")
    assert released.count() == 6
    assert all(writer.store.size(f.key) == f.size for f in released)
    # Within the grace period nothing is due, and nothing is deleted.
    assert jobs_services.job_dispatch(cluster=tenant, kind="retention") is None

    now = timezone.now()
    past, recent = list(released[:4]), list(released[4:])
    SegmentFile.objects.filter(pk__in=[f.pk for f in past]).update(
        unreferenced_at=now - timedelta(minutes=6)
    )
    SegmentFile.objects.filter(pk__in=[f.pk for f in recent]).update(
        unreferenced_at=now - timedelta(minutes=4)
    )
    run = retain(tenant)

    assert (run.input_files, run.details["files_deleted"]) == (4, 4)
    assert run.input_bytes == sum(f.size for f in past)
    for f in past:
        assert SegmentFile.objects.get(pk=f.pk).state == "deleted"
        assert not list(writer.store.list(f.key))
    for f in recent:
        assert SegmentFile.objects.get(pk=f.pk).state == "replaced"
        assert writer.store.size(f.key) == f.size
    assert SegmentFile.objects.filter(cluster=tenant, state="live").count() == 4


def test_retention_bytes_keeps_the_newest_batches_that_fit(writer, tenant):
    sizes = writer.topic("sized", retention_bytes="1")  # replaced below, once sizes are known
    for n in range(10):
        writer.commit([(sizes, 0, batch(records(n, "r")))])
    length = Batch.objects.filter(partition__topic=sizes).values_list("length", flat=True)[0]
    sizes.configs = {"retention.bytes": str(3 * length)}
    sizes.save()

    retain(tenant)

    assert [r.offset for r in read_partition(writer, sizes, 0)] == list(range(35, 50))
    assert Batch.objects.filter(partition__topic=sizes).count() == 3


def test_a_compact_only_topic_is_never_expired_and_deleted_records_are_dropped(writer, tenant):
    compacted = writer.topic("table", cleanup_policy="compact", retention_ms="1")
    trimmed = writer.topic("trimmed")
    old = now_ms() - HOUR_MS
    for n in range(3):
        writer.commit(
            [
                (compacted, 0, batch(records(n, "c"), timestamp=old)),
                (trimmed, 0, batch(records(n, "t"))),
            ]
        )
    # DeleteRecords moved the log start; retention drops the rows below it.
    metadata.records_delete(
        cluster_id=tenant.id,
        partitions=[{"topic_id": str(trimmed.id), "partition": 0, "offset": 10}],
    )

    run = retain(tenant)

    assert run.details["partitions_advanced"] == 0
    assert run.details["batches_deleted"] == 2
    assert len(read_partition(writer, compacted, 0)) == 15
    assert [r.offset for r in read_partition(writer, trimmed, 0)] == list(range(10, 15))
    assert SegmentFile.objects.filter(cluster=tenant, state="live").count() == 3


def test_retention_works_on_runs_of_several_batches(writer, tenant):
    """Files laid out as agents lay segments out, each partition a run of several batches:
    a run goes when its newest record is past retention.ms, and a run holding a newer
    record stays whole, every record of it readable at its offset."""
    logs = writer.topic("runs", 2, retention_ms=str(HOUR_MS))
    old = now_ms() - 2 * HOUR_MS
    for n in range(3):  # per file and partition, a run of three old batches
        writer.commit(
            [
                (logs, p, batch(records(3 * n + k, "old"), timestamp=old))
                for p in range(2)
                for k in range(3)
            ]
        )
    writer.commit(
        [
            (logs, 0, batch(records(9, "old"), timestamp=old)),  # an old batch in a newer run
            (logs, 0, batch(records(10, "new"))),
            (logs, 1, batch(records(9, "new"))),
            (logs, 1, batch(records(10, "new"))),
        ]
    )
    runs = Batch.objects.filter(partition__topic=logs)
    assert runs.count() == 8 and set(runs.values_list("batch_count", flat=True)) == {2, 3}

    run = retain(tenant)

    assert run.details["files_released"] == 3
    starts = {p.index: p.log_start_offset for p in Partition.objects.filter(topic=logs)}
    assert starts == {0: 45, 1: 45}
    assert list(runs.values_list("batch_count", flat=True)) == [2, 2]
    kept = read_partition(writer, logs, 0)
    assert [r.offset for r in kept] == list(range(45, 55))
    assert [r.value.split(b"/")[0] for r in kept] == [b"old"] * 5 + [b"new"] * 5
    assert [r.offset for r in read_partition(writer, logs, 1)] == list(range(45, 55))
