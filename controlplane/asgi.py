"""The web server's entry point: ``uvicorn controlplane.asgi:application``.

The agent API is answered on the event loop (``metadata_store.agent_api.asgi``: commits in
groups, other calls in threads); the console and the REST API are Django's WSGI app in a
pool of threads (``a2wsgi``), with the same middleware as under any WSGI server.
"""

import os

from a2wsgi import WSGIMiddleware
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
django_app = get_wsgi_application()

from django.conf import settings  # noqa: E402 - after Django is set up

from metadata_store.agent_api.asgi import AgentApi, agent_calls  # noqa: E402


def web_app(wsgi_app) -> AgentApi:
    """The agent API in front of `wsgi_app` (Django's app, or a test server's wrapping)."""

    def routes():
        from controlplane import agent_urls

        return agent_calls(agent_urls.urlpatterns)

    return AgentApi(WSGIMiddleware(wsgi_app, workers=settings.FLOE_WEB_THREADS), routes=routes)


application = web_app(django_app)
