"""Key compaction: the latest value per key survives, at its original offset."""

from __future__ import annotations

import random

from core.kafka.records import iter_batches
from metadata_store.models import Batch, Partition
from tests.jobs import driver
from tests.jobs.segments import batch, now_ms, read_partition
from tests.jobs.test_compaction import CODECS
from virtualclusters.jobs import services as jobs_services
from virtualclusters.jobs.models import JobRun

HOUR_MS = 3600 * 1000


def key_compact(tenant) -> JobRun:
    run = jobs_services.job_dispatch(cluster=tenant, kind=JobRun.Kind.KEY_COMPACTION)
    assert run is not None, "key compaction should be due"
    run = driver.job_run_execute(run_id=run.id)
    assert run.state == "succeeded", run.error
    return run


def latest_per_key(records, *, tombstone_cutoff_ms: int):
    """What Kafka's cleaner leaves, computed the simple way."""
    latest = {r.key: r.offset for r in records}
    last = records[-1].offset
    return [
        (r.offset, r.key, r.value)
        for r in records
        if r.key is None
        or r.offset == last
        or (
            latest[r.key] == r.offset
            and not (r.value is None and r.timestamp < tombstone_cutoff_ms)
        )
    ]


def test_key_compaction_keeps_the_latest_value_per_key_at_its_original_offset(writer, tenant):
    topic = writer.topic(
        "profiles",
        2,
        cleanup_policy="compact,delete",
        retention_ms="-1",
        delete_retention_ms=str(HOUR_MS),
        min_cleanable_dirty_ratio="0",
    )
    rng = random.Random(7)
    old = now_ms() - 2 * HOUR_MS
    for n in range(16):
        batches = []
        for p in (0, 1):
            records = [
                (f"user-{rng.randrange(8)}".encode(), f"v{n}-{i}-{p}".encode() * 4)
                for i in range(6)
            ]
            if n == 3:
                records.append((b"gone", None))  # an old tombstone: dropped with its key
            if n == 2:
                records.append((b"gone", b"soon deleted"))
            if n == 5:
                records.append((None, b"no key"))  # nothing can supersede it
            if n == 12:
                records += [(b"erased", b"x"), (b"erased", None)]  # a recent tombstone stays
            timestamp = old if n < 8 else None
            # A run of two batches per partition and file.
            for part, codec in ((records[:3], CODECS[n % 5]), (records[3:], CODECS[(n + 1) % 5])):
                batches.append((topic, p, batch(part, compression=codec, timestamp=timestamp)))
        writer.commit(batches)
    before = {p: read_partition(writer, topic, p) for p in (0, 1)}
    watermarks = {p.index: p.high_watermark for p in Partition.objects.filter(topic=topic)}

    run = key_compact(tenant)

    assert run.details["swapped"] is True
    cutoff = now_ms() - HOUR_MS
    for p in (0, 1):
        after = [(r.offset, r.key, r.value) for r in read_partition(writer, topic, p)]
        assert after == latest_per_key(before[p], tombstone_cutoff_ms=cutoff)
        keys = [key for _, key, _ in after if key is not None]
        assert len(keys) == len(set(keys))  # one record per key
        assert b"gone" not in keys and b"erased" in keys
        assert (None, b"no key") in [(k, v) for _, k, v in after]
    assert {p.index: p.high_watermark for p in Partition.objects.filter(topic=topic)} == watermarks
    assert (
        run.details["records_kept"]
        < run.details["records_in"]
        == sum(len(records) for records in before.values())
    )
    # The index and the bytes agree: a compacted run's batches carry offsets inside the
    # row's (each kept its baseOffset and lastOffsetDelta), and the row counts them.
    rows = Batch.objects.filter(partition__topic=topic, file__level=1).select_related("file")
    assert rows and any(row.batch_count == 2 for row in rows)
    for row in rows:
        stored = writer.store.get_range(row.file.key, row.position, row.length)
        headers = [h for _, _, h in iter_batches(stored)]
        assert len(headers) == row.batch_count
        assert row.base_offset <= headers[0].base_offset
        assert headers[-1].last_offset <= row.last_offset
        assert sum(h.record_count for h in headers) == row.record_count

    # Nothing new: nothing to do. New records: the next run covers them too.
    assert jobs_services.job_dispatch(cluster=tenant, kind="key_compaction") is None
    writer.commit([(topic, 0, batch([(b"user-1", b"newest")]))])
    key_compact(tenant)
    after = read_partition(writer, topic, 0)
    assert [r.value for r in after if r.key == b"user-1"] == [b"newest"]


def test_key_compaction_drops_aborted_transactions_and_keeps_their_markers(writer, tenant):
    from core.kafka.records import RecordInput, encode_batch
    from metadata_store import transactions
    from metadata_store.models import TransactionMarker
    from tests.jobs.segments import values

    topic = writer.topic(
        "accounts", 1, cleanup_policy="compact,delete", retention_ms="-1",
        min_cleanable_dirty_ratio="0",
    )  # fmt: skip
    old = now_ms() - 2 * HOUR_MS
    writer.commit([(topic, 0, batch([(b"k", b"committed")], timestamp=old))])  # offset 0
    txn = transactions.txn_init(cluster_id=tenant.id, transactional_id="t", timeout_ms=60_000)
    ids = {
        "cluster_id": tenant.id,
        "transactional_id": "t",
        "producer_id": txn["producer_id"],
        "producer_epoch": txn["producer_epoch"],
    }
    transactions.txn_add_partitions(**ids, partitions=[("accounts", 0)])
    aborted = encode_batch(
        [RecordInput(key=b"k", value=b"aborted", timestamp=old)],
        producer_id=txn["producer_id"],
        producer_epoch=txn["producer_epoch"],
        base_sequence=0,
        is_transactional=True,
    )
    assert writer.commit([(topic, 0, aborted)]) == [1]
    assert transactions.txn_end(**ids, committed=False)[0] == 0  # its marker: offset 2
    writer.commit([(topic, 0, batch([(b"other", b"v")], timestamp=old))])  # offset 3

    key_compact(tenant)

    assert values(read_partition(writer, topic)) == [(0, b"k", b"committed"), (3, b"other", b"v")]
    marker = TransactionMarker.objects.get()
    assert (marker.marker_offset, marker.committed, marker.first_offset) == (2, False, 1)
