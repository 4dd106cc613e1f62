"""The object-store interface every backend implements, and the rules its keys follow."""

from __future__ import annotations

import abc
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import NamedTuple

# S3's limit; applied everywhere so a key that works in tests works in production.
MAX_KEY_BYTES = 1024


class StorageError(Exception):
    """A backend failed (I/O error, network, permissions); the cause is chained."""


class ObjectNotFound(StorageError):
    """The key names no object."""

    def __init__(self, key: str) -> None:
        super().__init__(f"no object at key {key!r}")
        self.key = key


class ObjectInfo(NamedTuple):
    key: str
    size: int
    last_modified: datetime  # tz-aware, UTC


class ObjectStore(abc.ABC):
    """A flat namespace of immutable byte objects, addressed by string keys.

    Every method is synchronous and safe to call from many threads at once.
    Keys are "/"-separated relative paths (see `check_key`); the same rules apply
    to every backend so a key accepted by `mem://` in tests is accepted by `file://`
    and `s3://` in production.
    """

    url: str

    @abc.abstractmethod
    def put(self, key: str, data: bytes | bytearray | memoryview) -> None:
        """Store `data` under `key`, replacing any object there; durable once it returns."""

    @abc.abstractmethod
    def get(self, key: str) -> bytes:
        """The whole object; `ObjectNotFound` if missing."""

    @abc.abstractmethod
    def get_range(self, key: str, start: int, length: int) -> bytes:
        """`length` bytes from `start`; fewer only where the object ends. `ObjectNotFound` if missing."""

    @abc.abstractmethod
    def get_tail(self, key: str, length: int) -> tuple[bytes, int]:
        """The last `length` bytes (the whole object if shorter) and the object's total size.

        One request on S3 (a suffix range), so a reader can find a footer without
        knowing the object's size first.
        """

    @abc.abstractmethod
    def size(self, key: str) -> int:
        """The object's size in bytes; `ObjectNotFound` if missing."""

    @abc.abstractmethod
    def delete(self, key: str) -> None:
        """Remove the object; a missing key is not an error."""

    def delete_many(self, keys: Iterable[str]) -> None:
        """Remove every object named; missing keys are not an error."""
        for key in keys:
            self.delete(key)

    @abc.abstractmethod
    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        """Objects whose key starts with `prefix`, in ascending key order."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url}>"


def check_key(key: str) -> str:
    """Return `key` if it is a valid object key, else raise ValueError.

    A key is a non-empty relative path: no leading "/", no empty, "." or ".."
    segment (so it can never escape a `file://` root), no NUL or backslash, at most
    1024 UTF-8 bytes.
    """
    if not isinstance(key, str):
        raise TypeError(f"object key must be a str, not {type(key).__name__}")
    if not key:
        raise ValueError("object key must not be empty")
    _check_segments(key, what="object key", allow_trailing_slash=False)
    return key


def check_prefix(prefix: str) -> str:
    """Return `prefix` if it is a valid listing prefix (a key's leading part, or "")."""
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a str, not {type(prefix).__name__}")
    if prefix:
        _check_segments(prefix, what="prefix", allow_trailing_slash=True)
    return prefix


def check_range(start: int, length: int) -> None:
    if start < 0 or length < 0:
        raise ValueError(f"byte range must not be negative (start={start}, length={length})")


def _check_segments(text: str, *, what: str, allow_trailing_slash: bool) -> None:
    if len(text.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES:
        raise ValueError(f"{what} is longer than {MAX_KEY_BYTES} bytes")
    if "\x00" in text or "\\" in text:
        raise ValueError(f"{what} {text!r} contains a NUL or backslash")
    if text.startswith("/"):
        raise ValueError(f"{what} {text!r} must be relative (no leading '/')")
    segments = text.split("/")
    if allow_trailing_slash:
        # A prefix may end part-way through a segment ("a/.b" lists "a/.bc"): only
        # the segments a "/" completes must be real names.
        segments.pop()
    for segment in segments:
        if segment in ("", ".", ".."):
            raise ValueError(f"{what} {text!r} has an empty, '.' or '..' segment")
