"""Security state: agent-wide (`Security`) and per connection (`Session`).

The listener opens one `Session` per connection; `Dispatcher.dispatch` makes it the
`CURRENT_SESSION` of the request's task, so the SASL handlers, the ACL check and the ACL
handlers find who is asking without every handler signature carrying it.

Before SASL authentication (when it is required) a connection may send only ApiVersions,
SaslHandshake and SaslAuthenticate, in frames of at most 512 KiB (Kafka's
`sasl.server.max.receive.size`); anything else closes it, as Kafka does.
"""

from __future__ import annotations

import asyncio
import logging
from contextvars import ContextVar
from typing import Any

from agents.control_plane import ControlPlaneClient
from agents.security.caches import AclCache, Credential, CredentialCache
from agents.security.tls import principal_from_certificate, server_context
from core.kafka import ApiKey, FrameDecoder

log = logging.getLogger(__name__)

ANONYMOUS = "User:ANONYMOUS"
PRE_AUTH_MAX_FRAME_BYTES = 512 * 1024
PRE_AUTH_APIS = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


class Security:
    """This agent's listener security and the caches every connection shares."""

    def __init__(
        self,
        client: ControlPlaneClient | None = None,
        *,
        require_sasl: bool = False,
        ssl_context: Any = None,
        listener: str = "",
    ) -> None:
        self.require_sasl = require_sasl
        self.ssl_context = ssl_context
        # The listener's name ("" outside a listener: relayed requests, tests).
        self.listener = listener
        self.credentials = CredentialCache(client) if client is not None else None
        self.acls = AclCache(client) if client is not None else None

    @classmethod
    def for_listeners(cls, config: Any, client: ControlPlaneClient) -> list[Security]:
        """One `Security` per listener of `config.kafka_listeners`, in order, sharing the
        credential and ACL caches; raises `TlsConfigError` for unusable TLS files."""
        context = None
        if config.tls_cert:
            context = server_context(config.tls_cert, config.tls_key, config.tls_client_ca)
        first = cls(client)
        made = []
        for listener in config.kafka_listeners:
            security = cls(
                None,
                require_sasl=listener.sasl,
                ssl_context=context if listener.tls else None,
                listener=listener.name,
            )
            security.credentials, security.acls = first.credentials, first.acls
            made.append(security)
        return made

    @property
    def listener_kind(self) -> tuple[str, str] | None:
        """(name, security protocol) of the listener, None outside one: the kind of
        address a client connected through it may be given (agents.groups.ring)."""
        return (self.listener, self.protocol) if self.listener else None

    @property
    def protocol(self) -> str:
        """Kafka's name for this listener's security protocol."""
        tls = self.ssl_context is not None
        if self.require_sasl:
            return "SASL_SSL" if tls else "SASL_PLAINTEXT"
        return "SSL" if tls else "PLAINTEXT"

    def open_session(self, transport: Any, decoder: FrameDecoder | None = None) -> Session:
        """The session of a new connection (its TLS handshake, if any, is done)."""
        peer = transport.get_extra_info("peername") if transport is not None else None
        principal = None
        if self.ssl_context is not None and transport is not None:
            principal = principal_from_certificate(transport.get_extra_info("peercert"))
        return Session(
            self,
            peer_host=str(peer[0]) if peer else "",
            principal=principal or ANONYMOUS,
            decoder=decoder,
        )


class Session:
    """One connection: who it is, and how far its SASL exchange got."""

    def __init__(
        self,
        security: Security,
        *,
        peer_host: str = "",
        principal: str = ANONYMOUS,
        decoder: FrameDecoder | None = None,
    ) -> None:
        self.security = security
        self.peer_host = peer_host
        self.principal = principal
        self.authenticated = False  # by SASL
        self.superuser = False
        self.read_only = False
        self.mechanism: str | None = None
        self.exchange: Any = None  # the mechanism's server state, between SASL steps
        self.sasl_lock = asyncio.Lock()  # SASL steps run one at a time, in order
        self._decoder = decoder
        self._max_frame_bytes = decoder.max_frame_bytes if decoder is not None else 0
        if decoder is not None and security.require_sasl:
            decoder.max_frame_bytes = min(decoder.max_frame_bytes, PRE_AUTH_MAX_FRAME_BYTES)

    @property
    def must_authenticate(self) -> bool:
        return self.security.require_sasl and not self.authenticated

    def may_send(self, api_key: int) -> bool:
        """Whether a request of this API is acceptable now (else: close the connection)."""
        return not self.must_authenticate or api_key in PRE_AUTH_APIS

    def begin_sasl(self, mechanism: str, exchange: Any) -> None:
        self.mechanism = mechanism
        self.exchange = exchange

    def login(self, credential: Credential) -> None:
        """SASL succeeded: the connection now acts as this user."""
        self.principal = f"User:{credential.username}"
        self.superuser = credential.superuser
        self.read_only = credential.read_only
        self.authenticated = True
        self.exchange = None
        if self._decoder is not None:
            self._decoder.max_frame_bytes = self._max_frame_bytes
        log.info(
            "%s authenticated as %s with %s%s",
            self.peer_host or "?",
            self.principal,
            self.mechanism,
            " (superuser)" if self.superuser else " (read-only)" if self.read_only else "",
        )


CURRENT_SESSION: ContextVar[Session | None] = ContextVar("floe_session", default=None)


def connection_listener() -> tuple[str, str] | None:
    """The kind of listener the request being handled came through (None: not through
    a listener — a relayed request, or a test calling a handler)."""
    session = CURRENT_SESSION.get()
    return session.security.listener_kind if session is not None else None


def current_session() -> Session:
    """The session of the request being handled (an anonymous one outside a listener)."""
    session = CURRENT_SESSION.get()
    if session is None:
        session = Session(Security())
        CURRENT_SESSION.set(session)
    return session
