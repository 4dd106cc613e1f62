"""SaslHandshake (v0–1) and SaslAuthenticate (v0–2): PLAIN, SCRAM-SHA-256, SCRAM-SHA-512.

KIP-152 flow, as librdkafka, kafka-python, aiokafka and the Java client speak it:
ApiVersions → SaslHandshake(mechanism) → SaslAuthenticate(token)… until done. The
legacy raw-token exchange after a v0 handshake (pre-KIP-152) is not supported: such a
client's next bytes are not a Kafka request and its connection is closed.

Verifiers come from the control plane (`sasl/credential`, cached briefly). PLAIN is
checked here against the stored PBKDF2 hash, off the event loop; SCRAM needs only HMACs.
A failed authentication is answered with SASL_AUTHENTICATION_FAILED and a message, then
the connection is closed (`AnswerThenClose`), as Kafka does.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agents.context import AgentContext
from agents.metrics import Counter
from agents.security.caches import Credential
from agents.security.session import Session, current_session
from core.kafka import RequestHeader
from core.kafka.errors import ErrorCode
from core.security.scram import MECHANISMS, ScramError, ScramServer, parse_plain, plain_verify

ENABLED_MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
_LOGINS = Counter(
    "floe_sasl_authentications_total",
    "SASL logins, by mechanism and outcome.",
    ("mechanism", "outcome"),
)


class AnswerThenClose(Exception):
    """Send `response` to this request, then close the connection."""

    def __init__(self, message: str, response: dict[str, Any]) -> None:
        super().__init__(message)
        self.response = response


async def handle_sasl_handshake(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka SaslHandshake: choose a mechanism; an unknown one ends the connection."""
    session = current_session()
    answer = {"error_code": 0, "mechanisms": ENABLED_MECHANISMS}
    if session.authenticated or session.mechanism is not None:
        # Re-authentication (KIP-368) is not offered: we answer session_lifetime_ms 0.
        raise AnswerThenClose(
            "SaslHandshake after a SASL exchange began",
            {**answer, "error_code": ErrorCode.ILLEGAL_SASL_STATE},
        )
    mechanism = body["mechanism"]
    if mechanism not in ENABLED_MECHANISMS:
        raise AnswerThenClose(
            f"unsupported SASL mechanism {mechanism!r}",
            {**answer, "error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM},
        )
    session.begin_sasl(mechanism, _ScramExchange(mechanism) if mechanism in MECHANISMS else None)
    return answer


def _authenticate_answer(
    error: int = 0, message: str | None = None, token: bytes = b""
) -> dict[str, Any]:
    return {
        "error_code": error,
        "error_message": message,
        "auth_bytes": token,
        "session_lifetime_ms": 0,
    }


def _failed(session: Session, reason: str) -> AnswerThenClose:
    # The client sees Kafka's own wording; the log says why.
    message = (
        "Authentication failed during authentication due to invalid credentials with "
        f"SASL mechanism {session.mechanism}"
    )
    return AnswerThenClose(
        f"SASL authentication failed for {session.peer_host}: {reason}",
        _authenticate_answer(ErrorCode.SASL_AUTHENTICATION_FAILED, message),
    )


async def handle_sasl_authenticate(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka SaslAuthenticate: one step of the mechanism chosen by the handshake."""
    session = current_session()
    async with session.sasl_lock:
        if session.mechanism is None or session.authenticated:
            raise AnswerThenClose(
                "SaslAuthenticate outside a SASL exchange",
                _authenticate_answer(
                    ErrorCode.ILLEGAL_SASL_STATE,
                    "SaslAuthenticate must follow a SaslHandshake, once",
                ),
            )
        token = bytes(body["auth_bytes"] or b"")
        try:
            if session.mechanism == "PLAIN":
                reply = await _plain(session, token)
            else:
                reply = await _scram(session, token)
        except ScramError as exc:
            _LOGINS.inc(1, session.mechanism, "failed")
            raise _failed(session, str(exc)) from None
        if session.authenticated:
            _LOGINS.inc(1, session.mechanism, "ok")
        return _authenticate_answer(token=reply)


async def _lookup(session: Session, username: str) -> Credential | None:
    credentials = session.security.credentials
    return await credentials.get(username) if credentials is not None else None


async def _plain(session: Session, token: bytes) -> bytes:
    username, password = parse_plain(token)
    credential = await _lookup(session, username)
    if credential is None:
        raise ScramError(f"unknown user {username!r}")
    loop = asyncio.get_running_loop()
    if not await loop.run_in_executor(None, plain_verify, password, credential.plain_hash):
        raise ScramError(f"wrong password for {username!r}")
    session.login(credential)
    return b""


class _ScramExchange:
    """SCRAM's state between its two SaslAuthenticate steps."""

    def __init__(self, mechanism: str) -> None:
        self.server = ScramServer(mechanism)
        self.credential: Credential | None = None


async def _scram(session: Session, token: bytes) -> bytes:
    exchange: _ScramExchange = session.exchange
    server = exchange.server
    if not server.username:  # client-first → server-first
        username = server.client_first(token)
        exchange.credential = await _lookup(session, username)
        verifier = exchange.credential.scram.get(server.mechanism) if exchange.credential else None
        return server.server_first(verifier)
    reply = server.client_final(token)  # client-final → server-final, or ScramError
    if exchange.credential is None:  # unreachable: a decoy challenge never verifies
        raise ScramError(f"unknown user {server.username!r}")
    session.login(exchange.credential)
    return reply
