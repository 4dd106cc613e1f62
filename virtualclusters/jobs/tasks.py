"""Celery tasks: beat's checks and the job runs they queue. Thin: ids in, one service.

    beat ─ jobs_check(kind) ─┬─ cluster_job_check(cluster, kind) ─ a queued JobRun
                             └─ … one per virtual cluster
    beat ─ history_prune()   (daily)

The runs themselves execute in the data plane: a jobs-role agent of the cluster leases
them (`virtualclusters.jobs.leases`), so the control plane never opens a bucket. Each
task is safe to run twice: a check queues a run only when no run of its kind is under
way (a unique constraint settles races).
"""

from __future__ import annotations

from celery import shared_task

from virtualclusters.jobs import services as jobs_services
from virtualclusters.jobs.models import JobRun
from virtualclusters.models import VirtualCluster
from virtualclusters.tables.models import TopicTable


@shared_task(ignore_result=True)
def jobs_check(kind: str) -> None:
    """Beat's entry point: check every cluster for work of `kind`."""
    JobRun.Kind(kind)  # refuse unknown kinds here, not once per cluster
    clusters = VirtualCluster.objects.all()
    if kind == JobRun.Kind.TABLE_APPEND:  # checked often: only clusters that keep tables
        clusters = clusters.filter(
            pk__in=TopicTable.objects.filter(state=TopicTable.State.ACTIVE).values(
                "topic__cluster_id"
            )
        )
    for cluster_id in clusters.values_list("id", flat=True).iterator():
        cluster_job_check.delay(cluster_id, kind)


@shared_task(ignore_result=True)
def cluster_job_check(cluster_id: int, kind: str) -> None:
    """Dispatch a run of `kind` for one cluster if it has work and none is under way."""
    cluster = VirtualCluster.objects.filter(pk=cluster_id).first()
    if cluster is None:
        return
    jobs_services.job_dispatch(cluster=cluster, kind=kind)


@shared_task(ignore_result=True)
def history_prune() -> None:
    """Beat, daily: forget old job runs and the rows of long-deleted files."""
    jobs_services.history_prune()
