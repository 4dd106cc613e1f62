"""Print a segment file's index and check every batch in it.

    python -m core.file_reader PATH                      a local file
    python -m core.file_reader BUCKET_URL KEY            an object in a store (file://, s3://)

Prints one line per batch, then a summary; exits 1 with one line on stderr if the file
is missing or corrupt (bad trailer, footer CRC, batch CRC, or an index that disagrees
with its batches).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import unquote, urlsplit

from core.segment import SegmentCorrupt, SegmentEntry, verify_segment
from core.storage import StorageError, open_store

_COLUMNS = (
    ("topic_id", 36),
    ("partition", 9),
    ("position", 10),
    ("length", 8),
    ("records", 7),
    ("base_timestamp", 14),
    ("max_timestamp", 14),
    ("producer_id", 11),
    ("epoch", 5),
    ("sequence", 8),
    ("base_offset", 11),
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m core.file_reader",
        description="Print a segment file's index and check every batch's CRC.",
    )
    parser.add_argument("location", help="a segment file's path, or a bucket URL with KEY")
    parser.add_argument("key", nargs="?", help="the segment's object key in the bucket")
    args = parser.parse_args(argv)

    name = f"{args.location} {args.key}" if args.key else args.location
    try:
        data = _read(args.location, args.key)
        entries = verify_segment(data)
    except (SegmentCorrupt, StorageError, OSError, ValueError) as exc:
        kind = "corrupt segment" if isinstance(exc, SegmentCorrupt) else "cannot read"
        print(f"{name}: {kind}: {_one_line(exc)}", file=sys.stderr)
        return 1

    print(" ".join(title.rjust(width) for title, width in _COLUMNS))
    for entry in entries:
        print(_format(entry))
    records = sum(entry.record_count for entry in entries)
    print(f"ok: {len(entries)} batches, {records} records, {len(data)} bytes")
    return 0


def _read(location: str, key: str | None) -> bytes:
    if key is not None:
        return open_store(location).get(key)
    parts = urlsplit(location)
    if parts.scheme == "file":
        return Path(unquote(parts.path)).read_bytes()
    if parts.scheme:
        raise ValueError(f"give the object key as a second argument: {location} KEY")
    return Path(location).read_bytes()


def _format(entry: SegmentEntry) -> str:
    values = (
        str(entry.topic_id),
        entry.partition,
        entry.position,
        entry.length,
        entry.record_count,
        entry.base_timestamp,
        entry.max_timestamp,
        entry.producer_id,
        entry.producer_epoch,
        entry.base_sequence,
        entry.base_offset,
    )
    return " ".join(
        str(value).rjust(width) for value, (_, width) in zip(values, _COLUMNS, strict=True)
    )


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


if __name__ == "__main__":
    sys.exit(main())
