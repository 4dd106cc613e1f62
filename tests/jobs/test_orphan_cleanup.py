"""Orphan cleanup: objects no file row knows are deleted once older than the grace."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

from django.utils import timezone

from tests.factories import make_cluster
from tests.jobs import driver
from tests.jobs.segments import batch
from virtualclusters.jobs import services as jobs_services
from virtualclusters.jobs.models import JobRun


def put_aged(writer, key: str, age_s: float) -> None:
    writer.store.put(key, b"not committed")
    path = Path(urlsplit(writer.store.url).path, key)
    then = time.time() - age_s
    os.utime(path, (then, then))


def test_old_orphans_are_deleted_and_fresh_ones_kept(writer, tenant):
    topic = writer.topic("t")
    writer.commit([(topic, 0, batch([(b"k", b"v")]))])
    committed = list(writer.store.list(f"{tenant.public_id}/"))
    assert len(committed) == 1
    known = committed[0].key
    path = Path(urlsplit(writer.store.url).path, known)
    os.utime(path, (time.time() - 3600, time.time() - 3600))

    prefix = tenant.public_id
    put_aged(writer, f"{prefix}/segments/2026/01/01/dead-agent-1.seg", 600)
    put_aged(writer, f"{prefix}/segments/2026/01/01/dead-agent-2.seg", 600)
    put_aged(writer, f"{prefix}/segments/2026/01/01/just-put.seg", 10)
    put_aged(writer, f"{prefix}/README.txt", 600)  # not a segment: not ours to judge
    JobRun.objects.create(
        cluster=tenant,
        kind="compaction",
        state="running",
        started_at=timezone.now() - timedelta(minutes=20),
        details={"output_root": f"{prefix}/compacted/job_running/"},
    )
    put_aged(writer, f"{prefix}/compacted/job_running/x/000000.seg", 600)
    other, _ = make_cluster("neighbour")
    put_aged(writer, f"{other.public_id}/segments/old.seg", 600)

    run = jobs_services.job_dispatch(cluster=tenant, kind=JobRun.Kind.ORPHAN_CLEANUP)
    run = driver.job_run_execute(run_id=run.id)

    assert run.state == "succeeded", run.error
    assert run.details["orphans_deleted"] == 2
    assert run.details["orphan_bytes_deleted"] == 2 * len(b"not committed")
    assert run.input_files == 6  # everything listed under the cluster's prefix
    left = sorted(info.key for info in writer.store.list(""))
    assert left == sorted(
        [
            known,
            f"{prefix}/segments/2026/01/01/just-put.seg",
            f"{prefix}/README.txt",
            f"{prefix}/compacted/job_running/x/000000.seg",
            f"{other.public_id}/segments/old.seg",
        ]
    )
