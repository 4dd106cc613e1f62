"""Short-lived copies of the cluster's SASL verifiers and ACLs, fetched from the control plane.

Credentials: looked up per username on a SASL handshake, kept `ttl_s` (a deleted user can
open new connections for at most that long; open connections stay, as in Kafka until
re-authentication). ACLs: the whole set, re-checked every `refresh_s` with the version
the control plane last answered (an unchanged set costs a tiny answer); this agent's own
CreateAcls/DeleteAcls invalidate it at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from agents.control_plane import ControlPlaneClient
from core.security.acl import AclBinding, Authorizer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Credential:
    """What an agent knows about a SASL user: verifiers, never the password."""

    username: str
    superuser: bool
    read_only: bool
    plain_hash: str
    scram: dict[str, dict[str, Any]] = field(default_factory=dict)  # mechanism → verifier


class CredentialCache:
    """Username → `Credential` (or None for an unknown user), single flight per name."""

    def __init__(
        self, client: ControlPlaneClient, *, ttl_s: float = 10.0, negative_ttl_s: float = 2.0
    ) -> None:
        self._client = client
        self._ttl = ttl_s
        self._negative_ttl = negative_ttl_s
        self._entries: dict[str, tuple[float, Credential | None]] = {}
        self._inflight: dict[str, asyncio.Future[Credential | None]] = {}

    def forget(self, username: str) -> None:
        """Ask the control plane again at the next login (this agent changed the user)."""
        self._entries.pop(username, None)

    async def get(self, username: str) -> Credential | None:
        entry = self._entries.get(username)
        if entry and entry[0] > time.monotonic():
            return entry[1]
        pending = self._inflight.get(username)
        if pending is not None:  # single flight: wait for the lookup already under way
            await asyncio.wait([pending])
            if pending.cancelled():  # its caller went away; look up ourselves
                return await self.get(username)
            return pending.result()
        future = asyncio.get_running_loop().create_future()
        self._inflight[username] = future
        try:
            answer = await self._client.call_with_retries("sasl/credential", {"username": username})
            credential = _credential(answer)
            ttl = self._ttl if credential else self._negative_ttl
            if len(self._entries) > 10_000:
                self._entries.clear()
            self._entries[username] = (time.monotonic() + ttl, credential)
            future.set_result(credential)
            return credential
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters re-raise it, or nobody does
            raise
        finally:
            del self._inflight[username]


def _credential(answer: dict[str, Any]) -> Credential | None:
    if not answer.get("found"):
        return None
    return Credential(
        username=str(answer["username"]),
        superuser=bool(answer.get("superuser")),
        read_only=bool(answer.get("read_only")),
        plain_hash=str(answer.get("plain") or ""),
        scram=dict(answer.get("scram") or {}),
    )


class AclCache:
    """The cluster's ACLs as an `Authorizer`, at most `refresh_s` old."""

    def __init__(self, client: ControlPlaneClient, *, refresh_s: float = 2.0) -> None:
        self._client = client
        self._refresh_s = refresh_s
        self._authorizer: Authorizer | None = None
        self._version: str | None = None
        self._checked_at = float("-inf")
        self._inflight: asyncio.Future[None] | None = None

    def invalidate(self) -> None:
        """Check again on the next use (after this agent changed ACLs)."""
        self._checked_at = float("-inf")

    async def authorizer(self) -> Authorizer:
        """The current authorizer; refreshes first when the last check is too old.

        If the control plane cannot be reached, the last known ACLs keep applying (an
        agent must not open up, nor lock everyone out, because of a blip); with none
        known yet the error propagates and the request fails.
        """
        if self._authorizer is not None and time.monotonic() - self._checked_at < self._refresh_s:
            return self._authorizer
        if self._inflight is None:
            self._inflight = asyncio.ensure_future(self._refresh())
        inflight = self._inflight
        try:
            await asyncio.shield(inflight)
        except Exception as exc:
            if self._authorizer is None:
                raise
            log.warning("refreshing ACLs failed, using the last known set: %s", exc)
        authorizer = self._authorizer
        if authorizer is None:  # a refresh sets one or raises
            raise RuntimeError("no ACLs known after refreshing them")
        return authorizer

    async def _refresh(self) -> None:
        try:
            answer = await self._client.call("acls/list", {"version": self._version}, timeout_s=5)
            if answer.get("acls") is not None or self._authorizer is None:
                bindings = [AclBinding.from_json(item) for item in answer.get("acls") or []]
                self._authorizer = Authorizer(bindings)
            self._version = answer.get("version")
        finally:
            self._inflight = None
            if self._authorizer is not None:
                # Also after a failure: keep the last set and try again in `refresh_s`.
                self._checked_at = time.monotonic()
