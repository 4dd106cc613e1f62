"""The Celery path itself: beat's check → task → a queued JobRun, by a real worker
consuming from the Redis at REDIS_URL; the run then executes as an agent would."""

from __future__ import annotations

import os
import time

import pytest
from celery.contrib.testing.worker import start_worker

from controlplane.celery import app
from metadata_store.models import SegmentFile
from tests.jobs import driver
from tests.jobs.test_compaction import everything, fill
from virtualclusters.jobs.models import JobRun


@pytest.fixture
def worker(transactional_db, settings):
    """A worker thread on a queue of this test run's own (Redis db 15 is shared)."""
    queue = f"floe-jobs-tests-{os.getpid()}"
    app.conf.task_default_queue = queue
    assert app.amqp.default_queue.name == queue, "the Celery app was configured too early"
    with start_worker(app, pool="solo", perform_ping_check=False, loglevel="WARNING") as w:
        yield w


def wait_for_run(cluster, kind: str, timeout_s: float = 90) -> JobRun:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = JobRun.objects.filter(cluster=cluster, kind=kind).first()
        if run is not None:
            return run
        time.sleep(0.2)
    raise AssertionError(f"no {kind} run after {timeout_s}s")


def test_beat_check_runs_compaction_through_a_real_worker(writer, tenant, worker, settings):
    topics = [writer.topic("celery", 2)]
    fill(writer, topics, 12)
    before = everything(writer, topics)
    entry = settings.CELERY_BEAT_SCHEDULE["floe-compaction-check"]

    app.send_task(entry["task"], args=entry["args"])  # what beat sends every 30 s
    queued = wait_for_run(tenant, "compaction")
    assert queued.state == "queued"  # the control plane plans; the data plane runs
    run = driver.job_run_execute(run_id=queued.id)

    assert run.state == "succeeded", run.error
    assert run.details["swapped"] is True
    assert (run.input_files, run.output_files) == (12, 1)
    assert run.started_at >= run.created_at and run.finished_at >= run.started_at
    assert everything(writer, topics) == before
    assert SegmentFile.objects.filter(cluster=tenant, state="live", level=0).count() == 0
    # The same check again finds nothing to do: no second run.
    app.send_task(entry["task"], args=entry["args"])
    time.sleep(1.5)
    assert JobRun.objects.filter(cluster=tenant).count() == 1


def test_every_job_kind_has_a_beat_entry(settings):
    checks = [
        e for e in settings.CELERY_BEAT_SCHEDULE.values() if e["task"].endswith(".jobs_check")
    ]
    assert {e["args"][0] for e in checks} == set(JobRun.Kind.values)
    for entry in settings.CELERY_BEAT_SCHEDULE.values():
        assert entry["task"] in app.tasks, entry
