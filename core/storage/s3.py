"""`s3://bucket?region=&endpoint=&prefix=`: AWS S3 or any S3-compatible store (MinIO, R2, moto).

Credentials come from boto3's usual chain (environment, shared files, instance role).
One boto3 client per store, created up front: clients are thread-safe, sessions are not.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, cast
from urllib.parse import urlencode

import boto3
import botocore.loaders
import botocore.session
import botocore.utils
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

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


# Parsing botocore's service models costs ~0.1 s per session; the loader caches them and
# is shared by every store's session (each store still gets its own session and client).
_MODEL_LOADER = botocore.loaders.create_loader()


def _new_session() -> boto3.session.Session:
    core = botocore.session.get_session()
    core.register_component("data_loader", _MODEL_LOADER)
    return boto3.session.Session(botocore_session=core)


def new_client(region: str, endpoint: str | None) -> Any:
    """The boto3 S3 client a store uses (thread-safe; one per store)."""
    options: dict[str, Any] = {
        "max_pool_connections": 64,
        "retries": {"mode": "standard"},
    }
    if endpoint:
        # S3-compatible stores are reached by path (http://host/bucket/key) and many
        # reject the newer default request checksums; segments carry their own CRCs
        # (each batch's CRC-32C, the footer's). Without a checksum header botocore
        # signs a SHA-256 of every body (~0.9 ms of CPU per MiB, a fifth of the
        # agent's samples while producing). Over TLS, which already protects the body
        # in flight, UNSIGNED-PAYLOAD (as AWS's own CLI sends) signs the headers only;
        # over plain HTTP the signed SHA-256 is the only check the store makes of the
        # body it received before the agent acknowledges, so it is kept there: the
        # batches' CRCs are checked only when they are read, too late for a producer.
        options["s3"] = {
            "addressing_style": "path",
            "payload_signing_enabled": not endpoint.lower().startswith("https://"),
        }
        options["request_checksum_calculation"] = "when_required"
        options["response_checksum_validation"] = "when_required"
    client = _new_session().client(
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
            self._client = new_client(region, endpoint)
        except BotoCoreError as exc:
            raise StorageError(f"cannot create S3 client for {self.url}: {exc}") from exc

    def _key(self, key: str) -> str:
        return self.prefix + check_key(key)

    def put(self, key: str, data: bytes | bytearray | memoryview) -> None:
        # botocore sends a bytearray as it sends bytes (its stubs name bytes only): no copy.
        body = cast(bytes, data) if isinstance(data, bytes | bytearray) else bytes(data)
        with self._errors(key):
            self._client.put_object(Bucket=self.bucket, Key=self._key(key), Body=body)

    def get(self, key: str) -> bytes:
        with self._errors(key):
            response = self._client.get_object(Bucket=self.bucket, Key=self._key(key))
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
                    Key=self._key(key),
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
                    Bucket=self.bucket, Key=self._key(key), Range=f"bytes=-{length}"
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
            response = self._client.head_object(Bucket=self.bucket, Key=self._key(key))
            return int(response["ContentLength"])

    def delete(self, key: str) -> None:
        with self._errors(key):
            self._client.delete_object(Bucket=self.bucket, Key=self._key(key))

    def delete_many(self, keys: Iterable[str]) -> None:
        full_keys = [self._key(key) for key in keys]
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
