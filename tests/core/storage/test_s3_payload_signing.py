"""What a PUT tells the store about its body: the body's CRC-32C, for the store to check
before it answers, with the headers signed and the body not (UNSIGNED-PAYLOAD), over TLS and
plain HTTP alike; a store that refuses the CRC or answers without it gets each body's signed
SHA-256 instead (over plain HTTP). And when a PUT waits for the store's "100 Continue".
(The agent's PUTs from its event loop: tests/agents/test_s3_loop_puts.py, on this store.)

Headers are caught just before a request would be sent (nothing dialled), read off moto's
server, or off a small store on 127.0.0.1 that answers the way S3-compatible stores without
checksums do."""

from __future__ import annotations

import hashlib
import http.server
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from botocore.awsrequest import AWSPreparedRequest

from core.storage import open_store
from core.storage.base import StorageError
from core.storage.s3 import EXPECT_CONTINUE_MIN_BYTES, S3Store, crc32c_checksum, new_client

# CRC-32C of b"123456789" is 0xE3069283 (the check value of the Castagnoli CRC).
CHECK_BODY = b"123456789"
CHECK_CRC32C = "4waSgw=="


class _Sent(Exception):
    pass


def _catch_headers(client, seen: list[dict[str, str]], *, stop: bool) -> None:
    def catch(request: AWSPreparedRequest, **_: object) -> None:
        seen.append(
            {
                name.lower(): value if isinstance(value, str) else str(value, "ascii")
                for name, value in request.headers.items()
            }
        )
        if stop:
            raise _Sent

    client.meta.events.register("before-send.s3.PutObject", catch)


@pytest.fixture
def dummy_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


def _put_headers(endpoint: str, body: bytes) -> dict[str, str]:
    store = S3Store("bucket", endpoint=endpoint)
    seen: list[dict[str, str]] = []
    _catch_headers(store._client, seen, stop=True)
    with pytest.raises(_Sent):  # raised from the hook, before anything is sent
        store.put("k", body)
    return seen[0]


@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:9", "https://127.0.0.1:9"])
def test_a_put_sends_its_bodys_crc32c_and_signs_its_headers_only(
    endpoint: str, dummy_credentials: None
) -> None:
    headers = _put_headers(endpoint, CHECK_BODY)
    assert headers["x-amz-checksum-crc32c"] == CHECK_CRC32C
    assert headers["x-amz-sdk-checksum-algorithm"] == "CRC32C"
    assert headers["x-amz-content-sha256"] == "UNSIGNED-PAYLOAD"
    assert "x-amz-checksum-crc32c" in headers["authorization"]  # a signed header


def test_without_crc32c_a_put_signs_its_body_over_plain_http_and_not_over_tls(
    dummy_credentials: None,
) -> None:
    body = b"records" * 1000
    for endpoint, signed in [
        ("http://127.0.0.1:9", hashlib.sha256(body).hexdigest()),
        ("https://127.0.0.1:9", "UNSIGNED-PAYLOAD"),
    ]:
        client = new_client("us-east-1", endpoint, crc32c_puts=False)
        seen: list[dict[str, str]] = []
        _catch_headers(client, seen, stop=True)
        with pytest.raises(_Sent):
            client.put_object(Bucket="bucket", Key="k", Body=body)
        assert seen[0]["x-amz-content-sha256"] == signed
        assert "x-amz-checksum-crc32c" not in seen[0]


def test_a_segment_sized_put_sends_its_body_without_waiting_for_100_continue(
    dummy_credentials: None,
) -> None:
    small = _put_headers("http://127.0.0.1:9", b"r" * (EXPECT_CONTINUE_MIN_BYTES - 1))
    assert "expect" not in small
    large = _put_headers("http://127.0.0.1:9", b"r" * EXPECT_CONTINUE_MIN_BYTES)
    assert large["expect"] == "100-continue"


def test_moto_keeps_the_crc32c_and_every_put_goes_on_sending_it(moto_s3_url: str) -> None:
    store = open_store(f"{moto_s3_url}&prefix=crc32c-puts")
    assert isinstance(store, S3Store)
    seen: list[dict[str, str]] = []
    _catch_headers(store._client, seen, stop=False)
    store.put("first", CHECK_BODY)
    store.put("second", b"more records")
    assert [h.get("x-amz-content-sha256") for h in seen] == ["UNSIGNED-PAYLOAD"] * 2
    head = store._client.head_object(
        Bucket=store.bucket, Key=store.prefix + "first", ChecksumMode="ENABLED"
    )
    assert head["ChecksumCRC32C"] == CHECK_CRC32C
    assert store.get("first") == CHECK_BODY


# --- a store without checksums -------------------------------------------------------


@dataclass
class _Store:
    """PUTs carrying `x-amz-checksum-crc32c` are answered as `mode` says: "refuse" (an
    error `code`), "ignore" (200 without echoing the checksum), "bad-digest" (S3's answer
    to a body that does not match it), "check" (stored, the checksum echoed, as S3 does),
    "fail-first" (the first PUT answered 500 InternalError, later ones as "check"). Every
    other PUT is stored."""

    mode: str
    code: tuple[int, str] = (501, "NotImplemented")
    requests: list[dict[str, str]] = field(default_factory=list)
    objects: dict[str, bytes] = field(default_factory=dict)
    endpoint: str = ""


def _handler(store: _Store) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_PUT(self) -> None:  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers["Content-Length"]))
            headers = {name.lower(): value for name, value in self.headers.items()}
            store.requests.append(headers)
            if store.mode == "fail-first" and len(store.requests) == 1:
                self.send_response(500)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            crc = headers.get("x-amz-checksum-crc32c")
            checks = store.mode in ("check", "fail-first")
            matches = crc == crc32c_checksum(body)["ChecksumCRC32C"]
            if crc is not None and store.mode != "ignore" and not (checks and matches):
                status, code = store.code if store.mode == "refuse" else (400, "BadDigest")
                message = (
                    "The Content-MD5 or checksum value that you specified did not match"
                    if code == "BadDigest"
                    else "Header 'x-amz-checksum-crc32c' with a checksum is not implemented"
                )
                answer = (
                    f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                    f"<Message>{message}</Message></Error>"
                ).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
                return
            store.objects[self.path] = body
            self.send_response(200)
            self.send_header("ETag", f'"{hashlib.md5(body).hexdigest()}"')  # noqa: S324
            if checks and crc is not None:
                self.send_header("x-amz-checksum-crc32c", crc)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_: object) -> None:
            pass

    return Handler


@pytest.fixture
def store_without_checksums(dummy_credentials: None) -> Iterator[_Store]:
    store = _Store(mode="refuse")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(store))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    store.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield store
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.mark.parametrize(
    ("mode", "code"),
    [
        ("refuse", (501, "NotImplemented")),
        ("refuse", (400, "InvalidArgument")),
        ("ignore", (200, "")),
    ],
)
def test_a_store_that_does_not_check_the_crc32c_gets_each_bodys_signed_sha256(
    store_without_checksums: _Store,
    mode: str,
    code: tuple[int, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = store_without_checksums
    fake.mode, fake.code = mode, code
    store = S3Store("bucket", endpoint=fake.endpoint)
    first, second = b"first records" * 100, b"second records" * 100
    with caplog.at_level(logging.WARNING, logger="core.storage.s3"):
        store.put("one", first)
        store.put("two", second)
    # The first PUT with its CRC, not checked; sent again signed; the next signed at once.
    assert [r.get("x-amz-checksum-crc32c") is not None for r in fake.requests] == [
        True,
        False,
        False,
    ]
    assert [r["x-amz-content-sha256"] for r in fake.requests] == [
        "UNSIGNED-PAYLOAD",
        hashlib.sha256(first).hexdigest(),
        hashlib.sha256(second).hexdigest(),
    ]
    assert fake.objects == {"/bucket/one": first, "/bucket/two": second}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "did not check a PUT's CRC-32C" in warnings[0]


def test_a_body_the_store_finds_damaged_is_an_error_and_checking_goes_on(
    store_without_checksums: _Store,
) -> None:
    fake = store_without_checksums
    fake.mode = "bad-digest"
    store = S3Store("bucket", endpoint=fake.endpoint)
    with pytest.raises(StorageError, match="BadDigest"):
        store.put("one", b"records")
    with pytest.raises(StorageError, match="BadDigest"):
        store.put("two", b"records")
    assert all("x-amz-checksum-crc32c" in r for r in fake.requests)
    assert fake.objects == {}
