"""WSGI entry point: Django alone (Django's test client and tools use it). The web server
runs ``controlplane.asgi``, which serves agents' commits in groups."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
application = get_wsgi_application()
