"""`file:///abs/dir`: objects as files under one folder, the embedded default.

Key "a/b/c" is the file `<root>/a/b/c`. A put is atomic and durable: the bytes go to a
temporary file in the target folder, which is fsynced, renamed over the key and then
the folder itself is fsynced, so a crash leaves either the old object or the new one.
"""

from __future__ import annotations

import errno
import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from stat import S_ISREG

from core.storage.base import (
    ObjectInfo,
    ObjectNotFound,
    ObjectStore,
    StorageError,
    check_key,
    check_prefix,
    check_range,
)

# Temporary files live next to their target (rename is atomic only within a file
# system) and carry this marker so listings skip them.
_TMP_MARKER = ".floe-tmp-"
# A concurrent delete may prune a folder between our mkdir and our open.
_PUT_ATTEMPTS = 5


class FileStore(ObjectStore):
    def __init__(self, root: str | os.PathLike[str]) -> None:
        root_path = Path(root)
        if not root_path.is_absolute():
            raise ValueError(f"file:// store needs an absolute folder, got {str(root)!r}")
        try:
            root_path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot create store folder {root_path}: {exc}") from exc
        self.root = root_path.resolve()
        self.url = self.root.as_uri()

    def _path(self, key: str) -> Path:
        check_key(key)
        if any(segment.startswith(_TMP_MARKER) for segment in key.split("/")):
            raise ValueError(f"object key {key!r} uses the reserved marker {_TMP_MARKER!r}")
        return self.root.joinpath(*key.split("/"))

    def put(self, key: str, data: bytes | bytearray | memoryview) -> None:
        path = self._path(key)
        for attempt in range(_PUT_ATTEMPTS):
            try:
                self._make_folders(path.parent)
                self._write_atomically(path, data)
                return
            except FileNotFoundError as exc:
                if attempt == _PUT_ATTEMPTS - 1:
                    raise StorageError(f"cannot write {key!r}: {exc}") from exc
            except OSError as exc:
                raise StorageError(f"cannot write {key!r}: {exc}") from exc

    def _make_folders(self, folder: Path) -> None:
        """mkdir -p, fsyncing each parent whose entries changed so the new folders survive a crash."""
        missing: list[Path] = []
        while not folder.is_dir():
            missing.append(folder)
            folder = folder.parent
        for new in reversed(missing):
            try:
                new.mkdir()
            except FileExistsError:
                continue
            _fsync_folder(new.parent)

    def _write_atomically(self, path: Path, data: bytes | bytearray | memoryview) -> None:
        tmp = path.with_name(f"{_TMP_MARKER}{path.name}.{uuid.uuid4().hex}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            with open(fd, "wb", closefd=True) as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        _fsync_folder(path.parent)

    def get(self, key: str) -> bytes:
        path = self._path(key)
        try:
            return path.read_bytes()
        except OSError as exc:
            raise _translate(exc, key) from exc

    def get_range(self, key: str, start: int, length: int) -> bytes:
        check_range(start, length)
        path = self._path(key)
        try:
            with open(path, "rb") as src:
                src.seek(start)
                return src.read(length)
        except OSError as exc:
            raise _translate(exc, key) from exc

    def get_tail(self, key: str, length: int) -> tuple[bytes, int]:
        check_range(0, length)
        path = self._path(key)
        try:
            with open(path, "rb") as src:
                size = os.fstat(src.fileno()).st_size
                src.seek(max(0, size - length))
                return src.read(length), size
        except OSError as exc:
            raise _translate(exc, key) from exc

    def size(self, key: str) -> int:
        path = self._path(key)
        try:
            stat = path.stat()
        except OSError as exc:
            raise _translate(exc, key) from exc
        if not S_ISREG(stat.st_mode):
            raise ObjectNotFound(key)
        return stat.st_size

    def delete(self, key: str) -> None:
        path = self._path(key)
        try:
            path.unlink()
        except (FileNotFoundError, NotADirectoryError):
            return
        except IsADirectoryError:
            return  # "a" when only "a/b" exists: there is no object "a"
        except OSError as exc:
            raise StorageError(f"cannot delete {key!r}: {exc}") from exc
        self._prune_empty_folders(path.parent)

    def _prune_empty_folders(self, folder: Path) -> None:
        # Object stores have no folders; leaving empty ones behind would make every
        # deleted date-partitioned prefix linger forever.
        while folder != self.root:
            try:
                folder.rmdir()
            except OSError:
                return
            folder = folder.parent

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        check_prefix(prefix)
        # Start from the deepest folder the prefix names in full; filter the rest.
        folder_part, _, _ = prefix.rpartition("/")
        start = self.root.joinpath(*folder_part.split("/")) if folder_part else self.root
        base = folder_part + "/" if folder_part else ""
        return self._walk(start, base, prefix)

    def _walk(self, folder: Path, base: str, prefix: str) -> Iterator[ObjectInfo]:
        try:
            entries = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError):
            return
        except OSError as exc:
            raise StorageError(f"cannot list {folder}: {exc}") from exc
        # Keys under folder "a" all start with "a/", so they sort as one block placed
        # where "a/" sorts among its siblings: sort folders by name + "/".
        named = []
        for entry in entries:
            if entry.name.startswith(_TMP_MARKER):
                continue
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            named.append((entry.name + "/" if is_dir else entry.name, is_dir, entry))
        named.sort(key=lambda item: item[0])
        for sort_name, is_dir, entry in named:
            key = base + sort_name
            if is_dir:
                # Descend only if some key under it could match the prefix.
                if key.startswith(prefix) or prefix.startswith(key):
                    yield from self._walk(Path(entry.path), key, prefix)
                continue
            if not key.startswith(prefix):
                continue
            try:
                stat = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # deleted while we listed
            if not S_ISREG(stat.st_mode):
                continue
            modified = datetime.fromtimestamp(stat.st_mtime, tz=UTC)
            yield ObjectInfo(key, stat.st_size, modified)


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as exc:
        # Some file systems (and platforms) cannot fsync a folder; the rename is
        # still atomic there, only not yet durable.
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def _translate(exc: OSError, key: str) -> StorageError:
    if isinstance(exc, FileNotFoundError | NotADirectoryError | IsADirectoryError):
        return ObjectNotFound(key)
    return StorageError(f"cannot read {key!r}: {exc}")
