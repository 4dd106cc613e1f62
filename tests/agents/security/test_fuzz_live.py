"""Hostile input against a LIVE agent (ARCHITECTURE.md invariant 7).

Hypothesis feeds random streams, framed random bodies and mutated valid frames of every
API the codec knows, each over a fresh connection. After every example a canary
connection, open since the start, must still be answered promptly, and at the end the
agent must still be running and serving a real client. Bounded: a few hundred examples,
short socket timeouts, and a pytest timeout.
"""

from __future__ import annotations

import socket
import struct
import time

import pytest
from confluent_kafka import Producer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.kafka import SUPPORTED_VERSIONS, ApiKey
from tests.agents.security.test_sasl_wire import login
from tests.agents.test_wire import Wire
from tests.core.kafka.test_fuzz import VALID_FRAMES, mutated_frames

pytestmark = [pytest.mark.kafka, pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

LIVE = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,  # the same examples every run: a failure is reproducible
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
API_VERSIONS_V3 = {"client_software_name": "canary", "client_software_version": "1"}


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def hostile(bootstrap: str, data: bytes, chunk: int) -> None:
    """Send `data` in `chunk`-byte pieces, read whatever comes back briefly, then leave."""
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=2) as sock:
        try:
            for start in range(0, len(data), chunk):
                sock.sendall(data[start : start + chunk])
            sock.settimeout(0.05)
            deadline = time.monotonic() + 0.2
            while time.monotonic() < deadline and sock.recv(65536):
                pass
        except (TimeoutError, ConnectionError, OSError):
            pass


class Canary:
    """A connection opened before the fuzzing; it must be answered after every example."""

    def __init__(self, bootstrap: str, login_as: tuple[str, str] | None = None) -> None:
        self.wire = Wire(bootstrap)
        self.wire.sock.settimeout(5)
        if login_as:
            assert login(self.wire, *login_as)["error_code"] == 0

    def check(self) -> None:
        started = time.monotonic()
        answer = self.wire.call(ApiKey.API_VERSIONS, 3, API_VERSIONS_V3)
        assert answer["error_code"] == 0
        assert time.monotonic() - started < 5


def plausible_frames():
    """A header the codec accepts (api key, version) in front of random bytes."""
    keys = sorted(SUPPORTED_VERSIONS)
    return st.builds(
        lambda key, version, correlation, body: (
            struct.pack(">hhih", key, version, correlation, 1) + b"f" + body
        ),
        st.sampled_from(keys),
        st.integers(-1, 16),
        st.integers(-(2**31), 2**31 - 1),
        st.binary(max_size=256),
    )


def streams():
    """What a hostile peer may send: raw noise, framed noise, mutated and valid frames."""
    frame = st.one_of(
        mutated_frames(), plausible_frames(), st.binary(max_size=64), st.sampled_from(VALID_FRAMES)
    )
    well_framed = st.lists(frame, min_size=1, max_size=6).map(
        lambda frames: b"".join(framed(f) for f in frames)
    )
    lying_sizes = st.tuples(st.integers(-(2**31), 2**31 - 1), st.binary(max_size=512)).map(
        lambda t: struct.pack(">i", t[0]) + t[1]
    )
    return st.one_of(well_framed, lying_sizes, st.binary(min_size=1, max_size=1024))


def assert_still_serving(a, canary: Canary) -> None:
    assert a.proc.poll() is None, a.logs()[-3000:]
    canary.check()
    assert "Traceback" not in a.logs(), a.logs()[-5000:]


def test_random_and_mutated_frames_never_hurt_the_agent_or_other_clients(agent, cluster):
    a = agent(cluster.key)
    canary = Canary(a.bootstrap)

    @LIVE
    @given(streams(), st.integers(1, 4096))
    def attack(data, chunk):
        hostile(a.bootstrap, data, chunk)
        canary.check()

    attack()
    assert_still_serving(a, canary)
    producer = Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 5})
    producer.produce("after-the-fuzz", b"still here")
    assert producer.flush(20) == 0


def test_every_api_and_version_with_odd_values_gets_an_answer_or_a_close(agent, cluster):
    """One valid request per API, version and null pattern (tests/protocol/samples.py:
    non-default values everywhere), each on its own connection: the agent answers or
    closes, and never logs a handler crash."""
    a = agent(cluster.key)
    canary = Canary(a.bootstrap)
    host, port = a.bootstrap.rsplit(":", 1)
    answered = 0
    for number, frame in enumerate(VALID_FRAMES):
        with socket.create_connection((host, int(port)), timeout=2) as sock:
            sock.sendall(framed(frame))
            sock.settimeout(0.5)  # long polls (Fetch max_wait_ms) are left waiting
            try:
                answered += len(sock.recv(4)) == 4
            except (TimeoutError, ConnectionError):
                pass
        if number % 50 == 0:
            canary.check()
    assert answered > len(VALID_FRAMES) // 2
    assert_still_serving(a, canary)


def test_random_sasl_exchanges_never_log_anyone_in(agent, cluster):
    from virtualclusters.security.services import sasl_credential_create

    sasl_credential_create(cluster=cluster.cluster, username="alice", password="alice-password")
    a = agent(cluster.key, extra=["--require-sasl"])
    canary = Canary(a.bootstrap, ("alice", "alice-password"))

    @LIVE
    @given(
        st.sampled_from(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", ""]),
        st.lists(st.binary(max_size=200), min_size=1, max_size=3),
        st.one_of(st.none(), streams()),
    )
    def attack(mechanism, tokens, tail):
        wire = Wire(a.bootstrap)
        wire.sock.settimeout(2)
        try:
            if wire.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism})["error_code"]:
                assert wire.is_closed()
                return
            for token in tokens:
                answer = wire.call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})
                if answer["error_code"]:
                    assert answer["error_code"] == 58 and wire.is_closed()
                    return
                assert mechanism.startswith("SCRAM"), "random PLAIN tokens never log in"
            # Still mid-exchange: anything else closes the connection.
            wire.send(ApiKey.METADATA, 12, {"topics": None})
            assert wire.is_closed()
        except (ConnectionError, TimeoutError, OSError):
            pass
        finally:
            wire.sock.close()
        if tail:
            hostile(a.bootstrap, tail, 512)
        canary.check()

    attack()
    assert_still_serving(a, canary)
    assert "authenticated as User:alice" in a.logs()
    assert a.logs().count("authenticated as") == 1, "only the canary logged in"


def test_a_client_that_never_reads_is_held_back_without_hurting_others(agent, cluster):
    a = agent(cluster.key)
    canary = Canary(a.bootstrap)
    # Metadata v1 for all topics, pipelined without ever reading an answer: the agent
    # stops reading this connection once its answers back up (in-flight and write-buffer
    # bounds), instead of buffering without limit.
    metadata = framed(struct.pack(">hhihi", ApiKey.METADATA, 1, 7, -1, -1))
    greedy = Wire(a.bootstrap)
    greedy.sock.settimeout(0.5)
    sent = 0
    try:
        for _ in range(50_000):
            greedy.sock.sendall(metadata)
            sent += 1
    except (TimeoutError, OSError):
        pass  # backpressure reached this client
    canary.check()
    greedy.sock.close()
    assert sent > 100
    assert_still_serving(a, canary)


def test_oversized_frames_close_the_connection(agent, cluster):
    a = agent(cluster.key)
    canary = Canary(a.bootstrap)
    wire = Wire(a.bootstrap)
    wire.send_raw(struct.pack(">i", 2**31 - 1) + b"\0" * 1000)
    assert wire.is_closed()
    assert_still_serving(a, canary)
