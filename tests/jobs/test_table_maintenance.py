"""Topic-table maintenance, the append job's last step: many small appends are compacted
(at most FLOE_TABLE_MAX_SMALL_FILES small files per partition range stay — 3 here, so
9 appends prove the rule the default of 10 applies after 200), the rows unchanged; the
replaced files stay while a snapshot within the topic's retention.ms references them,
and once the snapshots are older than it they are expired and their files leave the
bucket, as do files an attempt never committed once no attempt can. Segment files are committed through the real metadata store and the job runs
in this process's Spark, committing through the catalog on a real web server."""

from __future__ import annotations

import os
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from pyiceberg.catalog.rest import RestCatalog

from jobs.table_maintenance import referenced_files, small_file_groups
from metadata_store.clusters import cluster_bucket_claim
from metadata_store.models import Topic
from tests.factories import make_api_key, make_cluster
from tests.jobs import driver
from tests.jobs.segments import SegmentWriter, batch
from tests.virtualclusters.tables.readers import duckdb_rows
from virtualclusters.jobs import services as jobs_services
from virtualclusters.jobs.models import JobRun
from virtualclusters.tables.models import TopicTable
from virtualclusters.tables.topic_tables import topic_table_enable

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]


def append(cluster) -> JobRun:
    TopicTable.objects.filter(topic__cluster=cluster).update(last_appended_at=None)  # due now
    run = jobs_services.job_dispatch(cluster=cluster, kind=JobRun.Kind.TABLE_APPEND)
    assert run is not None, "the table should be due"
    run = driver.job_run_execute(run_id=run.id)
    assert run.state == "succeeded", run.error
    assert not run.details["errors"], run.details
    return run


def on_disk(table, suffix: str) -> set[str]:
    root = Path(unquote(urlsplit(table.location()).path))
    return {str(p) for p in root.rglob(f"*{suffix}")}


def paths(found: set[str]) -> set[str]:
    return {unquote(urlsplit(p).path) for p in found}


def test_small_appends_are_compacted_and_expired_snapshots_leave_the_bucket(
    spark, jobs_settings, live_server, monkeypatch
):
    jobs_settings.FLOE_TABLE_MAX_SMALL_FILES = 3
    jobs_settings.FLOE_TABLE_SWEEP_S = 0  # expiry and the orphan sweep at every append
    cluster, key = make_cluster("maintained", auto_create_topics=False)
    monkeypatch.setattr(driver, "CONTROL_PLANE_URL", live_server.url)
    monkeypatch.setattr(driver, "AGENT_KEY", key)
    cluster_bucket_claim(cluster=cluster, bucket_url=driver.BUCKET_URL)  # as an agent does
    cluster.refresh_from_db()
    writer = SegmentWriter(cluster, driver.BUCKET_URL)
    topic = writer.topic("clicks", partitions=2)
    topic_table_enable(topic=topic, schema="raw", freshness_seconds=1)
    rest = RestCatalog(
        "floe",
        uri=f"{live_server.url}/iceberg/{cluster.public_id}",
        token=make_api_key(cluster.organization),
    )
    expected: list[tuple] = []

    def produce_and_append(n: int) -> JobRun:
        records = [(f"k{n}-{i}".encode(), f"click {n}/{i}".encode()) for i in range(3)]
        (base,) = writer.commit([(topic, n % 2, batch(records))])
        expected.extend((n % 2, base + i, k, v) for i, (k, v) in enumerate(records))
        return append(cluster)

    def rows() -> list[tuple]:
        found = rest.load_table(("topics", "clicks")).scan().to_arrow().to_pylist()
        return sorted((r["partition"], r["offset"], r["key"], r["value"]) for r in found)

    runs = [produce_and_append(n) for n in range(9)]  # one data file each
    assert [r.details["compacted_files"] for r in runs] == [0, 0, 0, 4, 0, 0, 4, 0, 0]
    table = rest.load_table(("topics", "clicks"))
    assert len(list(table.scan().plan_files())) == 3
    assert not small_file_groups(table, target_bytes=10**9, max_files=3)
    assert rows() == sorted(expected)
    # The offsets the appends go on from are the compaction snapshot's too.
    assert table.current_snapshot().summary["floe.last-offsets"] == '{"0": 14, "1": 11}'
    # Within the retention (the topic's default, 7 days) the replaced files stay.
    assert len(table.metadata.snapshots) == 9 + 2
    replaced = on_disk(table, ".parquet")
    assert len(replaced) == 9 + 2

    # The topic now keeps records for 1 ms: the next run expires every snapshot but the
    # current one and deletes what only they referenced.
    Topic.objects.filter(pk=topic.pk).update(configs={"retention.ms": "1"})
    # Files an attempt wrote and never committed: one older than a job may run, deleted;
    # one that a running attempt may still commit, kept.
    data = Path(unquote(urlsplit(table.location()).path)) / "data"
    stale, fresh = data / "00000-0-stale.parquet", data / "00000-0-fresh.parquet"
    for orphan in (stale, fresh):
        orphan.write_bytes(b"PAR1 never committed")
    hours_ago = time.time() - 3 * 3600
    root = Path(unquote(urlsplit(table.location()).path))
    for old in [stale, *root.rglob("*.parquet"), *root.rglob("*.avro")]:
        if old != fresh:  # the table's own files too: referenced, they stay however old
            os.utime(old, (hours_ago, hours_ago))
    run = produce_and_append(9)
    assert run.details["orphans_deleted"] == 1, run.details
    assert fresh.exists() and not stale.exists()
    fresh.unlink()
    assert run.details["compacted_files"] == 4
    assert run.details["expired_snapshots"] == 12, run.details
    assert run.details["deleted_files"] > 0
    table = rest.load_table(("topics", "clicks"))
    assert len(table.metadata.snapshots) == 1
    live = paths(referenced_files(table, table.metadata.snapshots))
    assert on_disk(table, ".parquet") == paths(
        {t.file.file_path for t in table.scan().plan_files()}
    )
    assert on_disk(table, ".avro") <= live
    assert rows() == sorted(expected)
    assert duckdb_rows(
        rest.uri,
        rest.properties["token"],
        "topics",
        "clicks",
        'SELECT count(*), count(DISTINCT (partition, "offset")) FROM {table}',
    ) == [(30, 30)]

    # Expiry and the sweep read every snapshot's manifests: at most once per
    # FLOE_TABLE_SWEEP_S — the sweep just ran, so a stale orphan waits for the next.
    jobs_settings.FLOE_TABLE_SWEEP_S = 3600
    stale.write_bytes(b"PAR1 never committed")
    os.utime(stale, (hours_ago, hours_ago))
    run = produce_and_append(10)
    assert (run.details["orphans_deleted"], run.details["expired_snapshots"]) == (0, 0)
    assert stale.exists()
