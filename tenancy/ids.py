"""Opaque public ids and secrets.

Integer primary keys never leave the database: everything a user sees is a prefixed
random id (``org_…``, ``vci_…``) or a secret shown once and stored as a SHA-256 digest.
Secrets are 32 random bytes, so a fast digest is the right tool (no password stretching
needed), and the lookup is one indexed equality on the digest.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"


def public_id(prefix: str, length: int = 16) -> str:
    """A new opaque id such as ``vci_3k9x…``."""
    return prefix + "_" + "".join(secrets.choice(_ALPHABET) for _ in range(length))


def secret_digest(secret: str) -> str:
    """The stored form of a secret."""
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class NewSecret:
    """A freshly minted secret: ``plaintext`` is shown once, the rest is stored."""

    plaintext: str
    display_prefix: str
    digest: str


def new_secret(kind: str) -> NewSecret:
    """A secret like ``floe_api_<random>``; its first characters identify it in lists."""
    plaintext = f"floe_{kind}_{secrets.token_urlsafe(32)}"
    return NewSecret(plaintext, plaintext[: len(kind) + 10], secret_digest(plaintext))
