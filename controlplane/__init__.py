"""Floe's control plane: the Django project — settings, URL wiring (``urls``,
``console_urls``, ``agent_urls``, ``api.urls``), ASGI/WSGI, the Celery app, the
project's metrics, the embedded PostgreSQL/Redis and the playground. Every app sits
below it; it owns no models."""

from controlplane.celery import app as celery_app

__all__ = ["celery_app"]
