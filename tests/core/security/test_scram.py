"""SCRAM and PLAIN server side: RFC 7677's example, a real client, and hostile messages."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.net.sasl.scram import ScramClient

from core.security.scram import (
    MECHANISMS,
    ScramError,
    ScramServer,
    parse_plain,
    plain_hash,
    plain_verify,
    scram_credential,
)

RFC_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = RFC_NONCE + "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"


def test_it_reproduces_the_rfc_7677_example_exchange():
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    verifier = scram_credential("pencil", "SCRAM-SHA-256", iterations=4096, salt=salt)
    server = ScramServer("SCRAM-SHA-256")
    assert server.client_first(f"n,,n=user,r={RFC_NONCE}".encode()) == "user"
    server._nonce = RFC_SERVER_NONCE  # the RFC's fixed server nonce
    assert server.server_first(verifier) == (
        f"r={RFC_SERVER_NONCE},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".encode()
    )
    final = server.client_final(
        f"c=biws,r={RFC_SERVER_NONCE},p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=".encode()
    )
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def exchange(mechanism: str, stored_password: str, client_password: str, user="alice"):
    client = ScramClient(user, client_password, mechanism)
    server = ScramServer(mechanism)
    assert server.client_first(client.first_message()) == user
    client.process_server_first_message(
        server.server_first(
            scram_credential(stored_password, mechanism) if stored_password else None
        )
    )
    final = server.client_final(client.final_message())
    client.process_server_final_message(final)  # the client checks the server's signature


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_a_real_client_logs_in_with_the_right_password_only(mechanism):
    exchange(mechanism, "s3cret pässword", "s3cret pässword")
    with pytest.raises(ScramError, match="invalid credentials"):
        exchange(mechanism, "s3cret pässword", "wrong")


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_an_unknown_user_gets_a_decoy_challenge_and_fails_at_the_end(mechanism):
    with pytest.raises(ScramError, match="invalid credentials"):
        exchange(mechanism, "", "anything", user="nobody")


def test_librdkafkas_doubled_nonce_is_accepted_and_no_other_form():
    """librdkafka before 2.6.1 (kcat 1.7) echoes client nonce + server nonce."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    verifier = scram_credential("pencil", "SCRAM-SHA-256", iterations=4096, salt=salt)

    def final_with(nonce: str, password: str = "pencil") -> bytes:
        server = ScramServer("SCRAM-SHA-256")
        server.client_first(f"n,,n=user,r={RFC_NONCE}".encode())
        server._nonce = RFC_SERVER_NONCE
        server_first = server.server_first(verifier).decode()
        without_proof = f"c=biws,r={nonce}"
        salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, 4096)
        client_key = hmac.new(salted, b"Client Key", "sha256").digest()
        stored = hashlib.sha256(client_key).digest()
        auth = f"n=user,r={RFC_NONCE},{server_first},{without_proof}".encode()
        signature = hmac.new(stored, auth, "sha256").digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        return server.client_final(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())

    assert final_with(RFC_SERVER_NONCE).startswith(b"v=")  # RFC 5802
    assert final_with(RFC_NONCE + RFC_SERVER_NONCE).startswith(b"v=")  # librdkafka < 2.6.1
    for wrong in (RFC_NONCE, RFC_SERVER_NONCE + "x", "x" + RFC_SERVER_NONCE):
        with pytest.raises(ScramError, match="nonce mismatch"):
            final_with(wrong)
    with pytest.raises(ScramError, match="invalid credentials"):
        final_with(RFC_NONCE + RFC_SERVER_NONCE, password="wrong")


def test_verifiers_do_not_contain_the_password():
    verifier = scram_credential("hunter2-hunter2", "SCRAM-SHA-512")
    assert set(verifier) == {"salt", "iterations", "stored_key", "server_key"}
    assert "hunter2" not in str(verifier) and "hunter2" not in plain_hash("hunter2-hunter2")


def test_plain_hash_checks_passwords():
    stored = plain_hash("correct horse")
    assert plain_verify("correct horse", stored)
    assert not plain_verify("correct horsf", stored)
    assert not plain_verify("correct horse", "md5$1$x$y")
    assert not plain_verify("correct horse", "garbage")


def test_plain_messages_are_parsed_as_rfc_4616_says():
    assert parse_plain(b"\0alice\0pw") == ("alice", "pw")
    assert parse_plain(b"alice\0alice\0pw") == ("alice", "pw")
    for bad in (b"alice\0pw", b"bob\0alice\0pw", b"\0\0pw", b"\0alice\0", b"\0\xff\0pw"):
        with pytest.raises(ScramError):
            parse_plain(bad)


@pytest.mark.parametrize(
    "message",
    [
        b"p=tls-unique,,n=a,r=x",  # channel binding
        b"n,,r=x,n=a",  # attributes out of order
        b"n,,n=a=2Xb,r=x",  # bad saslname escape
        b"n,a=bob,n=alice,r=x",  # impersonation
        b"n,,n=a,r=x,tokenauth=true",  # delegation token
        b"n,,n=,r=x",
        b"n,,n=a,r=x\xff",
        b"x" * 5000,
    ],
)
def test_bad_client_first_messages_are_refused(message):
    with pytest.raises(ScramError):
        ScramServer("SCRAM-SHA-256").client_first(message)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.binary(max_size=300))
def test_random_messages_only_ever_raise_scram_error(first, final):
    server = ScramServer("SCRAM-SHA-512")
    try:
        server.client_first(first)
        server.server_first(scram_credential("pw-pw-pw-pw", "SCRAM-SHA-512", iterations=4096))
        server.client_final(final)
    except ScramError:
        return
    raise AssertionError("random bytes authenticated")
