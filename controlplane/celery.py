"""The Celery app: tasks are found in every installed app's ``tasks.py`` and in the
packages listed here (an app's tasks may live beside the services they call)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")

app = Celery("floe")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
app.autodiscover_tasks(["virtualclusters.jobs", "virtualclusters.throughput"])
