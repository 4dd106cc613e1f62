"""Floe's control plane: the Django project (settings, URLs, Celery app, tenancy)."""

from controlplane.celery import app as celery_app

__all__ = ["celery_app"]
