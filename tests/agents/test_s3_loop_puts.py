"""The agent's small S3 PUTs from its event loop (agents/s3_loop_puts.py): signed as a
store would check them, the CRC-32C checked by the store, and everything the loop is not
sure of left to the put thread — on moto's server and on a store on 127.0.0.1 that
answers as S3-compatible stores do (tests/core/storage/test_s3_payload_signing.py)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
from datetime import UTC, datetime, timedelta

import pytest
from botocore.credentials import RefreshableCredentials

from agents.s3_loop_puts import LOOP_PUT_MAX_BYTES, LoopPuts
from core.storage import open_store
from core.storage.s3 import S3Store, crc32c_checksum
from tests.core.storage.test_s3_payload_signing import (  # noqa: F401 - fixtures
    CHECK_BODY,
    CHECK_CRC32C,
    _catch_headers,
    _Store,
    dummy_credentials,
    store_without_checksums,
)
from tests.fixtures_s3 import moto_s3_url  # noqa: F401 - a fixture


def _sigv4_signature_holds(request: dict[str, str], path: str, secret: str) -> bool:
    """What S3 checks of a request signed with AWS Signature V4 (header form), rebuilt from
    what arrived — the path as sent, the headers named signed — not from our signer."""
    auth = request["authorization"]
    fields = dict(part.strip().split("=", 1) for part in auth.split(" ", 1)[1].split(","))
    access_key, date, region, service, _ = fields["Credential"].split("/")
    signed = fields["SignedHeaders"].split(";")
    canonical = "\n".join(
        [
            "PUT",
            path,
            "",
            *(f"{name}:{' '.join(request[name].split())}" for name in signed),
            "",
            fields["SignedHeaders"],
            request["x-amz-content-sha256"],
        ]
    )
    scope = f"{date}/{region}/{service}/aws4_request"
    to_sign = "\n".join(
        [
            "AWS4-HMAC-SHA256",
            request["x-amz-date"],
            scope,
            hashlib.sha256(canonical.encode()).hexdigest(),
        ]
    )
    key = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return access_key == "testing" and hmac.compare_digest(expected, fields["Signature"])


def _put_all(puts: LoopPuts, items: list[tuple[str, bytes]]) -> list[bool]:
    """Each (key, body) through `puts`, one after another, on a fresh event loop; its
    connections closed after."""

    async def run() -> list[bool]:
        try:
            return [await puts.put(key, body) for key, body in items]
        finally:
            await puts.close()

    return asyncio.run(run())


def test_a_small_put_from_the_event_loop_is_signed_checked_and_stored(
    store_without_checksums: _Store,  # noqa: F811
) -> None:
    fake = store_without_checksums
    fake.mode = "check"
    puts = LoopPuts(S3Store("bucket", endpoint=fake.endpoint, prefix="p re"))
    key = "seg ments/a+b=c,ü.seg"

    assert _put_all(puts, [(key, CHECK_BODY)]) == [True]
    [request] = fake.requests
    path = "/bucket/p%20re/seg%20ments/a%2Bb%3Dc%2C%C3%BC.seg"
    assert fake.objects == {path: CHECK_BODY}
    assert request["x-amz-checksum-crc32c"] == CHECK_CRC32C
    assert request["x-amz-content-sha256"] == "UNSIGNED-PAYLOAD"
    assert "x-amz-checksum-crc32c" in request["authorization"]  # a signed header
    assert _sigv4_signature_holds(request, path, "testing")
    assert not _sigv4_signature_holds(request, path, "another secret")


def test_moto_takes_puts_from_the_event_loop_with_their_crc32c(moto_s3_url: str) -> None:  # noqa: F811
    store = open_store(f"{moto_s3_url}&prefix=loop-puts")
    assert isinstance(store, S3Store)
    puts = LoopPuts(store)
    seen: list[dict[str, str]] = []
    _catch_headers(store._client, seen, stop=True)  # botocore sends no PUT

    assert _put_all(puts, [(f"k{n}", b"records %d" % n) for n in range(3)]) == [True] * 3
    assert seen == []
    assert [store.get(f"k{n}") for n in range(3)] == [b"records %d" % n for n in range(3)]
    head = store._client.head_object(
        Bucket=store.bucket, Key=store.prefix + "k0", ChecksumMode="ENABLED"
    )
    assert head["ChecksumCRC32C"] == crc32c_checksum(b"records 0")["ChecksumCRC32C"]


@pytest.mark.parametrize("mode", ["ignore", "refuse"])
def test_a_store_that_does_not_check_the_crc32c_gets_puts_from_threads_signed(
    store_without_checksums: _Store,  # noqa: F811
    mode: str,
) -> None:
    """The loop's PUT is declined (the caller PUTs the body with `put`, as the write path
    does), and from then on every PUT, signed."""
    fake = store_without_checksums
    fake.mode = mode
    store = S3Store("bucket", endpoint=fake.endpoint)
    puts = LoopPuts(store)

    async def put(key: str, body: bytes) -> None:
        if not await puts.put(key, body):
            await asyncio.get_running_loop().run_in_executor(None, store.put, key, body)

    async def both() -> None:
        try:
            await put("one", b"first")
            await put("two", b"second")
        finally:
            await puts.close()

    asyncio.run(both())
    assert fake.objects == {"/bucket/one": b"first", "/bucket/two": b"second"}
    last = fake.requests[-2:]
    assert [r["x-amz-content-sha256"] for r in last] == [
        hashlib.sha256(b"first").hexdigest(),
        hashlib.sha256(b"second").hexdigest(),
    ]
    assert "x-amz-checksum-crc32c" not in fake.requests[-1]
    assert store.signs_bodies


def test_after_a_failed_put_from_the_loop_puts_go_through_threads_for_a_while(
    store_without_checksums: _Store,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = store_without_checksums
    fake.mode = "fail-first"
    puts = LoopPuts(S3Store("bucket", endpoint=fake.endpoint))
    with caplog.at_level(logging.WARNING, logger="agents.s3_loop_puts"):
        assert _put_all(puts, [("k", b"records")] * 2) == [False, False]
    assert len(fake.requests) == 1  # the second was declined without asking the store
    assert fake.objects == {}
    assert any("HTTP 500" in r.getMessage() for r in caplog.records)


def test_what_a_put_from_the_loop_declines_without_asking_the_store(
    store_without_checksums: _Store,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = store_without_checksums
    fake.mode = "check"
    big = b"x" * (LOOP_PUT_MAX_BYTES + 1)
    assert _put_all(LoopPuts(S3Store("bucket", endpoint=fake.endpoint)), [("k", big)]) == [False]
    # Credentials due for a refresh: botocore refreshes them in a thread.
    stale = S3Store("bucket", endpoint=fake.endpoint)
    stale.credentials = RefreshableCredentials.create_from_metadata(
        {
            "access_key": "testing",
            "secret_key": "testing",
            "token": None,
            "expiry_time": (datetime.now(UTC) + timedelta(seconds=30)).isoformat(),
        },
        refresh_using=lambda: {},
        method="test",
    )
    assert _put_all(LoopPuts(stale), [("k", b"records")]) == [False]
    # A store behind a proxy: botocore follows the proxy rules.
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    proxied = LoopPuts(S3Store("bucket", endpoint=fake.endpoint))
    assert _put_all(proxied, [("k", b"records")]) == [False]
    assert fake.requests == []
