"""``/agent/v1/`` calls of the browse channel (docs/AGENT_API.md)."""

from django.urls import path

from virtualclusters.browsing import agent_api as b

urlpatterns = [
    path("browse/poll", b.browse_poll),
    path("browse/answer", b.browse_answer),
]
