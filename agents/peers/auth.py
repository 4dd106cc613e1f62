"""Signing and checking peer calls: the scheme lives in `core.security.peer_auth`, since
the control plane signs its calls to agents (the message browser) the same way."""

from core.security.peer_auth import MAX_SKEW_MS, SCHEME, PeerAuthError, sign, verify

__all__ = ["MAX_SKEW_MS", "SCHEME", "PeerAuthError", "sign", "verify"]
