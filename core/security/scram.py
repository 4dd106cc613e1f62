"""Password checks without passwords: SCRAM (RFC 5802, RFC 7677) and PLAIN (RFC 4616).

The control plane turns a password into verifiers once (`scram_credential`, `plain_hash`)
and stores only those. Agents fetch the verifiers and run the server side of the
exchange (`ScramServer`, `plain_verify`); a password never leaves the client and the
control plane's database cannot be replayed as one.

Passwords are used as their UTF-8 bytes, without SASLprep, as Kafka's ScramFormatter does,
so a credential works with every Kafka client. Standard library only: the control plane
imports this module.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
from typing import Any

# Kafka accepts 4096..16384 iterations for SCRAM credentials (ScramMechanism).
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 8192
SALT_BYTES = 24
MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# PLAIN is checked against its own PBKDF2 hash, no weaker than the SCRAM verifiers.
PLAIN_ALGORITHM = "pbkdf2_sha256"
PLAIN_ITERATIONS = DEFAULT_ITERATIONS
# Bound what we parse from an unauthenticated peer.
MAX_MESSAGE_BYTES = 4096

_NONCE = re.compile(r"[\x21-\x2b\x2d-\x7e]+")  # printable ASCII except ","
_PROCESS_SECRET = secrets.token_bytes(32)  # for the decoy salts of unknown users


class ScramError(Exception):
    """The exchange failed; the message is safe to log (it never contains secrets)."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError) as exc:
        raise ScramError(f"bad base64: {exc}") from None


def _hmac(hash_name: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hash_name).digest()


def scram_credential(
    password: str, mechanism: str, *, iterations: int = DEFAULT_ITERATIONS, salt: bytes = b""
) -> dict[str, object]:
    """The SCRAM verifier of `password`: {salt, iterations, stored_key, server_key} (base64).

    RFC 5802 section 3: SaltedPassword = Hi(password, salt, i); StoredKey = H(HMAC(SaltedPassword,
    "Client Key")); ServerKey = HMAC(SaltedPassword, "Server Key").
    """
    hash_name = MECHANISMS[mechanism]
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be {MIN_ITERATIONS}..{MAX_ITERATIONS}")
    salt = salt or os.urandom(SALT_BYTES)
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode("utf-8"), salt, iterations)
    return scram_verifier(mechanism, salted, salt, iterations)


def scram_verifier(
    mechanism: str, salted_password: bytes, salt: bytes, iterations: int
) -> dict[str, object]:
    """The verifier from a SaltedPassword a client computed itself (KIP-554's
    AlterUserScramCredentials sends that, never the password)."""
    hash_name = MECHANISMS[mechanism]
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be {MIN_ITERATIONS}..{MAX_ITERATIONS}")
    if not salt or len(salted_password) != hashlib.new(hash_name).digest_size:
        raise ValueError(
            f"a {mechanism} salted password has {hashlib.new(hash_name).digest_size} bytes and a salt"
        )
    salted = salted_password
    client_key = _hmac(hash_name, salted, b"Client Key")
    return {
        "salt": _b64(salt),
        "iterations": iterations,
        "stored_key": _b64(hashlib.new(hash_name, client_key).digest()),
        "server_key": _b64(_hmac(hash_name, salted, b"Server Key")),
    }


def plain_hash(password: str, *, iterations: int = PLAIN_ITERATIONS, salt: bytes = b"") -> str:
    """`pbkdf2_sha256$<iterations>$<salt>$<hash>` (base64 parts), the stored form for PLAIN."""
    salt = salt or os.urandom(SALT_BYTES)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations)
    return f"{PLAIN_ALGORITHM}${iterations}${_b64(salt)}${_b64(digest)}"


def plain_verify(password: str, encoded: str) -> bool:
    """Whether `password` matches a `plain_hash` (constant-time; False for a bad hash)."""
    try:
        algorithm, iterations_text, salt_text, digest_text = encoded.split("$")
        iterations = int(iterations_text)
        salt, expected = _unb64(salt_text), _unb64(digest_text)
    except (ValueError, ScramError):
        return False
    if algorithm != PLAIN_ALGORITHM or not 1 <= iterations <= 10 * MAX_ITERATIONS:
        return False
    digest = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations)
    return hmac.compare_digest(digest, expected)


def parse_plain(token: bytes) -> tuple[str, str]:
    """RFC 4616 `[authzid] NUL authcid NUL passwd` → (username, password)."""
    if len(token) > MAX_MESSAGE_BYTES:
        raise ScramError("PLAIN message too long")
    parts = token.split(b"\0")
    if len(parts) != 3:
        raise ScramError("PLAIN message must be authzid NUL authcid NUL password")
    try:
        authzid, username, password = (p.decode("utf-8") for p in parts)
    except UnicodeDecodeError:
        raise ScramError("PLAIN message is not UTF-8") from None
    if not username or not password:
        raise ScramError("PLAIN message without a username or password")
    if authzid and authzid != username:  # Kafka: no impersonation
        raise ScramError("the authorization id must be empty or the username")
    return username, password


def _saslname(text: str) -> str:
    """RFC 5802 section 5.1: ',' and '=' arrive as '=2C' and '=3D'."""
    if "=" not in text:
        return text
    out, pos = [], 0
    while pos < len(text):
        char = text[pos]
        if char == "=":
            escape = text[pos : pos + 3]
            if escape not in ("=2C", "=3D"):
                raise ScramError("bad escape in the username")
            out.append("," if escape == "=2C" else "=")
            pos += 3
        else:
            out.append(char)
            pos += 1
    return "".join(out)


def _attributes(parts: list[str]) -> list[tuple[str, str]]:
    pairs = []
    for part in parts:
        if len(part) < 2 or part[1] != "=":
            raise ScramError(f"bad attribute {part[:20]!r}")
        pairs.append((part[0], part[2:]))
    return pairs


class ScramServer:
    """The server side of one SCRAM exchange.

    ``username = server.client_first(message)`` → look up the verifier →
    ``server.server_first(verifier or None)`` → ``server.client_final(message)`` gives the
    server-final message or raises `ScramError`. An unknown user (verifier None) gets a
    decoy challenge and fails only at the end, as if the password were wrong.
    """

    def __init__(self, mechanism: str) -> None:
        self.mechanism = mechanism
        self._hash = MECHANISMS[mechanism]
        self.username = ""
        self._gs2_header = ""
        self._client_first_bare = ""
        self._client_nonce = ""
        self._nonce = ""
        self._server_first = ""
        self._stored_key = b""
        self._server_key = b""

    def client_first(self, message: bytes) -> str:
        """Parse the client-first message; returns the username."""
        text = _text(message)
        # gs2-header: cbind-flag "," [authzid] ","
        flag, _, rest = text.partition(",")
        authzid, _, bare = rest.partition(",")
        if flag.startswith("p="):
            raise ScramError("channel binding is not supported")
        if flag not in ("n", "y"):
            raise ScramError("bad channel-binding flag")
        if authzid and not authzid.startswith("a="):
            raise ScramError("bad authorization id")
        self._gs2_header = f"{flag},{authzid},"
        parts = bare.split(",")
        attributes = _attributes(parts[:2])
        if len(attributes) < 2 or attributes[0][0] != "n" or attributes[1][0] != "r":
            raise ScramError("client-first message must start with n=<user>,r=<nonce>")
        username = _saslname(attributes[0][1])
        nonce = attributes[1][1]
        if not username:
            raise ScramError("empty username")
        if authzid and _saslname(authzid[2:]) != username:  # Kafka: no impersonation
            raise ScramError("the authorization id must be the username")
        if not _NONCE.fullmatch(nonce):
            raise ScramError("bad client nonce")
        for extension in parts[2:]:
            # KIP-84 extensions: Kafka clients send only `tokenauth=true`, for delegation
            # tokens, which Floe does not issue.
            if extension.partition("=")[0] == "tokenauth":
                raise ScramError("delegation tokens are not supported")
        self.username = username
        self._client_first_bare = bare
        self._client_nonce = nonce
        self._nonce = nonce + secrets.token_urlsafe(24)
        return username

    def server_first(self, verifier: dict[str, Any] | None) -> bytes:
        """The challenge: combined nonce, salt and iterations of the user's verifier."""
        if verifier is None:
            decoy = _hmac("sha256", _PROCESS_SECRET, self.username.encode("utf-8"))
            salt, iterations = decoy[:SALT_BYTES], DEFAULT_ITERATIONS
            self._stored_key = self._server_key = b""
        else:
            salt = _unb64(str(verifier["salt"]))
            iterations = int(verifier["iterations"])
            self._stored_key = _unb64(str(verifier["stored_key"]))
            self._server_key = _unb64(str(verifier["server_key"]))
        self._server_first = f"r={self._nonce},s={_b64(salt)},i={iterations}"
        return self._server_first.encode("ascii")

    def client_final(self, message: bytes) -> bytes:
        """Check the client's proof; returns the server-final message `v=<signature>`."""
        text = _text(message)
        without_proof, separator, proof_text = text.rpartition(",p=")
        if not separator:
            raise ScramError("client-final message without a proof")
        attributes = _attributes(without_proof.split(","))
        if len(attributes) < 2 or attributes[0][0] != "c" or attributes[1][0] != "r":
            raise ScramError("client-final message must start with c=<binding>,r=<nonce>")
        if _unb64(attributes[0][1]) != self._gs2_header.encode("utf-8"):
            raise ScramError("channel binding does not match the gs2 header")
        # RFC 5802 §5.1: the client echoes the server's nonce. librdkafka before 2.6.1
        # (librdkafka#4895; kcat 1.7 ships 2.0) echoes its own nonce followed by the
        # server's, which Kafka 3.8.1–3.9 accept too: accepted in exactly that form, still
        # bound to this exchange's server nonce (and covered by the proof).
        echoed = attributes[1][1].encode()
        if not (
            hmac.compare_digest(echoed, self._nonce.encode())
            or hmac.compare_digest(echoed, (self._client_nonce + self._nonce).encode())
        ):
            raise ScramError("nonce mismatch")
        proof = _unb64(proof_text)
        auth_message = ",".join((self._client_first_bare, self._server_first, without_proof))
        auth_bytes = auth_message.encode("utf-8")
        if not self._stored_key or len(proof) != len(self._stored_key):
            raise ScramError("invalid credentials")
        signature = _hmac(self._hash, self._stored_key, auth_bytes)
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), self._stored_key):
            raise ScramError("invalid credentials")
        server_signature = _hmac(self._hash, self._server_key, auth_bytes)
        return f"v={_b64(server_signature)}".encode("ascii")


def _text(message: bytes) -> str:
    if len(message) > MAX_MESSAGE_BYTES:
        raise ScramError("SCRAM message too long")
    try:
        return bytes(message).decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError("SCRAM message is not UTF-8") from None
