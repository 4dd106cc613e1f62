"""Secrets the control plane must read back (a migration's source password): sealed with
Fernet (AES-128-CBC + HMAC-SHA256, `cryptography`) under a key derived from SECRET_KEY
by HKDF, so a database dump alone does not reveal them. Rotating SECRET_KEY makes the
sealed values unreadable (`SealBroken`): they are then entered again.

Secrets a client presents to us (API keys, agent keys, SASL passwords) are hashed, never
sealed: we only compare them."""

from __future__ import annotations

import base64

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings


class SealBroken(Exception):
    """A sealed value that this SECRET_KEY cannot open (rotated, or tampered with)."""


def _fernet() -> Fernet:
    key = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=None, info=b"floe sealed secrets v1"
    ).derive(settings.SECRET_KEY.encode())
    return Fernet(base64.urlsafe_b64encode(key))


def secret_seal(plain: str) -> str:
    """`plain` sealed, as ASCII text to store."""
    return _fernet().encrypt(plain.encode()).decode("ascii")


def secret_open(sealed: str) -> str:
    """The secret `secret_seal` sealed; raises `SealBroken`."""
    try:
        return _fernet().decrypt(sealed.encode("ascii")).decode()
    except (InvalidToken, ValueError) as exc:
        raise SealBroken("the sealed secret cannot be opened with this SECRET_KEY") from exc
