"""Celery tasks of the throughput history: thin, they call one service each."""

from __future__ import annotations

from celery import shared_task

from virtualclusters.models import VirtualCluster
from virtualclusters.throughput import services


@shared_task(ignore_result=True)
def throughput_sample_all() -> None:
    """Beat, every minute: sample every cluster, then forget samples past retention."""
    for cluster in VirtualCluster.objects.iterator():
        services.throughput_sample(cluster=cluster)
    services.throughput_prune()
