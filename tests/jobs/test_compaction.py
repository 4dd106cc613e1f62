"""Compaction end to end: segments committed as agents do, the Spark job, the swap."""

from __future__ import annotations

import threading
from datetime import timedelta

from django.db import connection
from django.utils import timezone

from core.kafka.records import (
    COMPRESSION_GZIP,
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    COMPRESSION_SNAPPY,
    COMPRESSION_ZSTD,
)
from core.segment import verify_segment
from metadata_store import retention as index_retention
from metadata_store import store as metadata
from metadata_store.models import Batch, Partition, SegmentFile
from tests.jobs import driver
from tests.jobs.segments import batch, read_partition, values
from virtualclusters.jobs import services as jobs_services
from virtualclusters.jobs.models import JobRun

CODECS = [COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD]


def fill(writer, topics, files: int, *, start: int = 0) -> None:
    """`files` segment files, each with a run of two small batches for every partition."""
    for n in range(start, start + files):
        writer.commit(
            [
                (
                    topic,
                    p,
                    batch(
                        [
                            (f"k{n}-{i}".encode(), f"{topic.name}/{p}/{n}/{i}".encode() * 3)
                            for i in range(first, first + size)
                        ],
                        compression=CODECS[(n + p + first) % len(CODECS)],
                    ),
                )
                for topic in topics
                for p in range(topic.partition_count)
                for first, size in ((0, 5), (5, 3))
            ]
        )


def everything(writer, topics) -> dict:
    return {
        (t.name, p): values(read_partition(writer, t, p))
        for t in topics
        for p in range(t.partition_count)
    }


def compact(tenant) -> JobRun:
    run = jobs_services.job_dispatch(cluster=tenant, kind=JobRun.Kind.COMPACTION)
    assert run is not None, "compaction should be due"
    return driver.job_run_execute(run_id=run.id)


def live(tenant, level: int) -> int:
    return SegmentFile.objects.filter(cluster=tenant, state="live", level=level).count()


def test_compaction_keeps_every_record_at_its_offset_in_ten_times_fewer_files(writer, tenant):
    topics = [writer.topic("orders", 3), writer.topic("events", 1)]
    fill(writer, topics, 40)
    before = everything(writer, topics)
    watermarks = dict(Partition.objects.values_list("id", "high_watermark"))

    run = compact(tenant)

    assert run.state == "succeeded", run.error
    assert run.details["swapped"] is True
    assert (run.input_files, run.output_files) == (40, 1)
    assert run.output_bytes < run.input_bytes  # one footer and trailer instead of forty
    assert everything(writer, topics) == before
    assert dict(Partition.objects.values_list("id", "high_watermark")) == watermarks
    assert (live(tenant, 0), live(tenant, 1)) == (0, 1)
    # Inputs wait out their grace period in the bucket; the output is a checked segment
    # with every batch's baseOffset set, grouped by partition in offset order.
    inputs = SegmentFile.objects.filter(cluster=tenant, level=0)
    assert {f.state for f in inputs} == {"replaced"}
    assert all(f.unreferenced_at is not None for f in inputs)
    assert all(writer.store.size(f.key) == f.size for f in inputs)
    output = SegmentFile.objects.get(cluster=tenant, level=1)
    assert output.key.startswith(f"{tenant.public_id}/compacted/{run.public_id}/")
    entries = verify_segment(writer.store.get(output.key))
    runs = Batch.objects.filter(file=output)
    assert len(entries) == 320 and runs.count() == 160  # each input run moved whole
    assert {r.batch_count for r in runs} == {2}
    order = [(str(e.topic_id), e.partition, e.base_offset) for e in entries]
    assert order == sorted(order)
    rows = {(r.position, r.base_offset, r.length) for r in runs}
    firsts = {e.position: e for e in entries}
    assert rows == {(r.position, firsts[r.position].base_offset, r.length) for r in runs} and all(
        firsts[r.position].base_offset == r.base_offset for r in runs
    )


def test_compaction_is_due_only_from_the_threshold_on(writer, tenant):
    topic = writer.topic("few")
    fill(writer, [topic], 7)
    assert jobs_services.job_dispatch(cluster=tenant, kind="compaction") is None
    fill(writer, [topic], 1, start=7)
    run = jobs_services.job_dispatch(cluster=tenant, kind="compaction")
    assert run is not None and run.state == "queued"
    # One run per cluster and kind at a time.
    assert jobs_services.job_dispatch(cluster=tenant, kind="compaction") is None


def _during_the_job(monkeypatch, change):
    """Run `change()` after the Spark job wrote its outputs, before the swap."""
    real = driver.spark_step

    def spark_then_change(name, plan):
        result = real(name, plan)
        change()
        return result

    monkeypatch.setattr(driver, "spark_step", spark_then_change)


def test_an_input_gone_meanwhile_swaps_nothing_and_deletes_the_outputs(writer, tenant, monkeypatch):
    topic = writer.topic("contested", 2)
    fill(writer, [topic], 10)
    before = everything(writer, [topic])
    pointers = set(Batch.objects.values_list("partition_id", "last_offset", "file_id", "position"))
    victim = Batch.objects.order_by("partition_id", "last_offset").first()

    def an_input_is_gone():
        SegmentFile.objects.filter(pk=victim.file_id).update(state="deleted")

    _during_the_job(monkeypatch, an_input_is_gone)
    run = compact(tenant)

    assert run.state == "succeeded", run.error
    assert run.details["swapped"] is False
    assert "input files are gone" in run.details["conflict"]
    assert run.output_files == 0
    assert not list(writer.store.list(f"{tenant.public_id}/compacted/"))
    assert (
        set(Batch.objects.values_list("partition_id", "last_offset", "file_id", "position"))
        == pointers
    )
    assert live(tenant, 0) == 9 and live(tenant, 1) == 0
    SegmentFile.objects.filter(pk=victim.file_id).update(state="live")
    assert everything(writer, [topic]) == before


def test_a_batch_repointed_meanwhile_is_a_conflict(writer, tenant, monkeypatch):
    topic = writer.topic("moved")
    fill(writer, [topic], 10)
    victim = Batch.objects.order_by("last_offset").last()

    def repoint():
        Batch.objects.filter(partition=victim.partition, last_offset=victim.last_offset).update(
            position=victim.position + 1
        )

    _during_the_job(monkeypatch, repoint)
    run = compact(tenant)
    assert run.details["swapped"] is False
    assert "1 batches changed" in run.details["conflict"]
    assert not list(writer.store.list(f"{tenant.public_id}/compacted/"))
    assert live(tenant, 0) == 10


def test_batches_expired_meanwhile_are_simply_not_repointed(writer, tenant, monkeypatch):
    topic = writer.topic("expiring")
    fill(writer, [topic], 10)
    before = everything(writer, [topic])

    def delete_records_below_20():
        metadata.records_delete(
            cluster_id=tenant.id,
            partitions=[{"topic_id": str(topic.id), "partition": 0, "offset": 20}],
        )
        index_retention.batches_below_log_start_delete(cluster_id=tenant.id)

    _during_the_job(monkeypatch, delete_records_below_20)
    run = compact(tenant)

    assert run.details["swapped"] is True, run.details
    assert everything(writer, [topic]) == {k: v[20:] for k, v in before.items()}
    assert live(tenant, 0) == 0 and live(tenant, 1) == 1


def test_commits_during_compaction_lose_nothing(writer, tenant, transactional_db, monkeypatch):
    topics = [writer.topic("busy", 4)]
    fill(writer, topics, 16)
    stop = threading.Event()
    errors: list[BaseException] = []
    committed = {"files": 0}
    lock = threading.Lock()

    def producer(number: int) -> None:
        try:
            n = 1_000_000 * (number + 1)  # the two producers never reuse a file number
            while not stop.is_set() or committed["files"] < 40:
                fill(writer, topics, 1, start=n)
                n += 1
                with lock:
                    committed["files"] += 1
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=producer, args=(i,)) for i in range(2)]
    real = driver.spark_step

    def spark_while_producing(name, plan):
        for thread in threads:
            thread.start()
        return real(name, plan)

    monkeypatch.setattr(driver, "spark_step", spark_while_producing)
    run = compact(tenant)
    stop.set()
    for thread in threads:
        thread.join(60)
    assert not errors, errors[0]

    assert run.details["swapped"] is True, run.details
    assert run.input_files == 16
    for p in range(4):
        records = read_partition(writer, topics[0], p)
        high_watermark = Partition.objects.get(topic=topics[0], index=p).high_watermark
        assert [r.offset for r in records] == list(range(high_watermark))
        assert high_watermark == 8 * (16 + committed["files"])  # 5 + 3 records a file
        files = {r.value.decode().split("/")[2] for r in records}
        assert len(files) == 16 + committed["files"]


def test_a_corrupt_input_fails_the_run_and_changes_nothing(writer, tenant):
    topic = writer.topic("damaged")
    fill(writer, [topic], 8)
    pointers = set(Batch.objects.values_list("partition_id", "last_offset", "file_id", "position"))
    victim = SegmentFile.objects.filter(cluster=tenant).order_by("id")[3]
    data = bytearray(writer.store.get(victim.key))
    data[70] ^= 0xFF  # inside the first batch's records: its CRC no longer matches
    writer.store.put(victim.key, bytes(data))

    run = compact(tenant)

    assert run.state == "failed"
    assert "CRC-32C mismatch" in run.error
    assert (
        set(Batch.objects.values_list("partition_id", "last_offset", "file_id", "position"))
        == pointers
    )
    assert live(tenant, 0) == 8 and live(tenant, 1) == 0


def test_a_run_expired_while_its_job_ran_swaps_nothing(writer, tenant, monkeypatch):
    topic = writer.topic("slow")
    fill(writer, [topic], 8)

    def time_out():
        JobRun.objects.filter(cluster=tenant).update(started_at=timezone.now() - timedelta(hours=3))
        assert jobs_services.job_runs_expire(cluster=tenant) == 1

    _during_the_job(monkeypatch, time_out)
    run = compact(tenant)

    assert run.state == "failed" and run.error.startswith("abandoned")
    assert "swapped" not in run.details
    assert not list(writer.store.list(f"{tenant.public_id}/compacted/"))
    assert live(tenant, 0) == 8 and live(tenant, 1) == 0
    # The next check waits out the failure back-off, then starts over.
    assert jobs_services.job_dispatch(cluster=tenant, kind="compaction") is None
    JobRun.objects.filter(pk=run.pk).update(finished_at=timezone.now() - timedelta(minutes=6))
    assert jobs_services.job_dispatch(cluster=tenant, kind="compaction") is not None
