"""The agent API as the web server serves it: on the event loop, ahead of the console.

Agents call ``/agent/v1/`` hundreds of times a second — every produce's commit, every
fetch's plan — and each call is authenticated by its own key, so the console's machinery
(sessions, CSRF, the signed-in user, the page metrics) means nothing to them. `AgentApi`
wraps the rest of the web app (the console, the REST API, as an ASGI app) and answers the
agent API's calls itself:

- a commit is decoded and checked here, on the loop, and joins its cluster's commit
  pipeline (``metadata_store.commit_pipeline``): the commits that arrive while a group is
  in the database go out together as the next one, on a connection of this process's own
  pool (``psycopg_pool``, autocommit, the agent API's statement and lock timeouts);
- a call whose view has an ``on_loop`` coroutine (the browse channel's long-poll,
  ``browse/poll``) is awaited here: it may wait 25 s for work, which must cost no thread;
  it ends early when the agent hangs up or the server is told to stop (SIGTERM/SIGINT),
  so a restart does not wait for the polls;
- every other call runs in a thread of its own pool with Django's connection of that
  thread (``endpoint.respond``, the same code as the Django views).

Measured on a 2-core machine with PostgreSQL on the same cores (``bench/metadata_commit.py``)
this serves 8 committers' 100-batch commits at 416-734/s (p99 18-29 ms) where gunicorn's
threads and Django's middleware served 253-272/s (p99 61-100 ms).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import FrameType
from typing import Any, TypeVar

import psycopg
from django.conf import settings
from django.db import DatabaseError, connections
from django.urls import URLPattern, URLResolver, get_resolver
from psycopg_pool import AsyncConnectionPool
from psycopg_pool.base import AttemptWithBackoff

from metadata_store import mirroring, store
from metadata_store.agent_api import endpoint, feed_relay, key_changes, schemas, views
from metadata_store.clusters import VirtualCluster
from metadata_store.commit_pipeline import CommitPipeline

log = logging.getLogger(__name__)

PREFIX = "/agent/v1/"
# A commit body larger than this is decoded in a thread, not on the loop (a 50,000-batch
# segment's commit takes tens of milliseconds to decode).
DECODE_ON_LOOP_BYTES = 256 * 1024
_JSON = [(b"content-type", b"application/json")]
# The commit pool stops re-dialling a lost connection after this long (see _commit_files).
RECONNECT_GIVE_UP_S = 3.0
# ... and re-dials every quarter second until then. psycopg_pool waits 1 s, then 2 s, 4 s
# between dials (its AttemptWithBackoff's class attributes, the only knob it has; this
# process's only pool is the commit pool): a commit waiting for a connection through a
# switchover met the new primary up to ~1 s after it took writes. A dial to a standby or
# a stopped node fails in milliseconds (multi-host DATABASE_URL, read-write wanted).
AttemptWithBackoff.INITIAL_DELAY = 0.25
AttemptWithBackoff.DELAY_BACKOFF = 1.0

# ASGI's shapes (the spec's dicts, as uvicorn hands them over).
Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
# Any: the wrapped app (a2wsgi's) may type the spec's dicts more narrowly than we do.
App = Callable[[Any, Any, Any], Awaitable[None]]
Answer = tuple[int, endpoint.Answer]  # (HTTP status, JSON object)
_Result = TypeVar("_Result")
_Request = TypeVar("_Request")


def agent_calls(patterns: Sequence[object]) -> dict[str, endpoint.AgentCall]:
    """`/agent/v1/<name>` → its view (``endpoint``), from the agent API's URL patterns."""
    routes: dict[str, endpoint.AgentCall] = {}

    def walk(patterns: Sequence[object], prefix: str) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern) and isinstance(
                pattern.callback, endpoint.AgentCall
            ):
                routes[prefix + str(pattern.pattern)] = pattern.callback

    walk(patterns, PREFIX)
    return routes


def _conninfo() -> str:
    """The metadata store's connection string, as Django connects, with the agent API's
    bounds on every statement."""
    params = connections["default"].get_connection_params()
    options = " ".join(
        [
            params.get("options") or "",
            f"-c statement_timeout={settings.FLOE_AGENT_API_STATEMENT_TIMEOUT_MS}",
            f"-c lock_timeout={settings.FLOE_AGENT_API_LOCK_TIMEOUT_MS}",
        ]
    ).strip()
    kept = {k: v for k, v in params.items() if isinstance(v, str | int) and v != ""}
    kept.pop("client_encoding", None)
    kept["options"] = options
    return psycopg.conninfo.make_conninfo("", **kept)


def _after_call() -> None:
    """What Django does after a request, for this thread's connection: close it when it
    broke (a restarted database), erred, or outlived CONN_MAX_AGE — without arming the
    health check that would cost every next call a round trip."""
    for conn in connections.all(initialized_only=True):
        raw = conn.connection
        if raw is None:
            continue
        expired = conn.close_at is not None and time.monotonic() >= conn.close_at
        if expired or conn.errors_occurred or raw.closed or raw.broken:
            conn.close()


def _in_thread(call: Callable[..., _Result], *args: Any) -> _Result:
    """`call(*args)` in a thread of the agent API's pool, its Django connection looked
    after as a request's would be."""
    try:
        return call(*args)
    finally:
        _after_call()


def close_thread_connections(executor: ThreadPoolExecutor, threads: int) -> None:
    """Close the Django connections of each of an executor's `threads` threads: a task on
    each (they wait for one another, so no thread takes two)."""
    barrier = threading.Barrier(threads)

    def close() -> None:
        try:
            barrier.wait(timeout=5)
        except threading.BrokenBarrierError:
            pass
        connections.close_all()

    for future in [executor.submit(close) for _ in range(threads)]:
        future.result(timeout=10)


def _decode_commit(body: bytes, prefix: str) -> schemas.CommitRequest:
    request = schemas.decode(body, schemas.CommitRequest)
    schemas.validate_commit(request, cluster_prefix=prefix)
    return request


def _decode_commit_files(body: bytes, prefix: str) -> schemas.CommitFilesRequest:
    request = schemas.decode(body, schemas.CommitFilesRequest)
    schemas.validate_commit_files(request, cluster_prefix=prefix)
    return request


class AgentApi:
    """ASGI: ``/agent/v1/`` answered here (a JSON 404 for a call that does not exist),
    everything else by `app`."""

    def __init__(self, app: App, *, routes: Callable[[], dict[str, endpoint.AgentCall]]) -> None:
        self.app = app
        self._routes_of = routes
        self._routes: dict[str, endpoint.AgentCall] | None = None
        self._threads = ThreadPoolExecutor(
            max_workers=settings.FLOE_AGENT_API_THREADS, thread_name_prefix="agent-api"
        )
        self._pool: AsyncConnectionPool | None = None
        self._pool_check: asyncio.Task[None] | None = None
        self._listener: asyncio.Task[None] | None = None
        self._relay: asyncio.Task[None] | None = None
        self.pipeline = CommitPipeline(self._commit_files)
        self._stopping: asyncio.Event | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] == "http" and scope["path"].startswith(PREFIX):
            if self._routes is None:
                self._routes = self._routes_of()
            await self._serve(self._routes.get(scope["path"]), scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.settle()
                self._end_long_polls_on_exit()
                self._listener = asyncio.create_task(key_changes.listen(_conninfo()))
                self._relay = asyncio.create_task(feed_relay.RELAY.run(_conninfo()))
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def settle(self) -> None:
        """Load what the first calls would load, then take everything loaded so far out of
        the garbage collector's view (``gc.freeze``): a full collection then walks only
        what requests allocate, not Django's few hundred thousand objects — without it,
        every couple of seconds at 500 commits/s a collection stopped the loop for ~200 ms
        (measured: the p99 of 32 committers fell from ~230 ms to ~80)."""
        if self._routes is None:
            self._routes = self._routes_of()
        get_resolver().url_patterns  # noqa: B018 - imports every view
        gc.collect()
        gc.freeze()

    def _end_long_polls_on_exit(self) -> None:
        """On SIGTERM/SIGINT, end the long-polls at once (their agents poll the next
        server), then let the server's own handler stop it — uvicorn otherwise waits for
        every request in flight, a poll included, until its graceful timeout. Only in the
        main thread (a server in a thread, as the tests', has no signal handlers)."""
        stopping = self._stopping_event()
        if threading.current_thread() is not threading.main_thread():
            return
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous = signal.getsignal(sig)
            if not callable(previous):
                continue

            def handler(
                signum: int, frame: FrameType | None, previous: Callable[..., Any] = previous
            ) -> None:
                loop.call_soon_threadsafe(stopping.set)
                previous(signum, frame)

            signal.signal(sig, handler)

    def _stopping_event(self) -> asyncio.Event:
        if self._stopping is None:
            self._stopping = asyncio.Event()
        return self._stopping

    async def close(self) -> None:
        """Close the commit pool, the key-change listener and every thread's Django
        connection (the server stops)."""
        for task in (self._listener, self._relay):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._listener = self._relay = None
        if self._pool_check is not None:
            self._pool_check.cancel()
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
        loop = asyncio.get_running_loop()
        pools = [(self._threads, settings.FLOE_AGENT_API_THREADS)]
        console_threads = getattr(self.app, "executor", None)  # a2wsgi's, serving the console
        if isinstance(console_threads, ThreadPoolExecutor):
            pools.append((console_threads, settings.FLOE_WEB_THREADS))
        for executor, threads in pools:
            await loop.run_in_executor(None, close_thread_connections, executor, threads)

    async def _serve(
        self, view: endpoint.AgentCall | None, scope: Scope, receive: Receive, send: Send
    ) -> None:
        try:
            status, answer = await self._answer(view, scope, receive)
        except ConnectionError:  # the agent went away before its body arrived
            return
        body = endpoint.encode(answer)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [*_JSON, (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})

    async def _answer(
        self, view: endpoint.AgentCall | None, scope: Scope, receive: Receive
    ) -> Answer:
        if view is None:
            return 404, {"error": f"no agent API call at {scope['path']}"}
        if scope["method"] != "POST":
            return 405, {"error": f"{scope['method']} is not allowed: use POST"}
        authorization, content_length = "", None
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value.decode("latin-1")
            elif name == b"content-length":
                content_length = value.decode("latin-1")
        length = endpoint.body_length(content_length)
        if isinstance(length, tuple):
            return length
        body = await _read_body(receive)
        if body is None:
            return endpoint.TOO_LARGE
        loop = asyncio.get_running_loop()
        if view is views.commit:
            return await self._commit(authorization, body)
        if view is views.commit_files:
            return await self._commit_many(authorization, body)
        if view.on_loop is not None:
            return await self._on_loop(view, view.on_loop, authorization, body, receive)
        return await loop.run_in_executor(
            self._threads,
            _in_thread,
            endpoint.respond,
            view.handler,
            view.schema,
            authorization,
            body,
        )

    async def _cluster(self, name: str, authorization: str) -> VirtualCluster | Answer:
        """The agent key's cluster (from the key cache, else the database in a thread),
        or the error answer."""
        known, cluster = endpoint.cached_cluster(authorization)
        if not known:
            try:
                cluster = await asyncio.get_running_loop().run_in_executor(
                    self._threads, _in_thread, endpoint.cluster_for, authorization
                )
            except DatabaseError as exc:
                return endpoint.failure(name, exc)
        return endpoint.NO_KEY if cluster is None else cluster

    async def _on_loop(
        self,
        view: endpoint.AgentCall,
        on_loop: endpoint.OnLoop,
        authorization: str,
        body: bytes,
        receive: Receive,
    ) -> Answer:
        """A call served on the loop: `view.on_loop(cluster, request, gone)`, where `gone`
        is set when the agent hangs up or the server is stopping."""
        name = view.handler.__name__
        cluster = await self._cluster(name, authorization)
        if isinstance(cluster, tuple):
            return cluster
        gone = asyncio.Event()
        stopping = self._stopping_event()
        if stopping.is_set():
            gone.set()

        async def watch() -> None:
            hung_up = asyncio.ensure_future(_disconnected(receive))
            stop = asyncio.ensure_future(stopping.wait())
            try:
                await asyncio.wait({hung_up, stop}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                hung_up.cancel()
                stop.cancel()
            gone.set()

        watcher = asyncio.ensure_future(watch())
        started = time.perf_counter()
        try:
            answer = await on_loop(cluster, schemas.decode(body, view.schema), gone)
        except Exception as exc:  # noqa: BLE001 - every failure is a short JSON answer
            return endpoint.failure(name, exc)
        finally:
            watcher.cancel()
        endpoint.succeeded(name, started)
        return 200, answer

    async def _decoded(
        self, decode: Callable[[bytes, str], _Request], body: bytes, prefix: str
    ) -> _Request:
        """`decode(body, prefix)`, on the loop when the body is small, else on a thread."""
        if len(body) <= DECODE_ON_LOOP_BYTES:
            return decode(body, prefix)
        return await asyncio.get_running_loop().run_in_executor(self._threads, decode, body, prefix)

    async def _prepared(self, cluster_pk: int, file: schemas.CommitRequest) -> store.FileCommit:
        """One file's commit, its partitions' ids from the cache or the store (a thread)."""
        ids = store.cached_partition_ids(cluster_pk, file.batches)
        if ids is None:
            ids = await asyncio.get_running_loop().run_in_executor(
                self._threads, _in_thread, store.partition_ids, cluster_pk, file.batches
            )
        return store.file_commit_prepare(
            file_key=file.file_key, size=file.size, batches=file.batches, ids=ids
        )

    async def _commit(self, authorization: str, body: bytes) -> Answer:
        loop = asyncio.get_running_loop()
        cluster = await self._cluster("commit", authorization)
        if isinstance(cluster, tuple):
            return cluster
        started = time.perf_counter()
        try:
            request = await self._decoded(_decode_commit, body, cluster.public_id + "/")
            commit = await self._prepared(cluster.pk, request)
            row = await self.pipeline.commit(cluster.pk, commit)
            answer = {"batches": store.batch_answers(*row)}
        except Exception as exc:  # noqa: BLE001 - every failure is a short JSON answer
            if mirroring.refused_as_mirrored(exc):  # (only a commit statement raises it)
                return 200, {"batches": mirroring.mirrored_refusal(len(request.batches))}
            vanished = await loop.run_in_executor(
                self._threads, _in_thread, endpoint.cluster_vanished, exc, cluster.pk
            )
            return endpoint.NO_KEY if vanished else endpoint.failure("commit", exc)
        endpoint.succeeded("commit", started)
        return 200, answer

    async def _commit_many(self, authorization: str, body: bytes) -> Answer:
        """`commit-files`: the files join the cluster's commit pipeline together, in order
        (docs/AGENT_API.md); each is answered as `commit` answers it, except that the
        metadata store busy or out of reach fails the whole call (503), to be retried."""
        loop = asyncio.get_running_loop()
        cluster = await self._cluster("commit-files", authorization)
        if isinstance(cluster, tuple):
            return cluster
        started = time.perf_counter()
        try:
            request = await self._decoded(_decode_commit_files, body, cluster.public_id + "/")
            commits = [await self._prepared(cluster.pk, file) for file in request.files]
            outcomes = await self.pipeline.commit_many(cluster.pk, commits)
            for outcome in outcomes:
                if isinstance(outcome, Exception) and endpoint.retriable(outcome):
                    raise outcome
            files: list[Any] = []
            for file, outcome in zip(request.files, outcomes, strict=True):
                if not isinstance(outcome, BaseException):
                    files.append({"batches": store.batch_answers(*outcome)})
                elif mirroring.refused_as_mirrored(outcome):
                    files.append({"batches": mirroring.mirrored_refusal(len(file.batches))})
                elif isinstance(outcome, Exception):
                    status, answer = endpoint.failure("commit-files", outcome)
                    files.append({**answer, "status": status})
                else:
                    raise outcome
        except Exception as exc:  # noqa: BLE001 - every failure is a short JSON answer
            vanished = await loop.run_in_executor(
                self._threads, _in_thread, endpoint.cluster_vanished, exc, cluster.pk
            )
            return endpoint.NO_KEY if vanished else endpoint.failure("commit-files", exc)
        endpoint.succeeded("commit-files", started)
        return 200, {"files": files}

    async def _commit_files(
        self, cluster_id: int, commits: list[store.FileCommit]
    ) -> list[store.Row]:
        """One statement for `commits` (the pipeline's `execute`), bounded in time."""
        if self._pool is None:
            self._pool = AsyncConnectionPool(
                _conninfo(),
                min_size=1,
                max_size=settings.FLOE_AGENT_API_COMMIT_CONNECTIONS,
                kwargs={"autocommit": True},
                timeout=settings.FLOE_AGENT_API_LOCK_TIMEOUT_MS / 1000,
                name="floe-commits",
                open=False,
                # A failover breaks every connection at once. psycopg_pool re-dials a
                # lost one with a doubling back-off (1, 2, 4, 8 s…), which would leave
                # commits without a connection long after the new primary is up: give
                # each chain up after a few seconds instead, and let the next commit
                # that finds the pool empty dial at once (multi-host DATABASE_URL:
                # libpq finds the primary).
                reconnect_timeout=RECONNECT_GIVE_UP_S,
            )
            await self._pool.open(wait=False)
        bound = settings.FLOE_AGENT_API_STATEMENT_TIMEOUT_MS / 1000 + 2.0
        try:
            async with asyncio.timeout(bound), self._pool.connection() as conn:
                cursor = await conn.execute(
                    store.COMMIT_SQL, store.commit_params(cluster_id, commits)
                )
                return store.commit_rows(commits, await cursor.fetchall())
        except psycopg.OperationalError:
            # This connection died (the pool drops it); its idle siblings most likely
            # went with it (the database restarted or failed over): check them now, so
            # the agent's retry does not meet them one by one.
            if self._pool_check is None or self._pool_check.done():
                self._pool_check = asyncio.create_task(_check_idle(self._pool))
            raise


async def _check_idle(pool: AsyncConnectionPool) -> None:
    """Drop the pool's idle connections that no longer answer (it dials replacements)."""
    try:
        await pool.check()
    except Exception as exc:  # noqa: BLE001 - a closing pool; the next commit tells more
        log.info("commit pool check: %s", exc)


async def _disconnected(receive: Receive) -> None:
    """Returns when the client hangs up (the body was read already)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def _read_body(receive: Receive) -> bytes | None:
    """The request body, or None once it grows past the agent API's limit."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ConnectionError("the agent went away")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > endpoint.MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)
