"""What every agent-API call goes through: POST only, the agent key names the cluster, the
body is decoded and validated by the call's schema, and every error is short JSON.

Every call is authenticated by an agent key, which names exactly one virtual cluster;
nothing else is reachable from an agent-API view.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

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
            cluster = _cluster_for(request)
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
                answer = JsonResponse(handler(cluster, schemas.decode(body, schema)))
                AGENT_API_SECONDS.labels(call=handler.__name__).observe(
                    time.perf_counter() - started
                )
                AGENT_API_CALLS.labels(call=handler.__name__, outcome="ok").inc()
                return answer
            except BadBody as exc:
                AGENT_API_CALLS.labels(call=handler.__name__, outcome="bad_request").inc()
                return error_response(400, f"bad request: {exc}")
            except Exception as exc:  # ours, or the database's: never the debug page
                AGENT_API_CALLS.labels(call=handler.__name__, outcome="error").inc()
                log.exception("agent API %s failed", handler.__name__)
                return error_response(500, f"{handler.__name__} failed: {type(exc).__name__}")

        view.__name__ = handler.__name__
        return view

    return wrap


def unknown_call(request: HttpRequest) -> JsonResponse:
    return error_response(404, f"no agent API call at {request.path}")
