"""The Celery app: tasks are found in every installed app's ``tasks.py`` and in the
packages listed here (an app's tasks may live beside the services they call)."""

import os

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")

app = Celery("floe")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
app.autodiscover_tasks(["virtualclusters.jobs", "virtualclusters.throughput"])


@signals.task_postrun.connect
def _count_run(task=None, state=None, **_):
    from controlplane.metrics import TASK_RUNS

    TASK_RUNS.labels(task=getattr(task, "name", "?"), outcome=(state or "unknown").lower()).inc()


@signals.worker_init.connect
def _serve_metrics(**_):
    """The worker's own /metrics, on FLOE_WORKER_METRICS_PORT when it is set."""
    port = os.environ.get("FLOE_WORKER_METRICS_PORT")
    if port:
        from prometheus_client import start_http_server

        from controlplane.metrics import build_info

        build_info("worker")
        start_http_server(int(port), addr=os.environ.get("FLOE_WORKER_METRICS_HOST", "127.0.0.1"))
