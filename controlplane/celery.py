"""The Celery app: tasks are found in every installed app's ``tasks.py``."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")

app = Celery("floe")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
