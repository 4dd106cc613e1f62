"""Prometheus metrics of the control plane itself: the web app's requests and latencies,
the Celery tasks' runs and failures, and the build (the agent API's calls, commits/s and
fetch-plan latency, are the metadata store's own: `metadata_store.agent_api.metrics`, on
the same registry; the topic tables' lag is read from the database at each scrape:
`virtualclusters.tables.metrics`). `/metrics` on the web app; the worker serves its own on
`FLOE_WORKER_METRICS_PORT` when set.

The web app's `/metrics` is on the public port and its series name clusters and tables of
every organization, so it answers only a scraper that sends the token of the setting
`FLOE_METRICS_TOKEN` (`Authorization: Bearer <token>`): 401 without it, 404 when no token
is set (the endpoint is off).

Several web server workers (uvicorn --workers): set `PROMETHEUS_MULTIPROC_DIR` (an empty folder) and each
scrape adds up every worker's numbers; without it a scrape sees one worker's.
"""

from __future__ import annotations

import hmac
import os
import time
from importlib.metadata import PackageNotFoundError, version

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

REQUESTS = Counter(
    "floe_web_requests", "Web requests answered, by view and status.", ["view", "method", "status"]
)
REQUEST_SECONDS = Histogram("floe_web_request_seconds", "Time to answer a web request.", ["view"])
TASK_RUNS = Counter(
    "floe_celery_task_runs", "Celery task runs, by task and outcome.", ["task", "outcome"]
)
BUILD_INFO = Gauge("floe_build_info", "The running Floe version.", ["version", "component"])

try:
    _VERSION = version("floe")
except PackageNotFoundError:  # run from a checkout
    _VERSION = "0.1.0"


def build_info(component: str) -> None:
    BUILD_INFO.labels(version=_VERSION, component=component).set(1)


class RequestMetricsMiddleware:
    """Counts and times every request by its URL name (bounded labels), never its path."""

    def __init__(self, get_response):
        self.get_response = get_response
        build_info("web")

    def __call__(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        view = (match.url_name or match.view_name) if match else "unmatched"
        REQUESTS.labels(view=view, method=request.method, status=str(response.status_code)).inc()
        REQUEST_SECONDS.labels(view=view).observe(time.perf_counter() - started)
        return response


def scraper_allowed(request: HttpRequest) -> bool:
    """Whether the request carries the metrics token (compared in constant time)."""
    token: str | None = settings.FLOE_METRICS_TOKEN
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return bool(token) and scheme.lower() == "bearer" and hmac.compare_digest(given, token or "")


def metrics_view(request: HttpRequest) -> HttpResponse:
    """The exposition, every worker's when PROMETHEUS_MULTIPROC_DIR is set — to the scraper
    holding `FLOE_METRICS_TOKEN` only."""
    if not settings.FLOE_METRICS_TOKEN:
        return HttpResponse(
            "/metrics is off: set FLOE_METRICS_TOKEN and scrape with it as a bearer token\n",
            status=404,
            content_type="text/plain",
        )
    if not scraper_allowed(request):
        response = HttpResponse(
            "/metrics wants the FLOE_METRICS_TOKEN as a bearer token\n",
            status=401,
            content_type="text/plain",
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    # Imported here: the Celery worker imports this module before the apps are ready.
    from virtualclusters.tables.metrics import TABLES_REGISTRY

    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = REGISTRY
    body = generate_latest(registry) + generate_latest(TABLES_REGISTRY)  # read at the scrape
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
