"""What every agent-API call goes through: POST only, the agent key names the cluster, the
body is decoded and validated by the call's schema, and every error is short JSON.

Every call is authenticated by an agent key, which names exactly one virtual cluster;
nothing else is reachable from an agent-API view.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable

import psycopg
from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from controlplane.metrics import AGENT_API_CALLS, AGENT_API_SECONDS
from metadata_store.agent_api import schemas
from metadata_store.agent_api.schemas import BadBody
from virtualclusters import services
from virtualclusters.models import VirtualCluster

log = logging.getLogger(__name__)

_KEY_CACHE_SECONDS = 5.0
# A commit of MAX_COMMIT_BATCHES entries is ~25 MB of JSON; the console's upload limit
# (DATA_UPLOAD_MAX_MEMORY_SIZE, 2.5 MB) would refuse big segments of small batches.
MAX_BODY_BYTES = 64 * 1024 * 1024
_key_cache: dict[str, tuple[float, VirtualCluster | None]] = {}
# PostgreSQL connections that already carry the agent API's timeouts.
_bounded: weakref.WeakSet = weakref.WeakSet()
# SQLSTATEs of a statement cut short by our bounds (query_canceled, lock_not_available).
_TIMED_OUT = {"57014", "55P03"}


def _bound_database_work() -> None:
    """Set statement_timeout and lock_timeout on this thread's connection (once per
    connection): an agent-API call never waits on the database without limit."""
    connection.ensure_connection()
    raw = connection.connection
    # Inside a transaction (ATOMIC_REQUESTS, tests) a session setting would vanish with a
    # rollback: set it for that transaction only, every time.
    local = connection.in_atomic_block
    if raw in _bounded and not local:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('statement_timeout', %s, %s), set_config('lock_timeout', %s, %s)",
            [
                f"{settings.FLOE_AGENT_API_STATEMENT_TIMEOUT_MS}ms",
                local,
                f"{settings.FLOE_AGENT_API_LOCK_TIMEOUT_MS}ms",
                local,
            ],
        )
    if not local:
        _bounded.add(raw)


def _unavailable(exc: Exception) -> str | None:
    """Why a database error (Django's, or psycopg's from store.py's raw cursors) means
    "try again" (503), or None for a bug of ours (500)."""
    for error in (exc, exc.__cause__):
        if getattr(error, "sqlstate", None) in _TIMED_OUT:
            return "the metadata store is busy (statement or lock timeout)"
        if isinstance(
            error,
            OperationalError | InterfaceError | psycopg.OperationalError | psycopg.InterfaceError,
        ):
            return "the metadata store is unavailable"
    return None


def _cluster_for(request: HttpRequest) -> VirtualCluster | None:
    """The cluster of the request's agent key, cached briefly (revocation lag ≤ 5 s)."""
    header = request.headers.get("Authorization", "")
    if not header.startswith("Bearer "):
        return None
    plaintext = header[7:].strip()
    now = time.monotonic()
    cached = _key_cache.get(plaintext)
    if cached and cached[0] > now:
        return cached[1]
    key = services.agent_key_authenticate(plaintext)
    cluster = key.cluster if key else None
    if len(_key_cache) > 10_000:
        _key_cache.clear()
    _key_cache[plaintext] = (now + _KEY_CACHE_SECONDS, cluster)
    return cluster


class CallRefused(Exception):
    """A call the control plane refuses with `status` and a message for the operator
    (a bucket that is not the cluster's, a job result from a lost lease…)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def error_response(status: int, message: str) -> JsonResponse:
    """Every agent-API error is a short JSON object, whatever DEBUG says."""
    return JsonResponse({"error": message}, status=status)


def endpoint(schema: type):
    """An agent-API view: POST only, agent key → cluster, body decoded and validated by
    `schema` (agent_schemas), then `handler(cluster, request)`. A body that does not fit
    is a 400 naming the field; a failure of ours is a 500 with a one-line JSON reason."""

    def wrap(handler: Callable[[VirtualCluster, object], dict]):
        @csrf_exempt
        def view(request: HttpRequest) -> JsonResponse:
            if request.method != "POST":
                return error_response(405, f"{request.method} is not allowed: use POST")
            try:
                cluster = _cluster_for(request)
            except DatabaseError as exc:
                return error_response(503, _unavailable(exc) or "cannot check the agent key")
            if cluster is None:
                return error_response(401, "missing, unknown or revoked agent key")
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                return error_response(400, "bad request: Content-Length is not a number")
            if length > MAX_BODY_BYTES:
                return error_response(413, f"the body is larger than {MAX_BODY_BYTES} bytes")
            started = time.perf_counter()
            try:
                # read(), not .body: the agent API has its own size limit (above).
                body = request.read(length) if length else b""
                decoded = schemas.decode(body, schema)
                _bound_database_work()
                answer = JsonResponse(handler(cluster, decoded))
                AGENT_API_SECONDS.labels(call=handler.__name__).observe(
                    time.perf_counter() - started
                )
                AGENT_API_CALLS.labels(call=handler.__name__, outcome="ok").inc()
                return answer
            except BadBody as exc:
                AGENT_API_CALLS.labels(call=handler.__name__, outcome="bad_request").inc()
                return error_response(400, f"bad request: {exc}")
            except CallRefused as exc:
                AGENT_API_CALLS.labels(call=handler.__name__, outcome="refused").inc()
                return error_response(exc.status, str(exc))
            except (DatabaseError, psycopg.Error) as exc:
                reason = _unavailable(exc)
                if reason is None:
                    AGENT_API_CALLS.labels(call=handler.__name__, outcome="error").inc()
                    log.exception("agent API %s failed", handler.__name__)
                    return error_response(500, f"{handler.__name__} failed: {type(exc).__name__}")
                AGENT_API_CALLS.labels(call=handler.__name__, outcome="unavailable").inc()
                log.warning("agent API %s: %s (%s)", handler.__name__, reason, exc)
                return error_response(503, reason)
            except Exception as exc:  # ours, or the database's: never the debug page
                AGENT_API_CALLS.labels(call=handler.__name__, outcome="error").inc()
                log.exception("agent API %s failed", handler.__name__)
                return error_response(500, f"{handler.__name__} failed: {type(exc).__name__}")

        view.__name__ = handler.__name__
        view.schema = schema  # what the body must fit (the agent-API fuzz test reads it)
        return view

    return wrap


def unknown_call(request: HttpRequest) -> JsonResponse:
    return error_response(404, f"no agent API call at {request.path}")
