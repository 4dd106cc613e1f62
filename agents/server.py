"""The Kafka listener: asyncio protocol objects feeding the sans-IO codec.

Per connection: bytes → `FrameDecoder` → `decode_request` → one task per request →
responses written strictly in request order (clients pipeline requests and match
answers by position as much as by correlation id). Reading pauses while too many
requests are in flight or while the socket's write buffer is full, so one fast client
cannot make the agent buffer without bound.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import socket
import time
from collections import deque
from collections.abc import Coroutine
from typing import Any

from agents.arrival_order import TURN, ArrivalOrder
from agents.dispatch import Dispatcher
from agents.fetch_requests import FetchRequests
from agents.handlers.errors import CloseConnection
from agents.metrics import Counter, Gauge
from agents.security.session import Security
from core.kafka import (
    ApiKey,
    FrameDecoder,
    InvalidRequest,
    ProtocolViolation,
    RequestHeader,
    UnsupportedVersion,
    api_versions_fallback_response,
    decode_request,
)

log = logging.getLogger(__name__)

# Per connection, before we stop reading from it. Produce requests are parked until
# their segment commits (~batch timeout), and librdkafka sends one request per
# partition per linger.ms, so one producer keeps up to partitions × batch timeout /
# linger requests in flight: 100 partitions at linger 5 ms and a 250 ms batch timeout,
# 5,000. At a bound of 1,000 such a producer's requests queued in the client: produce
# p50 969 ms at 5,000 records/s (bench/produce.py --partitions 100), 428 ms at 10,000.
# Bytes bound the memory those requests hold.
MAX_IN_FLIGHT = 10_000
MAX_IN_FLIGHT_BYTES = 64 * 1024 * 1024
_RESUME_BELOW = MAX_IN_FLIGHT // 2
_COALESCE_BYTES = 256 * 1024  # join ready answers up to this size into one send
# A produce answer ready this long after the connection's last send is sent at once;
# sooner, it joins the answers that follow it in one send (see `_produce_answered`).
_COALESCE_S = 0.001
_IOV_MAX = 1024  # buffers one gathering write takes (Linux's IOV_MAX)
_CLOSE = object()  # queued in place of a response: close once everything before is sent
FAILED_AUTHENTICATION_CLOSE_DELAY_S = 0.1  # Kafka's connection.failed.authentication.delay.ms

_OPEN = Gauge("floe_open_connections", "Open Kafka client connections.")
_ACCEPTED = Counter("floe_connections_total", "Kafka client connections accepted.")
_VIOLATIONS = Counter(
    "floe_protocol_violations_total", "Connections closed for a protocol violation.", ("kind",)
)


class KafkaConnection(asyncio.Protocol):
    """One client connection."""

    def __init__(self, server: KafkaServer) -> None:
        self._server = server
        self._dispatcher = server.dispatcher
        self._decoder = FrameDecoder(server.max_frame_bytes)
        self._pending: deque[asyncio.Future[Any]] = deque()
        self._pending_bytes = 0  # request frame bytes of the requests in `_pending`
        self._produce_order = ArrivalOrder()  # produce requests append in arrival order
        self._frame_bytes: dict[asyncio.Future[Any], int] = {}  # each request's share
        # Produce answers ready before their task's done callbacks ran (`_produce_answered`).
        self._answered: dict[asyncio.Future[Any], Any] = {}
        self._sent_at = 0.0  # perf_counter of the last send
        self._transport: asyncio.Transport | None = None
        self._fd = -1  # the plain TCP socket's descriptor, for gathering writes (-1: none)
        self._peer = "?"
        self._closing = False
        self._read_paused = False
        self._write_paused = False
        self._write_scheduled = False
        self._close_when_written = False
        self._loop = asyncio.get_running_loop()

    # -- asyncio callbacks ---------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        peer = transport.get_extra_info("peername")
        self._peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        sock = transport.get_extra_info("socket")
        if sock is not None and transport.get_extra_info("sslcontext") is None:
            self._fd = sock.fileno()  # not through TLS: bytes written go out as they are
        self.session = self._server.security.open_session(transport, self._decoder)
        self._server.connections.add(self)
        _OPEN.inc(1)
        _ACCEPTED.inc(1)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self._server.connections.discard(self)
        _OPEN.inc(-1)
        # Requests still running have nobody to answer; a produce already appended to
        # the segment is committed anyway, as Kafka keeps a write whose client left.
        for future in self._pending:
            future.cancel()
        self._pending.clear()
        self._frame_bytes.clear()
        self._answered.clear()

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._update_reading()

    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        try:
            frames = self._decoder.feed(data)
        except ProtocolViolation as exc:
            self._violation("frame", exc)
            return
        for frame in frames:
            if self._closing:
                return
            self._on_frame(frame)
        self._update_reading()

    # -- requests and responses ------------------------------------------------------

    def _on_frame(self, frame: bytes) -> None:
        try:
            header, body = _decode(frame, self._server.fetch_requests)
        except UnsupportedVersion as exc:
            if exc.header.api_key == ApiKey.API_VERSIONS:
                # KIP-511: answer with the versions we do support so the client retries.
                self._enqueue_done(api_versions_fallback_response(exc.header))
            else:
                self._violation("unsupported_version", exc)
            return
        except ProtocolViolation as exc:
            self._violation("invalid_request", exc)
            return
        if not self.session.may_send(header.api_key):  # Kafka closes these too
            name = ApiKey(header.api_key).name
            self._violation("unauthenticated", f"{name} before SASL authentication")
            return
        if header.api_key != ApiKey.API_VERSIONS and not self._dispatcher.serves(header):
            self._violation(
                "unsupported_api", f"{ApiKey(header.api_key).name} v{header.api_version} not served"
            )
            return
        dispatch = self._dispatcher.dispatch(header, body, self.session)
        if header.api_key == ApiKey.PRODUCE:
            # agents.arrival_order: its batches go into the segment after those of every
            # earlier produce of this connection.
            turn = self._produce_order.take()
            context = contextvars.copy_context()
            context.run(TURN.set, turn)
            task = self._loop.create_task(self._produce_answered(dispatch), context=context)
            task.add_done_callback(lambda _: turn.release())
        else:
            task = self._loop.create_task(dispatch)
        self._frame_bytes[task] = len(frame)
        self._pending_bytes += len(frame)
        self._pending.append(task)
        task.add_done_callback(self._on_done)

    async def _produce_answered(self, dispatch: Coroutine[Any, Any, Any]) -> Any:
        """A produce's answer, offered for sending as soon as the handler returns it.

        A segment's PUT or commit answers all its parked requests at once: every handler
        resumes in one loop iteration, and a task's done callbacks run only after all of
        them, so the first (oldest) answer would wait for the last one to be encoded —
        2-9 ms for the 125 requests of a 250 ms segment at 500 requests/s. Here the
        answer at the head of the queue goes out when it is ready, joined with those
        ready right after it while the last send is under `_COALESCE_S` old."""
        response = await dispatch
        task = asyncio.current_task()
        if task is not None and not self._closing:
            self._answered[task] = response
            if time.perf_counter() - self._sent_at >= _COALESCE_S:
                self._write_ready()
            else:
                self._on_done(task)
        return response

    def _enqueue_done(self, response: object) -> None:
        future = self._loop.create_future()
        future.set_result(response)
        self._pending.append(future)
        self._write_ready()

    def _on_done(self, _: asyncio.Future[Any]) -> None:

        # A commit answers hundreds of parked produces in the same loop iteration: write
        # them with one send on the next iteration rather than one send each.
        if not self._write_scheduled:
            self._write_scheduled = True
            self._loop.call_soon(self._write_ready)

    def _write_ready(self) -> None:
        """Write every finished response at the head of the queue, in order."""
        self._write_scheduled = False
        pending = self._pending
        transport = self._transport
        ready: list[bytes] = []
        try:
            self._collect_ready(pending, transport, ready)
        finally:
            if ready and transport is not None and not transport.is_closing():
                self._sent_at = time.perf_counter()
                write_gathered(transport, self._fd, ready)
        if self._closing and self._close_when_written:
            self._abort()
            return
        self._update_reading()

    def _collect_ready(
        self,
        pending: deque[asyncio.Future[Any]],
        transport: asyncio.Transport | None,
        ready: list[bytes],
    ) -> None:
        answered = self._answered
        while pending and (pending[0] in answered or pending[0].done()):
            future = pending.popleft()
            self._pending_bytes -= self._frame_bytes.pop(future, 0)
            if future in answered:
                response = answered.pop(future)
                if response is not None and transport is not None and not transport.is_closing():
                    ready.append(response)  # a produce's answer: never a shared (head, body)
                continue
            if future.cancelled() or transport is None or transport.is_closing():
                continue
            exc = future.exception()
            if isinstance(exc, CloseConnection):
                log.warning("closing connection from %s: %s", self._peer, exc)
                if exc.final_response:
                    # KIP-306: answer (e.g. SASL_AUTHENTICATION_FAILED), then close a little
                    # later, so the client reads the answer before the EOF.
                    ready.append(exc.final_response)
                    self._closing = True
                    self._loop.call_later(FAILED_AUTHENTICATION_CLOSE_DELAY_S, self._abort)
                    return
                self._close_when_written = self._closing = True
                return
            if exc is not None:  # dispatch() only raises CloseConnection; a bug otherwise
                log.error("closing connection from %s", self._peer, exc_info=exc)
                self._close_when_written = self._closing = True
                return
            response = future.result()
            if response is _CLOSE:
                self._close_when_written = self._closing = True
                return
            if isinstance(response, tuple):  # a shared answer's head and body
                ready.extend(response)
            elif response is not None:
                ready.append(response)

    def _violation(self, kind: str, exc: object) -> None:
        """A peer broke the protocol: one log line, then close once earlier answers are out."""
        _VIOLATIONS.inc(1, kind)
        log.warning("closing connection from %s: %s", self._peer, exc)
        self._closing = True
        if self._transport is not None:
            self._transport.pause_reading()
        self._enqueue_done(_CLOSE)

    def _abort(self) -> None:
        self._closing = True
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()  # flushes what was already written

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None or self._closing or transport.is_closing():
            return
        busy = (
            len(self._pending) >= MAX_IN_FLIGHT
            or self._pending_bytes >= MAX_IN_FLIGHT_BYTES
            or self._write_paused
        )
        if busy and not self._read_paused:
            transport.pause_reading()
            self._read_paused = True
        elif (
            self._read_paused
            and not self._write_paused
            and len(self._pending) < _RESUME_BELOW
            and self._pending_bytes < MAX_IN_FLIGHT_BYTES // 2
        ):
            transport.resume_reading()
            self._read_paused = False

    def close(self) -> None:
        """Close after the responses already queued (used at shutdown)."""
        if not self._closing:
            self._closing = True
            self._enqueue_done(_CLOSE)


def write_gathered(transport: asyncio.Transport, fd: int, ready: list[bytes]) -> None:
    """Write `ready` in order to `transport`, whose plain socket is `fd` (-1: none, as
    through TLS). With nothing queued in the transport, the socket gets them in one
    gathering write (writev): a shared Fetch answer's body goes to the kernel from the
    one copy every consumer is sent, and many small answers (a commit's parked produces)
    in one system call; what the socket does not take now is queued in the transport,
    as every write is."""
    buffers: list[bytes | memoryview] = list(ready)
    if fd >= 0 and not transport.get_write_buffer_size():
        while buffers:
            chunk = buffers[:_IOV_MAX]
            try:
                sent = os.writev(fd, chunk)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:  # a closed peer: the transport's write meets it and closes
                break
            whole = sum(map(len, chunk))
            if sent < whole:
                buffers = _unsent(chunk, sent) + buffers[_IOV_MAX:]
                break
            buffers = buffers[_IOV_MAX:]
        if not buffers:
            return
    if len(buffers) > 1 and sum(map(len, buffers)) <= _COALESCE_BYTES:
        transport.write(b"".join(buffers))
    else:  # big fetch answers: no extra copy to coalesce them
        for buffer in buffers:
            transport.write(buffer)


def _unsent(buffers: list[bytes | memoryview], sent: int) -> list[bytes | memoryview]:
    """What of `buffers` is left after the first `sent` bytes went out."""
    for i, buffer in enumerate(buffers):
        if sent < len(buffer):
            rest = buffers[i:]
            if sent:
                rest[0] = memoryview(buffer)[sent:]
            return rest
        sent -= len(buffer)
    return []


def _decode(frame: bytes, fetches: FetchRequests) -> tuple[RequestHeader, dict[str, Any]]:
    """`decode_request` (a Fetch through `fetches`), tolerating one known client quirk.

    librdkafka (up to at least 2.16) asks for "all topics" in flexible Metadata requests
    (v9+) by leaving its 4-byte array-count placeholder in place: a null compact array
    (0x00) followed by 3 stray zero bytes (rdkafka_request.c, rd_kafka_MetadataRequest0
    "v9+: keep 0"). Kafka brokers never notice because they ignore trailing bytes; our
    codec rejects them, so drop the stray bytes and decode again.
    """
    try:
        return fetches.decode(frame)
    except InvalidRequest as exc:
        header = exc.header
        if header is None or header.api_key != ApiKey.METADATA or header.api_version < 9:
            raise
        client_id = (header.client_id or "").encode("utf-8") if header.client_id else b""
        topics_at = 10 + len(client_id) + 1  # fixed header, client id, empty tag section
        if frame[topics_at : topics_at + 4] != b"\0\0\0\0":
            raise
        return decode_request(frame[: topics_at + 1] + frame[topics_at + 4 :])


class KafkaServer:
    """The listening socket and its connections."""

    def __init__(
        self, dispatcher: Dispatcher, *, max_frame_bytes: int, security: Security | None = None
    ) -> None:
        self.dispatcher = dispatcher
        self.security = security or Security()  # TLS context, SASL requirement, caches
        self.max_frame_bytes = max_frame_bytes
        self.connections: set[KafkaConnection] = set()
        self.fetch_requests = FetchRequests()  # decoded once for identical Fetches
        self._server: asyncio.base_events.Server | None = None

    async def start_on(self, sock: socket.socket) -> None:
        """Accept connections on an already bound socket."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: KafkaConnection(self), sock=sock, backlog=1024, ssl=self.security.ssl_context
        )

    def stop_accepting(self) -> None:
        """Stop taking new connections; existing ones carry on."""
        if self._server is not None:
            self._server.close()

    async def close_connections(self, timeout_s: float = 5.0) -> None:
        """Close every connection once its queued answers are written."""
        for connection in list(self.connections):
            connection.close()
        deadline = asyncio.get_running_loop().time() + timeout_s
        while self.connections and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)
        for connection in list(self.connections):
            connection._abort()
