"""What the S3 client signs of a PUT's body: over plain HTTP the body's SHA-256 (the
store's only check of what it received before the agent acknowledges), over TLS only the
headers (UNSIGNED-PAYLOAD: TLS protects the body in flight, and hashing it costs ~0.9 ms of
CPU per MiB); and when a PUT waits for the store's "100 Continue" before its body. The
request is caught just before it would be sent; nothing is dialled."""

import hashlib

import pytest
from botocore.awsrequest import AWSPreparedRequest

from core.storage.s3 import EXPECT_CONTINUE_MIN_BYTES, S3Store


class _Sent(Exception):
    pass


def _put_headers(endpoint: str, body: bytes, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    store = S3Store("bucket", endpoint=endpoint)
    seen: dict[str, str] = {}

    def catch(request: AWSPreparedRequest, **_: object) -> None:
        for name, value in request.headers.items():
            seen[name.lower()] = value if isinstance(value, str) else str(value, "ascii")
        raise _Sent

    store._client.meta.events.register("before-send.s3.PutObject", catch)
    with pytest.raises(_Sent):  # raised from the hook, before anything is sent
        store.put("k", body)
    return seen


def _signed_payload_of_put(endpoint: str, body: bytes, monkeypatch: pytest.MonkeyPatch) -> str:
    return _put_headers(endpoint, body, monkeypatch)["x-amz-content-sha256"]


def test_a_put_over_plain_http_signs_its_body(monkeypatch: pytest.MonkeyPatch) -> None:
    body = b"records" * 1000
    signed = _signed_payload_of_put("http://127.0.0.1:9", body, monkeypatch)
    assert signed == hashlib.sha256(body).hexdigest()


def test_a_put_over_tls_signs_its_headers_only(monkeypatch: pytest.MonkeyPatch) -> None:
    signed = _signed_payload_of_put("https://127.0.0.1:9", b"records", monkeypatch)
    assert signed == "UNSIGNED-PAYLOAD"


def test_a_segment_sized_put_sends_its_body_without_waiting_for_100_continue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    small = _put_headers("http://127.0.0.1:9", b"r" * (EXPECT_CONTINUE_MIN_BYTES - 1), monkeypatch)
    assert "expect" not in small
    large = _put_headers("http://127.0.0.1:9", b"r" * EXPECT_CONTINUE_MIN_BYTES, monkeypatch)
    assert large["expect"] == "100-continue"
