"""The SASL state machine over raw sockets: what an unauthenticated or misbehaving client
gets (an error code, a closed connection) — and that nobody else notices."""

from __future__ import annotations

import struct

import pytest

from core.kafka import ApiKey, ErrorCode
from tests.agents.test_wire import Wire

pytestmark = [pytest.mark.kafka, pytest.mark.django_db(transaction=True)]
SASL = ["--require-sasl"]
METADATA_ALL = {"topics": None, "allow_auto_topic_creation": False}


def login(wire: Wire, user: str, password: str, mechanism: str = "PLAIN") -> dict:
    handshake = wire.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism})
    assert handshake["error_code"] == 0
    assert handshake["mechanisms"] == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    token = b"\0" + user.encode() + b"\0" + password.encode()
    return wire.call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})


def test_only_api_versions_and_sasl_are_served_before_login(agent, secure_cluster):
    a = agent(secure_cluster.key, extra=SASL)
    wire = Wire(a.bootstrap)
    versions = wire.call(
        ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
    )
    served = {k["api_key"] for k in versions["api_keys"]}
    assert {ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE, ApiKey.CREATE_ACLS} <= served
    wire.send(ApiKey.METADATA, 12, METADATA_ALL)
    assert wire.is_closed()
    assert "METADATA before SASL authentication" in a.logs()


def test_a_login_lets_requests_through(agent, secure_cluster):
    secure_cluster.user("alice", "alice-password")
    a = agent(secure_cluster.key, extra=SASL)
    wire = Wire(a.bootstrap)
    answer = login(wire, "alice", "alice-password")
    assert answer["error_code"] == 0 and answer["session_lifetime_ms"] == 0
    assert 'floe_sasl_authentications_total{mechanism="PLAIN",outcome="ok"} 1' in a.metrics()
    assert wire.call(ApiKey.METADATA, 12, METADATA_ALL)["brokers"]
    # Once logged in, a second handshake is refused (no re-authentication offered).
    wire.send(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
    assert wire.receive()[1]["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
    assert wire.is_closed()


def test_a_wrong_password_gets_sasl_authentication_failed_then_a_closed_connection(
    agent, secure_cluster
):
    secure_cluster.user("alice", "alice-password")
    a = agent(secure_cluster.key, extra=SASL)
    wire = Wire(a.bootstrap)
    answer = login(wire, "alice", "guess")
    assert answer["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "invalid credentials" in answer["error_message"]
    assert wire.is_closed()
    assert "wrong password for 'alice'" in a.logs()
    assert 'floe_sasl_authentications_total{mechanism="PLAIN",outcome="failed"} 1' in a.metrics()


@pytest.mark.parametrize(
    "steps, error",
    [
        (
            [(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "GSSAPI"})],
            ErrorCode.UNSUPPORTED_SASL_MECHANISM,
        ),
        ([(ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\0a\0b"})], ErrorCode.ILLEGAL_SASL_STATE),
        (
            [
                (ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "SCRAM-SHA-256"}),
                (ApiKey.SASL_AUTHENTICATE, 0, {"auth_bytes": b"garbage"}),
            ],
            ErrorCode.SASL_AUTHENTICATION_FAILED,
        ),
    ],
)
def test_protocol_mistakes_get_an_error_and_a_closed_connection(
    agent, secure_cluster, steps, error
):
    a = agent(secure_cluster.key, extra=SASL)
    wire = Wire(a.bootstrap)
    for api_key, version, body in steps[:-1]:
        assert wire.call(api_key, version, body)["error_code"] == 0
    api_key, version, body = steps[-1]
    wire.send(api_key, version, body)
    assert wire.receive()[1]["error_code"] == error
    assert wire.is_closed()
    other = Wire(a.bootstrap)  # the agent carries on
    assert other.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0


def test_frames_before_login_are_limited_to_512_kib(agent, secure_cluster):
    a = agent(secure_cluster.key, extra=SASL)
    wire = Wire(a.bootstrap)
    wire.send_raw(struct.pack(">i", 600 * 1024) + b"\0" * 1024)
    assert wire.is_closed()


def test_without_require_sasl_logging_in_is_optional(agent, secure_cluster):
    secure_cluster.user("alice", "alice-password")
    a = agent(secure_cluster.key)
    anonymous = Wire(a.bootstrap)
    assert anonymous.call(ApiKey.METADATA, 12, METADATA_ALL)["brokers"]
    named = Wire(a.bootstrap)
    assert login(named, "alice", "alice-password")["error_code"] == 0
    assert named.call(ApiKey.METADATA, 12, METADATA_ALL)["brokers"]
