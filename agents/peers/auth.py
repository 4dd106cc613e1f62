"""Signing and checking peer calls: the scheme lives in `core.security.peer_auth` (sans-IO,
as the rest of `core`)."""

from core.security.peer_auth import MAX_SKEW_MS, SCHEME, PeerAuthError, sign, verify

__all__ = ["MAX_SKEW_MS", "SCHEME", "PeerAuthError", "sign", "verify"]
