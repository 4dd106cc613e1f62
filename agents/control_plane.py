"""The agent's client for the control plane's metadata API (docs/AGENT_API.md).

One aiohttp session with keep-alive for the process: commits and fetch plans are the
hot path, and a fresh TCP (or TLS) connection per call would dominate their latency.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import aiohttp

from agents.control_plane_link import ControlPlaneLink
from agents.metrics import Histogram

log = logging.getLogger(__name__)

_LATENCY = Histogram(
    "floe_control_plane_call_seconds",
    "Latency of metadata API calls, by call name and outcome.",
    ("call", "outcome"),
)


# Every call is bounded: connecting, each read, and the whole call. A call that outlives
# its bound is abandoned (for a write: outcome unknown), never waited out — a hung worker,
# a dropped NAT entry or a frozen host would otherwise wedge whoever awaits it.
DEFAULT_TIMEOUT_S = 15.0
CONNECT_TIMEOUT_S = 5.0
# A pooled connection idle this long is closed, not reused: well under the web server's
# 15 s (`controlplane.webserver.KEEP_ALIVE_S`), so that no call is sent down a connection
# the server is closing as it arrives. With 30 s, a burst of calls on connections that had
# all gone idle together failed together 5 s later ("Can not write request body"), the
# tail feed's among them, which sent every tailing Fetch to the control plane.
POOL_IDLE_S = 4.0
# Calls the control plane holds open until something happens (or their wait ends): a
# long wait for their answer says nothing about the link, so it does not watch them.
LONG_POLLS = frozenset({"tail-feed", "browse/poll", "jobs/lease"})
# While the link is down, `/healthz` of the control plane is asked this often, each time
# bounded by this: the link comes back up within about that of the control plane.
PROBE_TIMEOUT_S = 1.0


def call_timeout(total_s: float) -> aiohttp.ClientTimeout:
    """Connect, read and total bounds for one call of at most `total_s` seconds."""
    connect = min(CONNECT_TIMEOUT_S, total_s)
    return aiohttp.ClientTimeout(
        total=total_s, connect=connect, sock_connect=connect, sock_read=total_s
    )


class ControlPlaneError(Exception):
    """A call failed. `retriable` says whether trying again may help."""

    retriable = True


class ControlPlaneUnavailable(ControlPlaneError):
    """Connection refused, timeout or HTTP 5xx: the outcome of the call is unknown for
    writes that timed out, and certainly nothing for a 5xx (docs/AGENT_API.md)."""

    def __init__(self, message: str, *, outcome_unknown: bool) -> None:
        super().__init__(message)
        self.outcome_unknown = outcome_unknown


class ControlPlaneRejected(ControlPlaneError):
    """HTTP 4xx other than 401: our request was wrong; retrying will not help."""

    retriable = False


class AgentKeyRejected(ControlPlaneRejected):
    """HTTP 401: the agent key is missing, unknown or revoked."""


class ControlPlaneClient:
    """`await client.call("commit", {...})` → the decoded JSON answer."""

    def __init__(
        self, base_url: str, agent_key: str, *, timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> None:
        self.root_url = base_url.rstrip("/")
        self.base_url = self.root_url + "/agent/v1/"
        self.agent_key = agent_key  # also the jobs' token for the cluster's Iceberg catalog
        self._headers = {
            "Authorization": f"Bearer {agent_key}",
            "Content-Type": "application/json",
        }
        self._timeout = call_timeout(timeout_s)
        self._session: aiohttp.ClientSession | None = None
        self.link = ControlPlaneLink()
        self.link.set_probe(self.probe)

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # limit: concurrent calls beyond this queue in aiohttp rather than opening
            # ever more connections to a control plane that is already slow.
            connector = aiohttp.TCPConnector(limit=64, keepalive_timeout=POOL_IDLE_S)
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=self._timeout, headers=self._headers
            )
        return self._session

    async def close(self) -> None:
        """Close the keep-alive connections."""
        await self.link.close()
        if self._session is not None and not self._session.closed:
            await self._session.close()

    async def call(
        self, name: str, body: dict[str, Any], *, timeout_s: float | None = None
    ) -> dict[str, Any]:
        """POST `body` to `/agent/v1/<name>` and return the decoded answer (every agent API
        endpoint answers a JSON object; anything else is a bad answer).

        Bounded by `timeout_s` (the client's default when not given). Raises
        `AgentKeyRejected` (401), `ControlPlaneRejected` (other 4xx) or
        `ControlPlaneUnavailable` (transport errors, timeouts, 5xx).
        """
        session = self._get_session()
        data = json.dumps(body, separators=(",", ":"))
        started = time.perf_counter()
        outcome = "error"
        # Never None: aiohttp reads timeout=None as "no timeout at all".
        timeout = call_timeout(timeout_s) if timeout_s else self._timeout
        watched = name not in LONG_POLLS and (timeout.total or 0) <= DEFAULT_TIMEOUT_S
        token = self.link.call_started() if watched else None
        try:
            async with session.post(self.base_url + name, data=data, timeout=timeout) as resp:
                payload = await resp.read()
                if resp.status >= 500:
                    self.link.record_failure()
                else:
                    self.link.record_answer()
                if resp.status == 200:
                    outcome = "ok"
                    answer = json.loads(payload)
                    if not isinstance(answer, dict):
                        raise ValueError(f"a JSON {type(answer).__name__}, not an object")
                    return answer
                outcome = str(resp.status)
                message = _error_text(payload) or resp.reason or ""
                if resp.status == 401:
                    raise AgentKeyRejected(f"control plane rejected the agent key: {message}")
                if 400 <= resp.status < 500:
                    raise ControlPlaneRejected(f"{name}: HTTP {resp.status}: {message}")
                raise ControlPlaneUnavailable(
                    f"{name}: HTTP {resp.status}: {message}", outcome_unknown=False
                )
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
            self.link.record_failure()
            # Refused before sending → nothing happened; dropped mid-call → unknown.
            unknown = not isinstance(
                exc, (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)
            )
            raise ControlPlaneUnavailable(
                f"{name}: {type(exc).__name__}: {exc}", outcome_unknown=unknown
            ) from exc
        except TimeoutError as exc:
            self.link.record_failure()
            outcome = "timeout"
            raise ControlPlaneUnavailable(f"{name}: timed out", outcome_unknown=True) from exc
        except ValueError as exc:  # undecodable JSON in a 200
            raise ControlPlaneUnavailable(
                f"{name}: bad answer: {exc}", outcome_unknown=True
            ) from exc
        finally:
            if token is not None:
                self.link.call_ended(token)
            _LATENCY.observe(time.perf_counter() - started, name, outcome)

    async def probe(self) -> bool:
        """Whether the control plane answers now: its `/healthz` (healthy only while the
        metadata store takes writes) on a fresh connection — the pooled ones may be the
        frozen ones — within `PROBE_TIMEOUT_S`."""
        timeout = call_timeout(PROBE_TIMEOUT_S)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(self.root_url + "/healthz") as resp,
        ):
            await resp.read()
            return resp.status < 500

    async def call_with_retries(
        self,
        name: str,
        body: dict[str, Any],
        *,
        attempts: int = 3,
        first_delay_s: float = 0.05,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """`call`, retried with backoff on `ControlPlaneUnavailable` (idempotent calls only)."""
        delay = first_delay_s
        for attempt in range(attempts):
            try:
                return await self.call(name, body, timeout_s=timeout_s)
            except ControlPlaneUnavailable as exc:
                if attempt == attempts - 1:
                    raise
                log.warning("%s failed (%s); retrying in %.2fs", name, exc, delay)
                await asyncio.sleep(delay)
                delay *= 4
        raise AssertionError("unreachable")


def _error_text(payload: bytes) -> str:
    try:
        decoded = json.loads(payload)
    except ValueError:
        return payload[:200].decode("utf-8", "replace")
    if isinstance(decoded, dict) and "error" in decoded:
        return str(decoded["error"])
    return str(decoded)[:200]
