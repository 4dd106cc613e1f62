"""`s3://bucket?region=&endpoint=&prefix=`: AWS S3 or any S3-compatible store (MinIO, R2, moto).

Credentials come from boto3's usual chain (environment, shared files, instance role).
One boto3 client per store, created up front: clients are thread-safe, sessions are not.

Every PUT carries its body's CRC-32C (`x-amz-checksum-crc32c`, ~0.04 ms of CPU per MiB)
and signs its headers only (UNSIGNED-PAYLOAD), over TLS and plain HTTP alike: the store
checks the body it received against the CRC before it answers (S3 and MinIO do; a
mismatch is an error, `BadDigest`, and the PUT is retried), so an agent acknowledges only
what arrived whole. That is the check a signed SHA-256 of the body made over plain HTTP,
at a fifteenth of its CPU (0.58 ms per MiB measured here; a fifth of the agent's CPU
while producing). What the SHA-256 added besides — a body an on-path attacker cannot
change — plain HTTP does not give anyway: a GET's answer is not signed. A store that
refuses the header, or answers without echoing it (it did not check it), is sent each
body's signed SHA-256 instead from then on (over TLS: UNSIGNED-PAYLOAD, as before), and
the unchecked PUT is sent again so.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, cast
from urllib.parse import urlencode

import boto3
import botocore.loaders
import botocore.session
import botocore.utils
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from crc32c import crc32c

from core.storage.base import (
    ObjectInfo,
    ObjectNotFound,
    ObjectStore,
    StorageError,
    check_key,
    check_prefix,
    check_range,
)

DEFAULT_REGION = "us-east-1"
# DeleteObjects takes at most 1000 keys per call.
DELETE_BATCH = 1000
# ListObjectsV2 returns at most 1000 keys per page; tests shrink this to see paging work.
LIST_PAGE_SIZE = 1000
_NOT_FOUND_CODES = frozenset({"NoSuchKey", "404", "NotFound"})
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+)")
# A PUT of a body this large or larger asks the store first ("Expect: 100-continue"), so a
# refused one (credentials, a redirect) is not sent whole; a smaller one is sent at once.
# botocore asks for every body, and waiting for the store's "100 Continue" costs a round
# trip a PUT: a segment's PUT, on every produce's path. (AWS's Go SDK asks from 2 MiB.)
EXPECT_CONTINUE_MIN_BYTES = 2 * 1024 * 1024
# How a store that does not know `x-amz-checksum-crc32c` refuses it (NotImplemented,
# InvalidArgument or InvalidRequest, its message naming the checksum). BadDigest —
# the body did not match its CRC — is not a refusal: it is a damaged PUT, retried as one.
_CHECKSUM_REFUSALS = frozenset({"NotImplemented", "InvalidArgument", "InvalidRequest"})

log = logging.getLogger(__name__)


# Parsing botocore's service models costs ~0.1 s per session; the loader caches them and
# is shared by every store's session (each store still gets its own session and client).
_MODEL_LOADER = botocore.loaders.create_loader()


def _new_session() -> boto3.session.Session:
    core = botocore.session.get_session()
    core.register_component("data_loader", _MODEL_LOADER)
    return boto3.session.Session(botocore_session=core)


def new_client(
    region: str,
    endpoint: str | None,
    *,
    crc32c_puts: bool = True,
    session: boto3.session.Session | None = None,
) -> Any:
    """The boto3 S3 client a store uses (thread-safe; one per store; from `session`, else
    a new one). With `crc32c_puts` its PUTs (`put_object(**crc32c_checksum(body))`) sign
    their headers only; without, a PUT over plain HTTP signs its body's SHA-256
    (botocore's rule), over TLS its headers."""
    options: dict[str, Any] = {
        "max_pool_connections": 64,
        "retries": {"mode": "standard"},
    }
    if endpoint:
        # S3-compatible stores are reached by path (http://host/bucket/key), and many
        # reject the checksums botocore adds by default (CRC32 in an aws-chunked
        # trailer); segments carry their own CRCs (each batch's CRC-32C, the footer's).
        options["s3"] = {
            "addressing_style": "path",
            "payload_signing_enabled": (
                not crc32c_puts and not endpoint.lower().startswith("https://")
            ),
        }
        options["request_checksum_calculation"] = "when_required"
        options["response_checksum_validation"] = "when_required"
    client = (session or _new_session()).client(
        "s3", region_name=region, endpoint_url=endpoint or None, config=Config(**options)
    )
    # After botocore's own handler, which has every body with a `read` wait for the
    # store's "100 Continue".
    client.meta.events.register_last("before-call.s3", _send_small_bodies_at_once)
    return client


def _send_small_bodies_at_once(params: dict[str, Any], **_: Any) -> None:
    length = botocore.utils.determine_content_length(params.get("body"))
    if length is not None and length < EXPECT_CONTINUE_MIN_BYTES:
        params["headers"].pop("Expect", None)


def crc32c_checksum(body: bytes | bytearray) -> dict[str, str]:
    """put_object's arguments that send `body`'s CRC-32C for the store to check."""
    digest = base64.b64encode(crc32c(body).to_bytes(4, "big")).decode("ascii")
    return {"ChecksumAlgorithm": "CRC32C", "ChecksumCRC32C": digest}


def _refuses_checksum(exc: ClientError) -> bool:
    message = str(exc.response.get("Error", {}).get("Message", ""))
    return _code(exc) in _CHECKSUM_REFUSALS and "checksum" in message.lower()


class S3Store(ObjectStore):
    def __init__(
        self,
        bucket: str,
        *,
        region: str = DEFAULT_REGION,
        endpoint: str | None = None,
        prefix: str = "",
    ) -> None:
        if not bucket:
            raise ValueError("s3:// URL needs a bucket, e.g. s3://my-bucket?region=us-east-1")
        prefix = prefix.strip("/")
        if prefix:
            check_prefix(prefix + "/")
            prefix += "/"
        self.bucket = bucket
        self.region = region
        self.endpoint = endpoint
        self.prefix = prefix
        self.url = _canonical_url(bucket, region, endpoint, prefix)

        try:
            session = _new_session()
            self._client = new_client(region, endpoint, session=session)
            # What the agent's PUTs from its event loop sign with (agents/s3_loop_puts.py).
            self.credentials: Any = session.get_credentials()
        except BotoCoreError as exc:
            raise StorageError(f"cannot create S3 client for {self.url}: {exc}") from exc
        # None until the store refuses or ignores a PUT's CRC-32C; from then on the client
        # every PUT goes through, signing each body's SHA-256 over plain HTTP.
        self._signing_client: Any = None
        self._signing_lock = threading.Lock()

    def full_key(self, key: str) -> str:
        """`key` as named in the bucket (the store's prefix before it)."""
        return self.prefix + check_key(key)

    @property
    def signs_bodies(self) -> bool:
        """The store did not check a PUT's CRC-32C: PUTs sign their bodies instead."""
        return self._signing_client is not None

    @property
    def signing_region(self) -> str:
        region: str = self._client.meta.region_name
        return region

    def presign_put(self, key: str) -> str:
        """A presigned PUT URL for `key` (botocore's addressing of this bucket)."""
        url: str = self._client.generate_presigned_url(
            "put_object", Params={"Bucket": self.bucket, "Key": self.full_key(key)}, ExpiresIn=60
        )
        return url

    def put(self, key: str, data: bytes | bytearray | memoryview) -> None:
        # botocore sends a bytearray as it sends bytes (its stubs name bytes only): no copy.
        body = cast(bytes, data) if isinstance(data, bytes | bytearray) else bytes(data)
        with self._errors(key):
            client = self._signing_client
            if client is None:
                checksum = crc32c_checksum(body)
                try:
                    response = self._client.put_object(
                        Bucket=self.bucket, Key=self.full_key(key), Body=body, **checksum
                    )
                except ClientError as exc:
                    if not _refuses_checksum(exc):
                        raise
                    client = self.stop_crc32c_puts(f"refused it: {exc}")
                else:
                    if response.get("ChecksumCRC32C") == checksum["ChecksumCRC32C"]:
                        return
                    client = self.stop_crc32c_puts("answered without it")  # and this PUT again
            client.put_object(Bucket=self.bucket, Key=self.full_key(key), Body=body)

    def stop_crc32c_puts(self, why: str) -> Any:
        """The client that signs bodies, made (and the switch logged) once."""
        with self._signing_lock:
            if self._signing_client is None:
                self._signing_client = new_client(self.region, self.endpoint, crc32c_puts=False)
                log.warning(
                    "%s did not check a PUT's CRC-32C (x-amz-checksum-crc32c): it %s; "
                    "PUTs sign their bodies' SHA-256 instead (over TLS: their headers only)",
                    self.url,
                    why,
                )
            return self._signing_client

    def get(self, key: str) -> bytes:
        with self._errors(key):
            response = self._client.get_object(Bucket=self.bucket, Key=self.full_key(key))
            return _read_body(response)

    def get_range(self, key: str, start: int, length: int) -> bytes:
        check_range(start, length)
        if length == 0:
            self.size(key)  # still report a missing object
            return b""
        with self._errors(key):
            try:
                response = self._client.get_object(
                    Bucket=self.bucket,
                    Key=self.full_key(key),
                    Range=f"bytes={start}-{start + length - 1}",
                )
            except ClientError as exc:
                if _code(exc) != "InvalidRange":
                    raise
                return b""  # start is at or past the end of the object
            return _read_body(response)

    def get_tail(self, key: str, length: int) -> tuple[bytes, int]:
        check_range(0, length)
        if length == 0:
            return b"", self.size(key)
        with self._errors(key):
            try:
                response = self._client.get_object(
                    Bucket=self.bucket, Key=self.full_key(key), Range=f"bytes=-{length}"
                )
            except ClientError as exc:
                if _code(exc) != "InvalidRange":
                    raise
                return b"", self.size(key)  # an empty object has no suffix to return
            data = _read_body(response)
            match = _CONTENT_RANGE.fullmatch(response.get("ContentRange") or "")
            # No Content-Range: the store sent the whole object.
            return data, int(match.group(3)) if match else len(data)

    def size(self, key: str) -> int:
        with self._errors(key):
            response = self._client.head_object(Bucket=self.bucket, Key=self.full_key(key))
            return int(response["ContentLength"])

    def delete(self, key: str) -> None:
        with self._errors(key):
            self._client.delete_object(Bucket=self.bucket, Key=self.full_key(key))

    def delete_many(self, keys: Iterable[str]) -> None:
        full_keys = [self.full_key(key) for key in keys]
        for first in range(0, len(full_keys), DELETE_BATCH):
            chunk = full_keys[first : first + DELETE_BATCH]
            with self._errors(None):
                response = self._client.delete_objects(
                    Bucket=self.bucket,
                    Delete={"Objects": [{"Key": key} for key in chunk], "Quiet": True},
                )
            errors = response.get("Errors") or []
            if errors:
                first_error = errors[0]
                raise StorageError(
                    f"could not delete {len(errors)} of {len(chunk)} objects in {self.url}, "
                    f"first {first_error.get('Key')!r}: {first_error.get('Code')} "
                    f"{first_error.get('Message')}"
                )

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        check_prefix(prefix)
        return self._list(prefix)

    def _list(self, prefix: str) -> Iterator[ObjectInfo]:
        paginator = self._client.get_paginator("list_objects_v2")
        strip = len(self.prefix)
        with self._errors(None):
            pages = paginator.paginate(
                Bucket=self.bucket,
                Prefix=self.prefix + prefix,
                PaginationConfig={"PageSize": LIST_PAGE_SIZE},
            )
            for page in pages:
                for item in page.get("Contents", ()):
                    yield ObjectInfo(item["Key"][strip:], int(item["Size"]), item["LastModified"])

    @contextlib.contextmanager
    def _errors(self, key: str | None) -> Iterator[None]:
        """Turn botocore's exceptions into ours, keeping the cause."""
        try:
            yield
        except ClientError as exc:
            if key is not None and _code(exc) in _NOT_FOUND_CODES:
                raise ObjectNotFound(key) from exc
            raise StorageError(f"S3 request to {self.url} failed: {exc}") from exc
        except BotoCoreError as exc:
            raise StorageError(f"S3 request to {self.url} failed: {exc}") from exc


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _read_body(response: Mapping[str, Any]) -> bytes:
    with contextlib.closing(response["Body"]) as body:
        data: bytes = body.read()
        return data


def _canonical_url(bucket: str, region: str, endpoint: str | None, prefix: str) -> str:
    params = {"region": region}
    if endpoint:
        params["endpoint"] = endpoint
    if prefix:
        params["prefix"] = prefix.rstrip("/")
    return f"s3://{bucket}?{urlencode(params, safe=':/')}"
