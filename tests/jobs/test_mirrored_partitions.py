"""No job of Floe's changes a mirrored partition on its own (issue 38): its records and
log start are the source's until the cutover. File compaction still moves its batches
into bigger files, offsets and gaps unchanged."""

from __future__ import annotations

import uuid

from django.db import transaction

from core.kafka.errors import ErrorCode
from core.kafka.records import iter_batches, patch_base_offset
from core.segment import SegmentBuilder
from metadata_store import store as metadata
from metadata_store.leases import lease_take, migration_subject
from metadata_store.mirroring import MirroredBatch, mirrored_file_commit, topic_mirroring_set
from metadata_store.models import Partition, SegmentFile
from tests.jobs import driver
from tests.jobs.segments import batch, now_ms, read_partition, values
from virtualclusters.jobs import services as jobs_services
from virtualclusters.jobs.models import JobRun

HOUR_MS = 3600 * 1000


def _mirror(topic, migration_id: str) -> None:
    with transaction.atomic():
        topic_mirroring_set(topic=topic, migration_id=migration_id)


def _offsets(topic) -> dict[int, tuple[int, int]]:
    return {
        p.index: (p.log_start_offset, p.high_watermark)
        for p in Partition.objects.filter(topic=topic)
    }


def _mirror_commit(writer, topic, partition: int, base_offset: int, data: bytes) -> None:
    """A source's batch at its own offsets, as the copier commits it (a gap before it)."""
    stored = bytearray(data)
    patch_base_offset(stored, 0, base_offset)
    header = next(iter_batches(stored))[2]
    builder = SegmentBuilder()
    entry = builder.append(topic_id=topic.id, partition=partition, batch=stored, header=header)
    segment = builder.finish()
    key = f"{writer.cluster.public_id}/mirror/mig_test/{uuid.uuid4().hex}.seg"
    writer.store.put(key, segment)
    lease = lease_take(
        cluster_id=writer.cluster.id,
        subject=migration_subject("mig_test"),
        holder="agt-copier",
        seconds=60,
    )
    assert lease is not None
    answer = mirrored_file_commit(
        cluster_id=writer.cluster.id,
        migration_id="mig_test",
        lease=lease.token,
        file_key=key,
        size=len(segment),
        batches=[
            MirroredBatch(
                topic.id,
                partition,
                base_offset,
                header.last_offset,
                header.record_count,
                entry.position,
                entry.length,
                header.max_timestamp,
            )
        ],
    )
    assert [b["error_code"] for b in answer["batches"]] == [0], answer


def _run(tenant, kind: str) -> JobRun:
    run = jobs_services.job_dispatch(cluster=tenant, kind=kind)
    assert run is not None, f"{kind} should be due"
    run = driver.job_run_execute(run_id=run.id)
    assert run.state == "succeeded", run.error
    return run


def test_no_job_moves_a_mirrored_partition_until_its_cutover(writer, tenant, jobs_settings):
    jobs_settings.FLOE_COMPACTION_MIN_FILES = 4
    old = now_ms() - 2 * HOUR_MS
    expiring = writer.topic("expiring", 2, retention_ms=str(HOUR_MS))
    keyed = writer.topic("keyed", 1, cleanup_policy="compact", min_cleanable_dirty_ratio="0")
    for n in range(4):
        writer.commit(
            [
                *[
                    (expiring, p, batch([(b"k%d" % n, b"old %d" % n)] * 5, timestamp=old))
                    for p in range(2)
                ],
                (keyed, 0, batch([(b"same", b"v%d.%d" % (n, i)) for i in range(5)], timestamp=old)),
            ]
        )
    # (Written before it is mirrored: the normal commit refuses a mirrored partition.)
    _mirror(expiring, "mig_test")
    _mirror(keyed, "mig_test")
    # A mirrored batch after a gap (offsets 20-29 compacted away on the source).
    _mirror_commit(writer, expiring, 0, 30, batch([(b"k9", b"old 9")] * 5, timestamp=old))
    before = {
        t.name: [values(read_partition(writer, t, p)) for p in range(t.partition_count)]
        for t in (expiring, keyed)
    }

    assert jobs_services.job_dispatch(cluster=tenant, kind="retention") is None
    assert jobs_services.job_dispatch(cluster=tenant, kind="key_compaction") is None
    deleted = metadata.records_delete(
        cluster_id=tenant.id,
        partitions=[{"topic_id": str(expiring.id), "partition": 0, "offset": 5}],
    )
    assert deleted[0]["error_code"] == ErrorCode.POLICY_VIOLATION  # the source moves it

    # File compaction moves the mirrored batches into one file: offsets, gaps, records
    # and log starts unchanged.
    run = _run(tenant, "compaction")
    assert run.details["swapped"] is True and run.input_files == 5, run.details
    assert SegmentFile.objects.filter(cluster=tenant, state="live", level=0).count() == 0
    assert _offsets(expiring) == {0: (0, 35), 1: (0, 20)}
    assert [r.offset for r in read_partition(writer, expiring, 0)][-6:] == [19, 30, 31, 32, 33, 34]
    assert _offsets(keyed) == {0: (0, 20)}
    after = {
        t.name: [values(read_partition(writer, t, p)) for p in range(t.partition_count)]
        for t in (expiring, keyed)
    }
    assert after == before

    # The cutover: Floe's own jobs apply from now on.
    _mirror(expiring, "")
    _mirror(keyed, "")
    run = _run(tenant, "retention")
    assert run.details["partitions_advanced"] == 2
    assert _offsets(expiring) == {0: (35, 35), 1: (20, 20)}
    _run(tenant, "key_compaction")
    assert [r.value for r in read_partition(writer, keyed, 0)] == [b"v3.4"]
    assert _offsets(keyed) == {0: (0, 20)}
