"""Record the first requests real Kafka clients send, as fixtures for test_client_fixtures.py.

Run by hand when a client library changes (network: 127.0.0.1 only)::

    .venv/bin/python -m tests.core.kafka.capture_fixtures

A tiny fake broker on a random loopback port answers ApiVersions, Metadata
and Produce with this codec, so librdkafka (confluent-kafka) and kafka-python
go on to send their Metadata and Produce requests. The first frame of each
(client, api, version) is saved as ``fixtures/<client>-<api>-v<version>.bin``
(the frame without its size prefix, i.e. what ``decode_request`` takes).
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

from core.kafka import (
    ApiKey,
    FrameDecoder,
    UnsupportedVersion,
    api_versions_fallback_response,
    decode_request,
    encode_response,
    supported_api_keys,
)

FIXTURES = Path(__file__).parent / "fixtures"
TOPIC = "fixtures"
CLIENTS = {"floe-fixture-librdkafka": "librdkafka", "floe-fixture-kafka-python": "kafka-python"}


class FakeBroker:
    """Answers just enough for a producer to send one record batch; saves what it receives."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.saved: dict[str, bytes] = {}
        self._stop = threading.Event()

    def serve(self, seconds: float) -> None:
        self.listener.settimeout(0.2)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not self._stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._connection, args=(conn, deadline), daemon=True).start()
        self.listener.close()

    def stop(self) -> None:
        self._stop.set()

    def _connection(self, conn: socket.socket, deadline: float) -> None:
        decoder = FrameDecoder()
        conn.settimeout(0.2)
        with conn:
            while time.monotonic() < deadline and not self._stop.is_set():
                try:
                    data = conn.recv(65536)
                except TimeoutError:
                    continue
                if not data:
                    return
                for frame in decoder.feed(data):
                    conn.sendall(self._answer(frame))

    def _answer(self, frame: bytes) -> bytes:
        try:
            header, request = decode_request(frame)
        except UnsupportedVersion as exc:
            self._save(exc.header, frame)
            return api_versions_fallback_response(exc.header)
        self._save(header, frame)
        return encode_response(header, self._body(header.api_key, request))

    def _save(self, header, frame: bytes) -> None:
        client = CLIENTS.get(header.client_id or "", "unknown")
        api = ApiKey(header.api_key).name.lower().replace("_", "")
        self.saved.setdefault(f"{client}-{api}-v{header.api_version}", frame)

    def _body(self, api_key: int, request: dict) -> dict:
        if api_key == ApiKey.API_VERSIONS:
            return {"error_code": 0, "api_keys": supported_api_keys()}
        if api_key == ApiKey.METADATA:
            names = [t["name"] for t in request["topics"] or []] or [TOPIC]
            return {
                "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": self.port}],
                "cluster_id": "floe-fixtures",
                "controller_id": 1,
                "topics": [
                    {
                        "name": name,
                        "partitions": [
                            {
                                "partition_index": 0,
                                "leader_id": 1,
                                "replica_nodes": [1],
                                "isr_nodes": [1],
                            }
                        ],
                    }
                    for name in names
                ],
            }
        if api_key == ApiKey.PRODUCE:
            self.stop_soon()
            return {
                "responses": [
                    {
                        "name": topic["name"],
                        "partition_responses": [
                            {"index": p["index"], "base_offset": 0} for p in topic["partition_data"]
                        ],
                    }
                    for topic in request["topic_data"]
                ]
            }
        raise ValueError(f"the fake broker does not answer {api_key}")

    def stop_soon(self) -> None:
        threading.Timer(0.5, self.stop).start()


def _librdkafka(port: int) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "client.id": "floe-fixture-librdkafka",
            "acks": 1,
            "linger.ms": 0,
            "compression.type": "none",
            "socket.timeout.ms": 2000,
            "message.timeout.ms": 4000,
        }
    )
    producer.produce(TOPIC, key=b"key", value=b"hello from librdkafka")
    producer.flush(5)


def _kafka_python(port: int) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=f"127.0.0.1:{port}",
        client_id="floe-fixture-kafka-python",
        acks=1,
        request_timeout_ms=4000,
        max_block_ms=4000,
    )
    producer.send(TOPIC, key=b"key", value=b"hello from kafka-python").get(timeout=5)
    producer.close(timeout=2)


def capture(run_client, seconds: float = 8.0) -> dict[str, bytes]:
    broker = FakeBroker()
    server = threading.Thread(target=broker.serve, args=(seconds,), daemon=True)
    server.start()
    try:
        run_client(broker.port)
    finally:
        broker.stop()
        server.join(seconds)
    return broker.saved


def main() -> None:
    FIXTURES.mkdir(exist_ok=True)
    for run_client in (_librdkafka, _kafka_python):
        for name, frame in sorted(capture(run_client).items()):
            (FIXTURES / f"{name}.bin").write_bytes(frame)
            print(f"saved {name}.bin ({len(frame)} bytes)")


if __name__ == "__main__":
    main()
