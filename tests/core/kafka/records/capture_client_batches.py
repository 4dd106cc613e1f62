"""Capture record batches written by real Kafka clients, as test fixtures.

    .venv/bin/python -m tests.core.kafka.records.capture_client_batches

Runs a tiny stand-in broker on 127.0.0.1 that answers just enough of ApiVersions,
Metadata and Produce v3 for librdkafka (confluent-kafka) and kafka-python to send one
batch per codec, and writes each batch's bytes to tests/records/fixtures/. The messages
sent are `EXPECTED_MESSAGES`, which the tests compare against. Run it again only to
refresh the fixtures; the tests never start a client.
"""

from __future__ import annotations

import socket
import socketserver
import struct
import threading
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
TOPIC = "capture"
BASE_TIMESTAMP = 1_700_000_000_000

# (key, value, headers, timestamp) for each message, in order.
EXPECTED_MESSAGES = [
    (
        f"key-{n}".encode(),
        (f"value {n} " * 30).encode(),
        [("trace", f"t{n}".encode()), ("empty", None)] if n % 2 else [],
        BASE_TIMESTAMP + n * 7,
    )
    for n in range(6)
]
EXPECTED_MESSAGES.append((None, b"no key", [], BASE_TIMESTAMP + 100))

LIBRDKAFKA_CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
KAFKA_PYTHON_CODECS = ["none", "gzip"]  # kafka-python needs extra packages for the rest

API_PRODUCE, API_FETCH, API_METADATA, API_FIND_COORDINATOR, API_VERSIONS = 0, 1, 3, 10, 18
# librdkafka picks features from the versions offered: magic v2 needs Produce v3 and
# Fetch v4, LZ4 needs FindCoordinator, zstd needs Produce v7 and Fetch v10 (KIP-110).
# Produce v3-v7 share one request layout; Fetch and FindCoordinator are never sent.
SUPPORTED = {
    API_PRODUCE: (3, 7),
    API_FETCH: (4, 10),
    API_METADATA: (0, 1),
    API_FIND_COORDINATOR: (0, 0),
    API_VERSIONS: (0, 3),
}


def _string(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> tuple:
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return values

    def string(self) -> str | None:
        (length,) = self.take(">h")
        if length < 0:
            return None
        text = self.data[self.pos : self.pos + length].decode()
        self.pos += length
        return text

    def nullable_bytes(self) -> bytes | None:
        (length,) = self.take(">i")
        if length < 0:
            return None
        raw = self.data[self.pos : self.pos + length]
        self.pos += length
        return raw


class _Handler(socketserver.BaseRequestHandler):
    server: _CaptureServer

    def handle(self) -> None:
        sock: socket.socket = self.request
        while True:
            size_bytes = _recv_exact(sock, 4)
            if size_bytes is None:
                return
            frame = _recv_exact(sock, struct.unpack(">i", size_bytes)[0])
            if frame is None:
                return
            reader = _Reader(frame)
            api_key, version, correlation_id = reader.take(">hhi")
            reader.string()  # client id
            body = self._respond(api_key, version, reader)
            if body is None:
                continue  # acks=0: no response
            payload = struct.pack(">i", correlation_id) + body
            sock.sendall(struct.pack(">i", len(payload)) + payload)

    def _respond(self, api_key: int, version: int, reader: _Reader) -> bytes | None:
        if api_key == API_VERSIONS:
            return _api_versions(version)
        if api_key == API_METADATA:
            host, port = self.server.server_address[:2]
            return _metadata(version, host, port)
        if api_key == API_PRODUCE:
            return self._produce(version, reader)
        raise RuntimeError(f"stand-in broker got unexpected api {api_key} v{version}")

    def _produce(self, version: int, reader: _Reader) -> bytes:
        reader.string()  # transactional id
        reader.take(">hi")  # acks, timeout
        topics = []
        for _ in range(reader.take(">i")[0]):
            name = reader.string()
            partitions = []
            for _ in range(reader.take(">i")[0]):
                (index,) = reader.take(">i")
                records = reader.nullable_bytes()
                if records:
                    self.server.batches.append(records)
                response = struct.pack(">ihqq", index, 0, 0, -1)
                if version >= 5:
                    response += struct.pack(">q", 0)  # log start offset
                partitions.append(response)
            topics.append(_string(name) + struct.pack(">i", len(partitions)) + b"".join(partitions))
        return struct.pack(">i", len(topics)) + b"".join(topics) + struct.pack(">i", 0)


def _api_versions(version: int) -> bytes:
    if version >= 3:  # flexible: compact array and tagged fields
        entries = b"".join(
            struct.pack(">hhh", key, low, high) + b"\x00" for key, (low, high) in SUPPORTED.items()
        )
        return struct.pack(">hB", 0, len(SUPPORTED) + 1) + entries + struct.pack(">i", 0) + b"\x00"
    entries = b"".join(struct.pack(">hhh", key, *span) for key, span in SUPPORTED.items())
    body = struct.pack(">hi", 0, len(SUPPORTED)) + entries
    return body + (struct.pack(">i", 0) if version >= 1 else b"")


def _metadata(version: int, host: str, port: int) -> bytes:
    broker = struct.pack(">i", 1) + _string(host) + struct.pack(">i", port)
    if version >= 1:
        broker += _string(None)  # rack
    body = struct.pack(">i", 1) + broker
    if version >= 1:
        body += struct.pack(">i", 1)  # controller id
    partition = struct.pack(">hiii", 0, 0, 1, 1) + struct.pack(">i", 1) + struct.pack(">ii", 1, 1)
    topic = struct.pack(">h", 0) + _string(TOPIC)
    if version >= 1:
        topic += b"\x00"  # is_internal
    topic += struct.pack(">i", 1) + partition
    return body + struct.pack(">i", 1) + topic


def _recv_exact(sock: socket.socket, size: int) -> bytes | None:
    chunks, remaining = [], size
    while remaining:
        chunk = sock.recv(remaining)
        if not chunk:
            return None
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


class _CaptureServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.batches: list[bytes] = []


def _capture(send) -> bytes:
    server = _CaptureServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        send(f"127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
        server.server_close()
    if len(server.batches) != 1:
        raise RuntimeError(f"expected one produce with one batch, got {len(server.batches)}")
    return server.batches[0]


def _send_with_librdkafka(codec: str):
    def send(bootstrap: str) -> None:
        from confluent_kafka import Producer

        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "compression.type": codec,
                "linger.ms": 200,
                "enable.idempotence": False,
                "acks": 1,
            }
        )
        for key, value, headers, timestamp in EXPECTED_MESSAGES:
            producer.produce(
                TOPIC, value=value, key=key, headers=headers, timestamp=timestamp, partition=0
            )
        if producer.flush(15) != 0:
            raise RuntimeError(f"librdkafka did not deliver its {codec} batch")

    return send


def _send_with_kafka_python(codec: str):
    def send(bootstrap: str) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            compression_type=None if codec == "none" else codec,
            linger_ms=200,
            acks=1,
            enable_idempotence=False,
        )
        futures = [
            producer.send(
                TOPIC,
                value=value,
                key=key,
                headers=kafka_python_headers(headers),
                timestamp_ms=timestamp,
                partition=0,
            )
            for key, value, headers, timestamp in EXPECTED_MESSAGES
        ]
        producer.flush(15)
        for future in futures:
            future.get(timeout=15)
        producer.close(5)

    return send


def kafka_python_headers(headers: list) -> list:
    """kafka-python cannot send a null header value; it sends those headers with b""."""
    return [(name, b"" if value is None else value) for name, value in headers]


def main() -> None:
    FIXTURES.mkdir(exist_ok=True)
    for codec in LIBRDKAFKA_CODECS:
        path = FIXTURES / f"librdkafka-{codec}.bin"
        path.write_bytes(_capture(_send_with_librdkafka(codec)))
        print(f"wrote {path} ({path.stat().st_size} bytes)")
    for codec in KAFKA_PYTHON_CODECS:
        path = FIXTURES / f"kafka-python-{codec}.bin"
        path.write_bytes(_capture(_send_with_kafka_python(codec)))
        print(f"wrote {path} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
