"""Small S3 PUTs sent from the agent's event loop (aiohttp), not from a put thread.

A lightning topic at a 5 ms flush age has its agent PUT ~200 small files a second, each on
a producer's acknowledgement path. From the write path's threads each cost two hops (the
loop hands the segment to a thread, the thread hands the answer back, each waiting for
the GIL behind the others) and botocore's 1.3 ms of CPU; from the loop, 0.84 ms and no hop
(measured: docs/ARCHITECTURE.md, "Lightning topics").

This path only ever takes the PUTs it is sure of: the body's CRC-32C sent, the headers
signed with botocore's own SigV4 signer (UNSIGNED-PAYLOAD, as `S3Store.put` signs them),
the store's answer a 200 echoing that CRC (it checked the body). Anything else — an error
status, a connection that fails or a PUT that times out, credentials due for a refresh,
a store that does not echo the CRC — and the caller PUTs the body through `S3Store.put`
instead, whose botocore client retries, refreshes, and tells a refusal from a damaged
body. After a failure the path rests `REST_S` so a failing store is not asked twice for
every PUT.
"""

from __future__ import annotations

import logging
import os
import ssl
import time
import urllib.request
from typing import Any
from urllib.parse import quote, urlsplit

import aiohttp
import botocore.httpsession
import yarl
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config

from core.storage.base import ObjectStore
from core.storage.s3 import S3Store, crc32c_checksum

# Bodies up to this size go from the loop; larger ones are sent from a thread, where their
# bytes do not hold the loop (a 4 MiB segment is milliseconds of socket copies). The write
# path lays out on the loop only segments this small (`SegmentWriter._write`).
LOOP_PUT_MAX_BYTES = 1024 * 1024
# A PUT from the loop that has not been answered in this long is given up (and sent from
# a thread, by botocore, with its own timeouts and retries).
TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 3.0
# After a PUT from the loop fails, PUTs go through threads for this long.
REST_S = 10.0

# What `S3SigV4Auth` reads to sign a PUT's headers only, over plain HTTP too (see
# `core/storage/s3.py` on why the CRC-32C is enough).
_UNSIGNED_PAYLOAD = Config(s3={"payload_signing_enabled": False})

log = logging.getLogger(__name__)


class LoopPuts:
    """One store's PUTs from the event loop (created and used on one loop)."""

    def __init__(self, store: S3Store) -> None:
        self._store = store
        self._credentials: Any = store.credentials
        self._session: aiohttp.ClientSession | None = None
        self._base: str | None = None
        self._resting_until = float("-inf")

    @staticmethod
    def for_store(store: ObjectStore) -> LoopPuts | None:
        """The loop PUTs of `store` (or of the store `CountingStore` wraps) when it is S3."""
        inner = getattr(store, "inner", store)
        return LoopPuts(inner) if isinstance(inner, S3Store) else None

    async def put(self, key: str, body: bytes | bytearray) -> bool:
        """True when `body` is in the bucket under `key`, checked by the store; False
        when the caller is to send it through `S3Store.put` (module docstring)."""
        if len(body) > LOOP_PUT_MAX_BYTES or self._store.signs_bodies:
            return False
        if time.monotonic() < self._resting_until or not self._fresh_credentials():
            return False
        try:
            return await self._put(key, body)
        except Exception as exc:  # any failure: the caller's thread PUT decides
            self._rest(f"{type(exc).__name__}: {exc}")
            return False

    def _fresh_credentials(self) -> bool:
        # A refresh (an instance role's, an SSO token's) is network I/O: botocore does it
        # in the thread the next PUT runs in, not here on the loop.
        if self._credentials is None:
            return False
        refresh_needed = getattr(self._credentials, "refresh_needed", None)
        return not (refresh_needed is not None and refresh_needed())

    async def _put(self, key: str, body: bytes | bytearray) -> bool:
        url = self._url(key)
        if url is None:
            return False
        checksum = crc32c_checksum(body)["ChecksumCRC32C"]
        request = AWSRequest(
            method="PUT",
            url=url,
            data=body,
            headers={
                "x-amz-checksum-crc32c": checksum,
                "x-amz-sdk-checksum-algorithm": "CRC32C",
                "x-amz-content-sha256": "UNSIGNED-PAYLOAD",
                "Content-Length": str(len(body)),
            },
        )
        request.context["client_config"] = _UNSIGNED_PAYLOAD  # the CRC stands for the body
        S3SigV4Auth(
            self._credentials.get_frozen_credentials(), "s3", self._store.signing_region
        ).add_auth(request)
        async with self._get_session().put(
            yarl.URL(url, encoded=True),  # sent as signed, not re-quoted
            data=body,
            headers=dict(request.headers.items()),
        ) as response:
            await response.read()
            if response.status != 200:
                self._rest(f"HTTP {response.status}")
                return False
            if response.headers.get("x-amz-checksum-crc32c") != checksum:
                # Stored, but not checked: sent again by the caller, signed.
                self._store.stop_crc32c_puts("answered without it")
                return False
            return True

    def _url(self, key: str) -> str | None:
        """The PUT URL of `key`, or None when this store's PUTs are not to come here."""
        if self._base is None:
            self._base = self._learn_base()
        return self._base + quote(self._store.full_key(key), safe="/~") if self._base else None

    def _learn_base(self) -> str:
        """The bucket's URL, from a presigned one (botocore's own endpoint rules: path or
        virtual-hosted style, the region's host), or "" when PUTs are not to come here:
        a store behind a proxy (HTTPS_PROXY …), whose rules botocore follows."""
        probe = quote(self._store.full_key("floe-probe"), safe="/~")
        parts = urlsplit(self._store.presign_put("floe-probe"))
        if not parts.path.endswith(probe):
            log.warning(
                "%s: unexpected PUT URL %s://%s%s; PUTs go through threads",
                self._store.url,
                parts.scheme,
                parts.netloc,
                parts.path,  # not the query: it holds a signature
            )
            return ""
        proxies = urllib.request.getproxies()
        if proxies.get(parts.scheme) and not urllib.request.proxy_bypass(parts.hostname or ""):
            log.info("%s is reached through a proxy: PUTs go through threads", self._store.url)
            return ""
        return f"{parts.scheme}://{parts.netloc}{parts.path[: -len(probe)]}"

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            # botocore's CA bundle (AWS_CA_BUNDLE, else certifi's). Behind a proxy
            # (HTTPS_PROXY …; botocore's to follow) PUTs never come here (`_url`).
            cafile = os.environ.get("AWS_CA_BUNDLE") or botocore.httpsession.get_cert_path(True)
            context = ssl.create_default_context(cafile=cafile if isinstance(cafile, str) else None)
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=64, ssl=context, keepalive_timeout=30),
                timeout=aiohttp.ClientTimeout(total=TIMEOUT_S, connect=CONNECT_TIMEOUT_S),
                skip_auto_headers=("Content-Type",),
            )
        return self._session

    def _rest(self, why: str) -> None:
        self._resting_until = time.monotonic() + REST_S
        log.warning(
            "%s: a PUT from the event loop failed (%s); PUTs go through threads for %.0fs",
            self._store.url,
            why,
            REST_S,
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
