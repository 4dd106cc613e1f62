"""Bad input over raw sockets: each gets a clear error code or a closed connection, and
nobody else notices (ARCHITECTURE.md invariant 7)."""

from __future__ import annotations

import socket
import struct
import time
import uuid

import pytest

from core.kafka import ApiKey, ErrorCode, decode_response, encode_request
from core.kafka.records import RecordInput, encode_batch, iter_batches

pytestmark = [pytest.mark.kafka, pytest.mark.django_db(transaction=True)]


class Wire:
    """A raw Kafka connection: send encoded requests, read framed responses."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.correlation = 0
        self.sent: list[tuple[int, int, int]] = []

    def send(self, api_key: int, version: int, body: dict) -> int:
        self.correlation += 1
        self.sock.sendall(encode_request(api_key, version, self.correlation, "wire-test", body))
        self.sent.append((api_key, version, self.correlation))
        return self.correlation

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _read_exact(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise ConnectionError("closed by the agent")
            data += chunk
        return data

    def receive(self) -> tuple[int, dict]:
        """The next response, decoded with the schema of the oldest unanswered request."""
        (size,) = struct.unpack(">i", self._read_exact(4))
        api_key, version, _ = self.sent.pop(0)
        return decode_response(api_key, version, self._read_exact(size))

    def call(self, api_key: int, version: int, body: dict) -> dict:
        correlation = self.send(api_key, version, body)
        got, response = self.receive()
        assert got == correlation
        return response

    def is_closed(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()


def produce_body(topic: str, partition: int, records: bytes | None, acks: int = -1) -> dict:
    return {
        "acks": acks,
        "timeout_ms": 5000,
        "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": records}]}
        ],
    }


def partition_result(response: dict) -> dict:
    return response["responses"][0]["partition_responses"][0]


def assert_still_serving(bootstrap: str) -> None:
    wire = Wire(bootstrap)
    answer = wire.call(ApiKey.API_VERSIONS, 3, {})
    assert answer["error_code"] == 0
    assert {k["api_key"] for k in answer["api_keys"]} >= {ApiKey.PRODUCE, ApiKey.FETCH}
    wire.close()


def test_protocol_violations_close_only_the_offending_connection(agent, cluster):
    a = agent(cluster.key)
    bystander = Wire(a.bootstrap)
    bystander.call(ApiKey.API_VERSIONS, 3, {})

    truncated = Wire(a.bootstrap)  # a Metadata v12 request cut short inside its body
    frame = encode_request(ApiKey.METADATA, 12, 1, "x", {"topics": [{"name": "abc"}]})
    truncated.send_raw(struct.pack(">i", len(frame) - 4 - 3) + frame[4:-3])
    assert truncated.is_closed()

    oversized = Wire(a.bootstrap)  # a size prefix beyond socket.request.max.bytes
    oversized.send_raw(struct.pack(">i", 200 * 1024 * 1024) + b"\0" * 100)
    assert oversized.is_closed()

    negative = Wire(a.bootstrap)
    negative.send_raw(struct.pack(">i", -5))
    assert negative.is_closed()

    unknown_version = Wire(a.bootstrap)  # Kafka closes on an unsupported non-ApiVersions
    unknown_version.send_raw(struct.pack(">ihhih", 10, ApiKey.METADATA, 99, 7, 0))
    assert unknown_version.is_closed()

    unknown_api = Wire(a.bootstrap)
    unknown_api.send_raw(struct.pack(">ihhih", 10, 999, 0, 7, 0))
    assert unknown_api.is_closed()

    # The first connection, open all along, still works; so do new ones.
    assert bystander.call(ApiKey.API_VERSIONS, 3, {})["error_code"] == 0
    assert_still_serving(a.bootstrap)
    assert "closing connection" in a.logs()


def test_an_unknown_api_versions_version_gets_the_supported_list(agent, cluster):
    a = agent(cluster.key)
    wire = Wire(a.bootstrap)
    # KIP-511: ApiVersions v42 → a v0 answer with UNSUPPORTED_VERSION and our versions.
    wire.send_raw(struct.pack(">ihhih", 10, ApiKey.API_VERSIONS, 42, 5, 0))
    (size,) = struct.unpack(">i", wire._read_exact(4))
    correlation, answer = decode_response(ApiKey.API_VERSIONS, 0, wire._read_exact(size))
    assert correlation == 5
    assert answer["error_code"] == ErrorCode.UNSUPPORTED_VERSION
    assert any(k["api_key"] == ApiKey.API_VERSIONS for k in answer["api_keys"])
    assert wire.call(ApiKey.API_VERSIONS, 3, {})["error_code"] == 0  # and the connection lives


def test_bad_batches_get_per_partition_errors(agent, cluster):
    a = agent(cluster.key)
    wire = Wire(a.bootstrap)
    created = wire.call(
        ApiKey.CREATE_TOPICS,
        7,
        {
            "topics": [
                {
                    "name": "strict",
                    "num_partitions": 1,
                    "replication_factor": -1,
                    "configs": [{"name": "max.message.bytes", "value": "2000"}],
                }
            ],
            "timeout_ms": 5000,
        },
    )
    assert created["topics"][0]["error_code"] == 0
    assert created["topics"][0]["replication_factor"] == 3

    good = encode_batch([RecordInput(value=b"fine")])
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF  # a payload byte: the CRC no longer matches
    huge = encode_batch([RecordInput(value=bytes(5000))])
    not_v2 = bytearray(good)
    not_v2[16] = 1  # magic 1

    cases = [
        (produce_body("strict", 0, bytes(corrupt)), ErrorCode.CORRUPT_MESSAGE),
        (produce_body("strict", 0, huge), ErrorCode.MESSAGE_TOO_LARGE),
        (produce_body("strict", 0, bytes(not_v2)), ErrorCode.INVALID_RECORD),
        (produce_body("strict", 0, good[:-10]), ErrorCode.CORRUPT_MESSAGE),  # truncated
        (produce_body("strict", 0, None), ErrorCode.INVALID_RECORD),
        (produce_body("strict", 7, good), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        # Produce never auto-creates (only Metadata does, as in Kafka).
        (produce_body("never-created", 0, good), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (produce_body("strict", 0, good, acks=2), ErrorCode.INVALID_REQUIRED_ACKS),
    ]
    for body, expected in cases:
        assert partition_result(wire.call(ApiKey.PRODUCE, 9, body))["error_code"] == expected

    accepted = partition_result(wire.call(ApiKey.PRODUCE, 9, produce_body("strict", 0, good)))
    assert (accepted["error_code"], accepted["base_offset"]) == (0, 0)


def test_responses_come_back_in_request_order_and_acks_zero_gets_none(agent, cluster):
    a = agent(cluster.key)
    wire = Wire(a.bootstrap)
    lightning = [{"name": "floe.topic.type", "value": "lightning"}]
    wire.call(
        ApiKey.CREATE_TOPICS,
        7,
        {
            "topics": [
                {"name": "ordered", "num_partitions": 2, "replication_factor": -1},
                {
                    "name": "quick",
                    "num_partitions": 2,
                    "replication_factor": -1,
                    "configs": lightning,
                },
            ]
        },
    )
    batch = encode_batch([RecordInput(value=b"x")])
    fire_and_forget = encode_request(
        ApiKey.PRODUCE, 9, 999, "wire-test", produce_body("ordered", 1, batch, acks=0)
    )
    # A pipeline of slow (produce, parked until commit or, on a lightning topic, until its
    # PUT: answered as soon as each is ready) and fast (ApiVersions, Metadata) requests,
    # with an acks=0 produce in the middle that must get no answer at all.
    expected = []
    for i in range(10):
        expected.append(wire.send(ApiKey.PRODUCE, 9, produce_body("ordered", i % 2, batch)))
        expected.append(wire.send(ApiKey.PRODUCE, 9, produce_body("quick", i % 2, batch)))
        expected.append(wire.send(ApiKey.API_VERSIONS, 3, {}))
        if i == 5:
            wire.send_raw(fire_and_forget)
        expected.append(wire.send(ApiKey.METADATA, 12, {"topics": [{"name": "ordered"}]}))
    got = [wire.receive()[0] for _ in expected]
    assert got == expected

    offsets = wire.call(
        ApiKey.LIST_OFFSETS,
        7,
        {
            "replica_id": -1,
            "topics": [
                {
                    "name": "ordered",
                    "partitions": [{"partition_index": p, "timestamp": -1} for p in range(2)],
                }
            ],
        },
    )
    ends = [p["offset"] for p in offsets["topics"][0]["partitions"]]
    assert ends == [5, 6]  # partition 1 also holds the acks=0 batch


def fetch_body(topic_id, partitions: list[tuple[int, int, int]], **overrides) -> dict:
    """A Fetch v13 request: partitions as (index, fetch offset, partition max bytes)."""
    return {
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 50 << 20,
        "topics": [
            {
                "topic_id": topic_id,
                "partitions": [
                    {"partition": p, "fetch_offset": offset, "partition_max_bytes": limit}
                    for p, offset, limit in partitions
                ],
            }
        ],
        **overrides,
    }


def batches_of(records) -> list[tuple[int, int]]:
    """(base offset, record count) of each batch in a fetched records field."""
    return [(h.base_offset, h.record_count) for _, _, h in iter_batches(bytes(records or b""))]


def test_fetch_sizes_offsets_and_sessions_like_kafka(agent, cluster):
    a = agent(cluster.key)
    wire = Wire(a.bootstrap)
    created = wire.call(
        ApiKey.CREATE_TOPICS,
        7,
        {"topics": [{"name": "sized", "num_partitions": 2, "replication_factor": -1}]},
    )
    topic_id = created["topics"][0]["topic_id"]
    for partition in (0, 1):  # five ~1 KiB batches of 3 records each, per partition
        for _ in range(5):
            batch = encode_batch([RecordInput(value=bytes(300)) for _ in range(3)])
            answer = wire.call(ApiKey.PRODUCE, 9, produce_body("sized", partition, batch))
            assert partition_result(answer)["error_code"] == 0
    size = len(batch)

    def fetch(partitions, **overrides):
        answer = wire.call(ApiKey.FETCH, 13, fetch_body(topic_id, partitions, **overrides))
        assert answer["error_code"] == 0 and answer["session_id"] == 0
        return answer["responses"][0]["partitions"]

    everything = fetch([(0, 0, 1 << 20), (1, 0, 1 << 20)])
    assert [batches_of(p["records"]) for p in everything] == [
        [(0, 3), (3, 3), (6, 3), (9, 3), (12, 3)]
    ] * 2
    assert [p["high_watermark"] for p in everything] == [15, 15]

    # An offset inside a batch returns that whole batch (the client skips to its offset).
    assert batches_of(fetch([(0, 7, 1 << 20)])[0]["records"])[0] == (6, 3)
    # Per-partition and total limits; the first batch is returned even when too big.
    limited = fetch([(0, 0, 2 * size + 10), (1, 0, 1)])
    assert [len(batches_of(p["records"])) for p in limited] == [2, 0]
    tiny = fetch([(0, 0, 1 << 20), (1, 0, 1 << 20)], max_bytes=1)
    assert [len(batches_of(p["records"])) for p in tiny] == [1, 0]

    beyond = fetch([(0, 16, 1 << 20)])[0]
    assert beyond["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
    at_end = fetch([(0, 15, 1 << 20)])[0]
    assert (at_end["error_code"], batches_of(at_end["records"])) == (0, [])

    # A session this agent never handed out (incremental epoch) is unknown.
    stale = wire.call(ApiKey.FETCH, 13, fetch_body(topic_id, [], session_id=77, session_epoch=3))
    assert stale["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    # Asking to open a session (epoch 0) is answered sessionless: session id 0, no error.
    opened = wire.call(ApiKey.FETCH, 13, fetch_body(topic_id, [(0, 0, 1)], session_epoch=0))
    assert (opened["error_code"], opened["session_id"]) == (0, 0)

    unknown = wire.call(ApiKey.FETCH, 13, fetch_body(uuid.uuid4(), [(0, 0, 100)]))
    assert unknown["responses"][0]["partitions"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_ID


def test_a_long_poll_wakes_when_data_is_committed(agent, cluster):
    a = agent(cluster.key)
    setup = Wire(a.bootstrap)
    created = setup.call(
        ApiKey.CREATE_TOPICS,
        7,
        {"topics": [{"name": "waiting", "num_partitions": 1, "replication_factor": -1}]},
    )
    topic_id = created["topics"][0]["topic_id"]

    poller = Wire(a.bootstrap)
    started = time.monotonic()
    poller.send(
        ApiKey.FETCH, 13, fetch_body(topic_id, [(0, 0, 1 << 20)], max_wait_ms=5000, min_bytes=1)
    )
    time.sleep(0.3)
    setup.call(
        ApiKey.PRODUCE, 9, produce_body("waiting", 0, encode_batch([RecordInput(value=b"hi")]))
    )
    _, answer = poller.receive()
    waited = time.monotonic() - started
    assert batches_of(answer["responses"][0]["partitions"][0]["records"]) == [(0, 1)]
    assert 0.3 <= waited < 2.0
