"""The in-process Spark driver of the tests and benchmarks: it drives a job run's steps
in this process, on a bucket this process can open — what a jobs-role agent does in
production through the agent API (`virtualclusters.jobs.leases`). The control plane
itself never runs a Spark job nor imports PySpark; only this support code does.

Its settings are module attributes (tests set them through ``monkeypatch``):
``BUCKET_URL`` for clusters that have no bucket yet, ``SPARK_MASTER`` and
``SPARK_MODE`` (``inprocess``: the process's cached SparkSession; ``subprocess``: a
fresh one per job, see ``jobs/runner.py``).
"""

from __future__ import annotations

import logging

from django.conf import settings

from jobs.runner import run_job
from jobs.segment_io import store_for
from virtualclusters.jobs.models import JobRun
from virtualclusters.jobs.services import job_run_advance, job_run_start

log = logging.getLogger(__name__)

BUCKET_URL: str | None = None
# Where steps that talk to the control plane (the table append's catalog) reach it, and
# the agent key they do it with: what a jobs-role agent adds to those plans.
CONTROL_PLANE_URL: str | None = None
AGENT_KEY: str | None = None
SPARK_MASTER = "local[1]"
SPARK_MODE = "inprocess"


def spark_step(name: str, plan: dict) -> dict:
    """Run one step's Spark job here (tests wrap it to act between job and swap)."""
    return run_job(
        name,
        plan,
        mode=SPARK_MODE,
        master=SPARK_MASTER,
        timeout_s=settings.FLOE_JOB_TIMEOUT_S,
    )


def _with_agent_parts(plan: dict, bucket: str) -> dict:
    plan = {**plan, "bucket_url": bucket}
    if "catalog_path" in plan:
        if not CONTROL_PLANE_URL or not AGENT_KEY:
            raise ValueError("this step calls the catalog: set CONTROL_PLANE_URL and AGENT_KEY")
        plan["catalog_url"] = CONTROL_PLANE_URL.rstrip("/") + plan["catalog_path"]
        plan["catalog_token"] = AGENT_KEY
    return plan


def job_run_execute(*, run_id: int, bucket_url: str | None = None) -> JobRun | None:
    """Run a queued job to its end in this process; None if it was not queued."""
    run = job_run_start(run_id=run_id)
    if run is None:
        return None
    bucket = bucket_url or run.cluster.bucket_url or BUCKET_URL
    if not bucket:
        raise ValueError("the cluster has no bucket yet: pass bucket_url or set BUCKET_URL")
    advance = job_run_advance(run=run)
    while advance.step is not None:
        try:
            result = spark_step(advance.step.job, _with_agent_parts(advance.step.plan, bucket))
        except Exception as exc:
            log.exception("job run %s (%s) failed", run.public_id, run.kind)
            advance = job_run_advance(run=run, error=f"{type(exc).__name__}: {exc}")
        else:
            advance = job_run_advance(run=run, result=result)
    if advance.discard:
        # Outputs a conflict left unreferenced (the orphan cleaner is the backstop).
        try:
            store_for(bucket).delete_many(advance.discard)
        except Exception:
            log.exception("could not delete %d unswapped outputs", len(advance.discard))
    run.refresh_from_db()
    return run
