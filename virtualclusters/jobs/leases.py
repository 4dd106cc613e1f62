"""Job runs leased by the cluster's jobs-role agents: the Spark jobs run in the data
plane, against the cluster's own bucket, with the agents' own credentials.

    queued ─ job_run_lease ─▶ running (lease: agent, epoch, token, expiry)
       ▲                        │ job_lease_renew (heartbeats, progress)
       │                        │ job_run_report → next step, or succeeded/failed
       └── job_leases_expire ◀──┘ (the lease expired: the agent died)

The lease is the metadata store's (`metadata_store.leases`, subject "job <run id>"): the
rule migrations follow too — expiry on the database's clock, a new epoch and token for
every lease. The run keeps the token of the lease its current attempt runs under
(`lease_token`), so the result of a lost lease is refused (`LeaseLost`) and its executor
deletes what it wrote; a run driven without a lease (tests' driver) has none. A lease
belongs to one agent key's cluster: runs are looked up through it, so an agent of
another cluster finds nothing.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from metadata_store import leases
from metadata_store.leases import LeaseLost
from metadata_store.selectors import agent_runs_jobs
from virtualclusters.jobs.models import JobRun
from virtualclusters.jobs.services import Advance, job_leases_expire, job_run_advance
from virtualclusters.jobs.steps import Step
from virtualclusters.models import VirtualCluster

__all__ = ["LeaseLost", "job_lease_renew", "job_run_lease", "job_run_report"]

State = JobRun.State
# A lease that finds a run with nothing to do finishes it and looks at the next one.
MAX_RUNS_PER_LEASE_CALL = 8


def job_run_lease(
    *, cluster: VirtualCluster, agent_id: str, lease_s: int
) -> tuple[JobRun, Step, int] | None:
    """The oldest queued run of the cluster, leased to `agent_id`, with its first step
    and the lease's epoch; None when there is nothing to run, or nothing for this agent
    (its agent group is not among the cluster's ``jobs_agent_groups``)."""
    if not agent_runs_jobs(cluster, agent_id):
        return None
    job_leases_expire(cluster=cluster)
    for _ in range(MAX_RUNS_PER_LEASE_CALL):
        with transaction.atomic():
            run = (
                JobRun.objects.select_for_update(skip_locked=True)
                .filter(cluster=cluster, state=State.QUEUED)
                .order_by("id")
                .first()
            )
            if run is None:
                return None
            subject = leases.job_subject(run.public_id)
            lease = leases.lease_take(
                cluster_id=cluster.pk,
                subject=subject,
                holder=agent_id,
                seconds=leases.lease_seconds(subject, lease_s),
            )
            if lease is None:  # (a lease of an earlier attempt still live: not yet)
                return None
            run.state = State.RUNNING
            run.started_at = timezone.now()
            run.lease_agent = agent_id
            run.lease_token = lease.token
            run.attempts += 1
            run.progress = {"stage": "planning"}
            run.save(
                update_fields=[
                    "state",
                    "started_at",
                    "lease_agent",
                    "lease_token",
                    "attempts",
                    "progress",
                ]
            )
        run.cluster = cluster
        advance = job_run_advance(run=run)
        if advance.step is not None:
            _progress_stage(run, advance.step)
            return run, advance.step, lease.epoch
    return None


def _progress_stage(run: JobRun, step: Step) -> None:
    run.progress = {"stage": step.stage or step.job, "bytes_done": 0}
    JobRun.objects.filter(pk=run.pk, lease_token=run.lease_token).update(progress=run.progress)


def _leased(cluster: VirtualCluster, run_id: str, token: str) -> JobRun:
    run = JobRun.objects.filter(cluster=cluster, public_id=run_id).first()
    if run is None:
        raise LeaseLost(f"no job run {run_id} in this cluster")
    if run.state != State.RUNNING or not token or run.lease_token != token:
        raise LeaseLost(f"job run {run_id} is not leased with this token (the lease was lost)")
    with transaction.atomic():
        leases.lease_check(cluster_id=cluster.pk, subject=leases.job_subject(run_id), token=token)
    run.cluster = cluster
    return run


def job_lease_renew(
    *, cluster: VirtualCluster, run_id: str, token: str, lease_s: int, progress: dict[str, Any]
) -> JobRun:
    """Extend a lease (the agent's heartbeat while Spark works) and record progress. A
    lease that expired stays lost, even if nobody took the run since."""
    run = _leased(cluster, run_id, token)
    run.progress = {**run.progress, **progress}
    # The run's row, then its lease: the order a compaction's swap locks them in.
    with transaction.atomic():
        updated = JobRun.objects.filter(pk=run.pk, state=State.RUNNING, lease_token=token).update(
            progress=run.progress
        )
        if not updated:
            raise LeaseLost(f"job run {run_id} is not leased with this token (the lease was lost)")
        subject = leases.job_subject(run_id)
        leases.lease_renew(
            cluster_id=cluster.pk,
            subject=subject,
            token=token,
            seconds=leases.lease_seconds(subject, lease_s),
        )
    return run


def job_run_report(
    *,
    cluster: VirtualCluster,
    run_id: str,
    token: str,
    lease_s: int,
    result: dict[str, Any] | None,
    error: str = "",
) -> Advance:
    """The result (or error) of the current step of a leased run: applied with the
    compare-and-swap rules; the answer is the next step, or none, and what to delete."""
    run = _leased(cluster, run_id, token)
    if result is None and not error:
        error = "the agent reported neither a result nor an error"
    advance = job_run_advance(run=run, result=result, error=error)
    if advance.step is not None:
        job_lease_renew(cluster=cluster, run_id=run_id, token=token, lease_s=lease_s, progress={})
        _progress_stage(run, advance.step)
    return advance
