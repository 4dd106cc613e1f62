"""Calls to other agents of this cluster over their HTTP port, signed (`auth`) and bounded
in time. A failure is a `PeerError`: callers fall back (to the bucket, or a retriable
Kafka error) and never fail a client's request because of a peer."""

from __future__ import annotations

import json
from collections.abc import Callable
from urllib.parse import urlencode

import aiohttp
from yarl import URL

from agents.groups.ring import Peer
from agents.peers import auth

CONNECT_TIMEOUT_S = 0.5


class PeerError(Exception):
    """A peer call failed; `reason` is a short label for metrics."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class PeerClient:
    """One keep-alive session to the zone's agents for the life of the process."""

    def __init__(self, agent_id: str, secret: Callable[[], str | None]) -> None:
        self.agent_id = agent_id
        self._secret = secret
        self._session: aiohttp.ClientSession | None = None

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=256, limit_per_host=32, keepalive_timeout=30)
            self._session = aiohttp.ClientSession(connector=connector)
        return self._session

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()

    async def _call(
        self, peer: Peer, method: str, target: str, body: bytes, timeout_s: float
    ) -> bytes:
        secret = self._secret()
        if not secret:
            raise PeerError("no_secret", "no peer secret from the control plane yet")
        if not peer.http_port:
            raise PeerError("no_port", f"agent {peer.agent_id} has no HTTP port")
        headers = {"Authorization": auth.sign(secret, self.agent_id, method, target, body)}
        # encoded=True: send the target byte for byte as signed (no requoting).
        url = URL(f"http://{peer.host}:{peer.http_port}{target}", encoded=True)
        timeout = aiohttp.ClientTimeout(total=timeout_s, connect=min(CONNECT_TIMEOUT_S, timeout_s))
        try:
            async with self._get_session().request(
                method, url, data=body or None, headers=headers, timeout=timeout
            ) as response:
                payload = await response.read()
                if response.status != 200:
                    text = payload[:200].decode("utf-8", "replace")
                    raise PeerError(f"http_{response.status}", f"{peer.agent_id}: {text}")
                return payload
        except TimeoutError as exc:  # first: aiohttp's timeouts are ClientErrors too
            raise PeerError("timeout", f"{peer.agent_id}: no answer in {timeout_s}s") from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise PeerError("unreachable", f"{peer.agent_id}: {type(exc).__name__}") from exc

    async def fetch_chunk(
        self, peer: Peer, key: str, index: int, chunk_bytes: int, timeout_s: float
    ) -> bytes:
        """Chunk `index` of object `key` from the peer's cache (it loads it if needed)."""
        query = urlencode({"key": key, "index": index, "chunk": chunk_bytes})
        return await self._call(peer, "GET", f"/peer/v1/chunk?{query}", b"", timeout_s)

    async def hello(self, peer: Peer, timeout_s: float) -> bool:
        """Tell a peer this agent is starting (it heartbeats now); whether it now lists
        this agent among its live agents."""
        answer = await self._call(peer, "POST", "/peer/v1/hello", b"", timeout_s)
        try:
            return json.loads(answer).get("known") is True
        except (ValueError, AttributeError) as exc:
            raise PeerError("bad_answer", f"{peer.agent_id}: {exc}") from exc

    async def relay(self, peer: Peer, payload: bytes, timeout_s: float) -> bytes:
        """A group request (msgpack) handled by the peer; its answer (msgpack)."""
        return await self._call(peer, "POST", "/peer/v1/relay", payload, timeout_s)
