"""Signing and checking calls to an agent's peer channel with the cluster's peer secret.

The control plane hands each agent of a cluster the same secret in the register and
heartbeat answers. A call carries `Authorization: Floe-Peer <agent id>:<unix ms>:<mac>`,
the mac an HMAC-SHA256 over the sender, the time, the method, the path with its query
and the body's SHA-256; so the secret never travels, a captured header is good for
one call for at most `MAX_SKEW_MS`, and it cannot be reused for another path or body.
Only agents call each other's peer channel: the control plane never connects to an
agent.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time

SCHEME = "Floe-Peer"
MAX_SKEW_MS = 30_000
_HEADER = re.compile(rf"{SCHEME} ([A-Za-z0-9._-]{{1,64}}):(\d{{1,15}}):([0-9a-f]{{64}})")


class PeerAuthError(Exception):
    """The call is not signed by an agent of this cluster; the message says why."""


def _mac(secret: str, agent_id: str, stamp: int, method: str, target: str, body: bytes) -> str:
    message = "\n".join(
        (agent_id, str(stamp), method.upper(), target, hashlib.sha256(body).hexdigest())
    )
    return hmac.new(secret.encode(), message.encode(), hashlib.sha256).hexdigest()


def sign(secret: str, agent_id: str, method: str, target: str, body: bytes = b"") -> str:
    """The Authorization header value for a call to `target` (path and query)."""
    stamp = int(time.time() * 1000)
    return f"{SCHEME} {agent_id}:{stamp}:{_mac(secret, agent_id, stamp, method, target, body)}"


def verify(secret: str | None, header: str, method: str, target: str, body: bytes = b"") -> str:
    """The calling agent's id, or `PeerAuthError`."""
    if not secret:
        raise PeerAuthError("this agent has no peer secret yet")
    found = _HEADER.fullmatch(header.strip())
    if found is None:
        raise PeerAuthError(f"missing or malformed {SCHEME} authorization")
    agent_id, stamp, mac = found.group(1), int(found.group(2)), found.group(3)
    if abs(time.time() * 1000 - stamp) > MAX_SKEW_MS:
        raise PeerAuthError("the signature is too old (or the clocks disagree)")
    if not hmac.compare_digest(mac, _mac(secret, agent_id, stamp, method, target, body)):
        raise PeerAuthError("bad signature: not an agent of this cluster")
    return agent_id
