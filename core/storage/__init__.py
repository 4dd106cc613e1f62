"""Object stores behind one small interface: `open_store(url)` picks the backend.

file:///abs/dir                       local folder (the embedded default)
mem://name                            in-process, shared by name (tests)
s3://bucket?region=&endpoint=&prefix= AWS S3 or an S3-compatible store
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from core.storage.base import ObjectInfo, ObjectNotFound, ObjectStore, StorageError
from core.storage.filesystem import FileStore
from core.storage.memory import MemoryStore

__all__ = [
    "FileStore",
    "MemoryStore",
    "ObjectInfo",
    "ObjectNotFound",
    "ObjectStore",
    "StorageError",
    "open_store",
    "object_location",
]

_S3_PARAMS = frozenset({"region", "endpoint", "prefix"})


def open_store(url: str) -> ObjectStore:
    """The store a bucket URL names; ValueError with a one-line reason if the URL is bad."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ValueError(
                f"file:// URL must name an absolute folder (file:///abs/dir), got {url!r}"
            )
        if parts.query or parts.fragment:
            raise ValueError(f"file:// URL takes no query or fragment, got {url!r}")
        path = unquote(parts.path)
        if not path.startswith("/"):
            raise ValueError(f"file:// URL must name an absolute folder, got {url!r}")
        return FileStore(path)
    if scheme == "mem":
        name = url[len("mem://") :] if url.lower().startswith("mem://") else ""
        if not name:
            raise ValueError(f"mem:// URL needs a name (mem://tests), got {url!r}")
        return MemoryStore(name)
    if scheme == "s3":
        return _open_s3(url, parts.netloc, parts.path, parts.query)
    if not scheme:
        raise ValueError(f"bucket URL {url!r} has no scheme (use file://, mem:// or s3://)")
    raise ValueError(f"unsupported bucket URL scheme {scheme!r} (use file://, mem:// or s3://)")


def object_location(url: str, key: str) -> tuple[str, dict[str, str]]:
    """Where the object `key` of the bucket at `url` is for other engines (Iceberg's
    FileIO: ``file:///abs/dir/key``, ``s3://bucket/prefix/key``) and the FileIO
    properties that reach it (endpoint and region, never credentials: each reader brings
    its own). Only parses the URL: nothing is opened."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    key = key.strip("/")
    if scheme == "file":
        root = unquote(parts.path).rstrip("/")
        return Path(root, *key.split("/")).as_uri(), {}
    if scheme == "s3":
        params = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        prefix = (params.get("prefix") or unquote(parts.path)).strip("/")
        path = f"{prefix}/{key}" if prefix else key
        properties = {"s3.region": params.get("region") or "us-east-1"}
        if params.get("endpoint"):
            properties["s3.endpoint"] = params["endpoint"]
        return f"s3://{parts.netloc}/{path}", properties
    raise ValueError(f"objects of a {scheme or 'scheme-less'}:// bucket have no shared location")


def _open_s3(url: str, bucket: str, path: str, query: str) -> ObjectStore:
    try:
        params = parse_qs(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise ValueError(f"s3:// URL has a malformed query string: {url!r}") from None
    unknown = sorted(set(params) - _S3_PARAMS)
    if unknown:
        raise ValueError(
            f"s3:// URL has unknown parameter(s) {', '.join(unknown)} "
            f"(known: endpoint, prefix, region): {url!r}"
        )
    repeated = sorted(name for name, values in params.items() if len(values) > 1)
    if repeated:
        raise ValueError(f"s3:// URL repeats parameter(s) {', '.join(repeated)}: {url!r}")
    single = {name: values[0] for name, values in params.items()}
    path_prefix = unquote(path).strip("/")
    if path_prefix and single.get("prefix"):
        raise ValueError(f"s3:// URL gives a prefix both as a path and as ?prefix=: {url!r}")
    endpoint = single.get("endpoint") or None
    if endpoint and urlsplit(endpoint).scheme not in ("http", "https"):
        raise ValueError(f"s3:// endpoint must be an http:// or https:// URL, got {endpoint!r}")

    from core.storage.s3 import DEFAULT_REGION, S3Store  # boto3 is slow to import

    return S3Store(
        bucket,
        region=single.get("region") or DEFAULT_REGION,
        endpoint=endpoint,
        prefix=single.get("prefix") or path_prefix,
    )
