"""`mem://name`: an in-process store for tests; every store opened on one name shares its objects."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime

from core.storage.base import (
    ObjectInfo,
    ObjectNotFound,
    ObjectStore,
    check_key,
    check_prefix,
    check_range,
)


class _Bucket:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.objects: dict[str, tuple[bytes, datetime]] = {}


_buckets: dict[str, _Bucket] = {}
_buckets_lock = threading.Lock()


def _bucket(name: str) -> _Bucket:
    with _buckets_lock:
        return _buckets.setdefault(name, _Bucket())


def forget_memory_bucket(name: str) -> None:
    """Drop every object of `mem://name` (stores already open keep the old, now private, bucket)."""
    with _buckets_lock:
        _buckets.pop(name, None)


class MemoryStore(ObjectStore):
    def __init__(self, name: str) -> None:
        if not name:
            raise ValueError("mem:// URL needs a name, e.g. mem://tests")
        self.name = name
        self.url = f"mem://{name}"
        self._bucket = _bucket(name)

    def put(self, key: str, data: bytes | bytearray | memoryview) -> None:
        check_key(key)
        blob = bytes(data)  # own a private, immutable copy
        with self._bucket.lock:
            self._bucket.objects[key] = (blob, datetime.now(UTC))

    def _blob(self, key: str) -> bytes:
        check_key(key)
        with self._bucket.lock:
            entry = self._bucket.objects.get(key)
        if entry is None:
            raise ObjectNotFound(key)
        return entry[0]

    def get(self, key: str) -> bytes:
        return self._blob(key)

    def get_range(self, key: str, start: int, length: int) -> bytes:
        check_range(start, length)
        return self._blob(key)[start : start + length]

    def get_tail(self, key: str, length: int) -> tuple[bytes, int]:
        check_range(0, length)
        blob = self._blob(key)
        return blob[max(0, len(blob) - length) :], len(blob)

    def size(self, key: str) -> int:
        return len(self._blob(key))

    def delete(self, key: str) -> None:
        check_key(key)
        with self._bucket.lock:
            self._bucket.objects.pop(key, None)

    def delete_many(self, keys: Iterable[str]) -> None:
        keys = [check_key(key) for key in keys]
        with self._bucket.lock:
            for key in keys:
                self._bucket.objects.pop(key, None)

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        check_prefix(prefix)
        with self._bucket.lock:
            snapshot = [
                ObjectInfo(key, len(blob), modified)
                for key, (blob, modified) in self._bucket.objects.items()
                if key.startswith(prefix)
            ]
        snapshot.sort(key=lambda info: info.key)
        return iter(snapshot)
