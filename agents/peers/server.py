"""The peer channel's endpoints on the agent's HTTP port.

`GET /peer/v1/chunk?key=&index=&chunk=`: one chunk of a segment file from this agent's
cache, loaded from the bucket if needed (never from another peer, so requests cannot
loop between agents whose views of the ring differ). `POST /peer/v1/relay`: a group
request for a group this agent coordinates (`agents.groups.relay`). `POST
/peer/v1/hello`: an agent that is starting asks this one to heartbeat now, so that it
lists the newcomer before the newcomer serves clients (`AgentRuntime.answer_hello`;
its body is empty, its answer `{"known": bool}`). Only agents call
these: the control plane never connects to an agent (the console's message browser goes
over the channel the agent opens, `agents.browse_channel`).

Everything a peer sends is checked: the signature (`auth`), the object key (this
cluster's, a valid key), the chunk index and size (ours), the relay body (by the relay).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from agents.peers import auth
from core.storage import ObjectNotFound
from core.storage.base import check_key

log = logging.getLogger(__name__)

MAX_RELAY_BODY_BYTES = 16 * 1024 * 1024
MAX_CHUNK_INDEX = 2**31 - 1


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def add_peer_routes(
    app: web.Application,
    *,
    secret: Callable[[], str | None],
    cluster_prefix: str,
    chunk_bytes: int,
    serve_chunk: Callable[[str, int], Awaitable[bytes | memoryview]],
    relay: Callable[[bytes, str], Awaitable[bytes]] | None = None,
    hello: Callable[[str], Awaitable[dict[str, Any]]] | None = None,
) -> None:
    """Mount the peer endpoints on `app`."""

    def caller(request: web.Request, body: bytes = b"") -> str:
        return auth.verify(
            secret(),
            request.headers.get("Authorization", ""),
            request.method,
            request.rel_url.raw_path_qs,
            body,
        )

    async def chunk(request: web.Request) -> web.StreamResponse:
        try:
            caller(request)
        except auth.PeerAuthError as exc:
            return _error(401, str(exc))
        key = request.query.get("key", "")
        try:
            check_key(key)
            index = int(request.query.get("index", ""))
            size = int(request.query.get("chunk", ""))
        except ValueError as exc:
            return _error(400, f"bad chunk request: {exc}")
        if not key.startswith(cluster_prefix):
            return _error(400, f"key must be under {cluster_prefix!r}")
        if not 0 <= index <= MAX_CHUNK_INDEX:
            return _error(400, f"index out of range: {index}")
        if size != chunk_bytes:
            return _error(409, f"this agent caches {chunk_bytes}-byte chunks, not {size}")
        try:
            data = await serve_chunk(key, index)
        except ObjectNotFound as exc:
            return _error(404, str(exc))
        except Exception as exc:  # the bucket failed: the asker reads it itself
            log.warning("serving chunk %s#%d to a peer failed: %s", key, index, exc)
            return _error(502, f"{type(exc).__name__}: {exc}")
        return web.Response(body=bytes(data), content_type="application/octet-stream")

    async def relayed(request: web.Request) -> web.StreamResponse:
        if relay is None:
            return _error(404, "this agent does not relay")
        if (request.content_length or 0) > MAX_RELAY_BODY_BYTES:
            return _error(413, f"the body is larger than {MAX_RELAY_BODY_BYTES} bytes")
        body = await request.content.read(MAX_RELAY_BODY_BYTES + 1)
        if len(body) > MAX_RELAY_BODY_BYTES:
            return _error(413, f"the body is larger than {MAX_RELAY_BODY_BYTES} bytes")
        try:
            agent_id = caller(request, body)
        except auth.PeerAuthError as exc:
            return _error(401, str(exc))
        try:
            answer = await relay(body, agent_id)
        except ValueError as exc:
            return _error(400, f"bad relay request: {exc}")
        return web.Response(body=answer, content_type="application/msgpack")

    async def greeted(request: web.Request) -> web.StreamResponse:
        if hello is None:
            return _error(404, "this agent takes no hello")
        if request.content_length:
            return _error(400, "a hello has no body")
        try:
            agent_id = caller(request)
        except auth.PeerAuthError as exc:
            return _error(401, str(exc))
        return web.json_response(await hello(agent_id))

    app.router.add_get("/peer/v1/chunk", chunk)
    app.router.add_post("/peer/v1/hello", greeted)
    app.router.add_post("/peer/v1/relay", relayed)
