"""What every agent-API call goes through: POST only, the agent key names the cluster, the
body is decoded and validated by the call's schema, and every error is short JSON.

Every call is authenticated by an agent key, which names exactly one virtual cluster;
nothing else is reachable from an agent-API view. The web server serves the calls on its
event loop (``agent_api.asgi``, which hands each to `respond` in a thread, and commits to
the commit pipeline); `endpoint` also makes each a Django view of the same behaviour,
for Django's test client and WSGI servers.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, Protocol, TypeVar, cast, runtime_checkable

import msgspec
import psycopg
from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import DatabaseError, InterfaceError, OperationalError, connection
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from metadata_store.agent_api import schemas
from metadata_store.agent_api.metrics import AGENT_API_CALLS, AGENT_API_SECONDS
from metadata_store.agent_api.schemas import BadBody
from metadata_store.clusters import VirtualCluster, agent_key_authenticate

log = logging.getLogger(__name__)

_KEY_CACHE_SECONDS = 5.0
# A commit of MAX_COMMIT_BATCHES entries is ~25 MB of JSON; the console's upload limit
# (DATA_UPLOAD_MAX_MEMORY_SIZE, 2.5 MB) would refuse big segments of small batches.
MAX_BODY_BYTES = 64 * 1024 * 1024
# agent key's plaintext -> (until when, its cluster, the agent group it is limited to)
_key_cache: dict[str, tuple[float, VirtualCluster | None, str]] = {}
# The agent group the key of the call being answered is limited to ("" = any): register
# and heartbeat refuse an agent of another group (``views._agent_group_allowed``).
KEY_AGENT_GROUP: ContextVar[str] = ContextVar("floe_key_agent_group", default="")
# PostgreSQL connections that already carry the agent API's timeouts.
_bounded: weakref.WeakSet[Any] = weakref.WeakSet()  # psycopg connections
# SQLSTATEs of a statement cut short by our bounds (query_canceled, lock_not_available).
_TIMED_OUT = {"57014", "55P03"}
_FOREIGN_KEY = "23503"  # foreign_key_violation


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


def cached_cluster(authorization: str) -> tuple[bool, VirtualCluster | None]:
    """(known, cluster) for an Authorization header from the key cache alone: known is
    False when only the database can say (``cluster_for``)."""
    if not authorization.startswith("Bearer "):
        return True, None
    cached = _key_cache.get(authorization[7:].strip())
    if cached and cached[0] > time.monotonic():
        return True, cached[1]
    return False, None


def forget_cluster(cluster_id: int | None) -> None:
    """Drop a cluster's keys from the cache (every key when `cluster_id` is None): the
    cluster was deleted or one of its keys revoked (``key_changes`` hears of it)."""
    if cluster_id is None:
        _key_cache.clear()
        return
    for plaintext, (_, cluster, _group) in list(_key_cache.items()):
        if cluster is not None and cluster.pk == cluster_id:
            _key_cache.pop(plaintext, None)


def cluster_vanished(exc: Exception, cluster_id: int) -> bool:
    """Whether a call failed because its cluster was deleted meanwhile (a row naming it
    refused by a foreign key, and the cluster gone): the key is then unknown (401), not
    our failure (500). Forgets the cluster's keys when so."""
    if not any(getattr(e, "sqlstate", None) == _FOREIGN_KEY for e in (exc, exc.__cause__)):
        return False
    if VirtualCluster.objects.filter(pk=cluster_id).exists():
        return False
    forget_cluster(cluster_id)
    return True


def cluster_for(authorization: str) -> VirtualCluster | None:
    """The cluster of an Authorization header's agent key, cached briefly (revocation lag
    ≤ 5 s)."""
    return key_for(authorization)[0]


def key_for(authorization: str) -> tuple[VirtualCluster | None, str]:
    """The cluster of an Authorization header's agent key and the agent group the key is
    limited to ("" = any), cached briefly (revocation lag ≤ 5 s)."""
    if not authorization.startswith("Bearer "):
        return None, ""
    plaintext = authorization[7:].strip()
    cached = _key_cache.get(plaintext)
    if cached and cached[0] > time.monotonic():
        return cached[1], cached[2]
    key = agent_key_authenticate(plaintext)
    cluster, group = (key.cluster, key.agent_group) if key else (None, "")
    if len(_key_cache) > 10_000:
        _key_cache.clear()
    _key_cache[plaintext] = (time.monotonic() + _KEY_CACHE_SECONDS, cluster, group)
    return cluster, group


class CallRefused(Exception):
    """A call the control plane refuses with `status` and a message for the operator
    (a bucket that is not the cluster's, a job result from a lost lease…)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


# msgspec writes a 100-batch commit's answer in a tenth of json.dumps' time; anything it
# does not know (a Decimal in a config, say) is written as Django's encoder writes it.
_encoder = msgspec.json.Encoder(enc_hook=DjangoJSONEncoder().default)


# A call's answer: a JSON object.
Answer = dict[str, Any]
_Body = TypeVar("_Body", bound=msgspec.Struct)
# A call's handler: (the agent key's cluster, the decoded body) -> the answer.
Handler = Callable[[VirtualCluster, _Body], Answer]


# A call served on the web server's event loop (``agent_api.asgi``): (cluster, decoded
# body, an event set when the agent hangs up or the server stops) -> the answer.
OnLoop = Callable[[VirtualCluster, Any, asyncio.Event], Awaitable[Answer]]


@runtime_checkable
class AgentCall(Protocol):
    """What `endpoint` returns: a Django view that carries its handler and schema, and
    the coroutine that serves it on the loop where it has one (``on_loop``)."""

    __name__: str
    handler: Handler[Any]
    schema: type[msgspec.Struct]
    on_loop: OnLoop | None

    def __call__(self, request: HttpRequest) -> HttpResponse: ...


def encode(payload: Answer) -> bytes:
    return _encoder.encode(payload)


def json_response(payload: Answer, status: int = 200) -> HttpResponse:
    return HttpResponse(encode(payload), status=status, content_type="application/json")


def error_response(status: int, message: str) -> HttpResponse:
    """Every agent-API error is a short JSON object, whatever DEBUG says."""
    return json_response({"error": message}, status)


def failure(name: str, exc: Exception) -> tuple[int, Answer]:
    """The answer to a call that raised `exc`: a 400 naming the field of a body that does
    not fit, the status of a refusal, a 503 while the metadata store is busy or out of
    reach, a 500 with a one-line reason for a failure of ours (never a debug page)."""
    if isinstance(exc, BadBody):
        AGENT_API_CALLS.labels(call=name, outcome="bad_request").inc()
        return 400, {"error": f"bad request: {exc}"}
    if isinstance(exc, CallRefused):
        AGENT_API_CALLS.labels(call=name, outcome="refused").inc()
        return exc.status, {"error": str(exc)}
    reason = _unavailable(exc) if isinstance(exc, DatabaseError | psycopg.Error) else None
    if reason is None and isinstance(exc, TimeoutError):
        reason = "the metadata store did not answer in time"
    if reason is not None:
        AGENT_API_CALLS.labels(call=name, outcome="unavailable").inc()
        log.warning("agent API %s: %s (%s)", name, reason, exc)
        return 503, {"error": reason}
    AGENT_API_CALLS.labels(call=name, outcome="error").inc()
    log.error("agent API %s failed", name, exc_info=exc)
    return 500, {"error": f"{name} failed: {type(exc).__name__}"}


def retriable(exc: Exception) -> bool:
    """Whether `failure` answers `exc` with a 503 (the metadata store busy or out of
    reach): nothing about the call itself, so it is retried whole."""
    if isinstance(exc, DatabaseError | psycopg.Error):
        return _unavailable(exc) is not None
    return isinstance(exc, TimeoutError)


def succeeded(name: str, started: float) -> None:
    AGENT_API_SECONDS.labels(call=name).observe(time.perf_counter() - started)
    AGENT_API_CALLS.labels(call=name, outcome="ok").inc()


# The answers every transport of the agent API gives alike.
NO_KEY: tuple[int, Answer] = 401, {"error": "missing, unknown or revoked agent key"}
TOO_LARGE: tuple[int, Answer] = 413, {"error": f"the body is larger than {MAX_BODY_BYTES} bytes"}


def body_length(content_length: str | None) -> int | tuple[int, Answer]:
    """The body's length from its Content-Length header, or the error answer."""
    try:
        length = int(content_length or 0)
    except ValueError:
        return 400, {"error": "bad request: Content-Length is not a number"}
    if length > MAX_BODY_BYTES:
        return TOO_LARGE
    return length


def respond(
    handler: Handler[_Body], schema: type[_Body], authorization: str, body: bytes
) -> tuple[int, Answer]:
    """(status, answer) of one call, on this thread's Django connection: the key names
    the cluster, `body` is decoded by `schema`, then `handler(cluster, decoded)`."""
    name = handler.__name__
    try:
        cluster, key_group = key_for(authorization)
    except DatabaseError as exc:
        return 503, {"error": _unavailable(exc) or "cannot check the agent key"}
    if cluster is None:
        return NO_KEY
    started = time.perf_counter()
    token = KEY_AGENT_GROUP.set(key_group)
    try:
        decoded = schemas.decode(body, schema)
        _bound_database_work()
        answer = handler(cluster, decoded)
    except Exception as exc:  # noqa: BLE001 - every failure is a short JSON answer
        if cluster_vanished(exc, cluster.pk):
            return NO_KEY
        return failure(name, exc)
    finally:
        KEY_AGENT_GROUP.reset(token)
    succeeded(name, started)
    return 200, answer


def endpoint(schema: type[_Body]) -> Callable[[Handler[_Body]], AgentCall]:
    """An agent-API call: `handler(cluster, request)` with its body's `schema`. Returns
    it as a Django view (POST only) with the handler and schema on it, which is what the
    web server's agent API serves (``agent_api.asgi``) and what the agent-API fuzz test
    reads."""

    def wrap(handler: Handler[_Body]) -> AgentCall:
        @csrf_exempt
        def view(request: HttpRequest) -> HttpResponse:
            if request.method != "POST":
                return error_response(405, f"{request.method} is not allowed: use POST")
            length = body_length(request.META.get("CONTENT_LENGTH"))
            if isinstance(length, tuple):
                return json_response(length[1], length[0])
            # read(), not .body: the agent API has its own size limit (above).
            body = request.read(length) if length else b""
            status, answer = respond(
                handler, schema, request.headers.get("Authorization", ""), body
            )
            return json_response(answer, status)

        view.__name__ = handler.__name__
        call = cast(AgentCall, view)  # the view, given the attributes below
        call.handler = handler
        call.schema = schema
        call.on_loop = None
        return call

    return wrap


@csrf_exempt
def unknown_call(request: HttpRequest) -> HttpResponse:
    return error_response(404, f"no agent API call at {request.path}")
