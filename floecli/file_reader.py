"""``floe file-reader URL``: decode one segment file of a bucket with `core.segment`'s
reader — its index (footer) and trailer, each batch's header and CRC-32C, and the
records — so an operator can look inside a file without the metadata store."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from core.kafka.records import CorruptRecord, batch_crc_ok, decode_records, iter_batches
from core.segment import SegmentCorrupt, read_index
from core.storage import StorageError, open_store
from floecli.errors import BadInput, CommandFailed

COMPRESSION = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
SHOWN_BYTES = 200  # of a key or value, in the listing


def add_parsers(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "file-reader",
        help="decode one segment file: index, batches, records, CRCs",
        description="Reads the segment file at URL (file:///abs/path/key, "
        "s3://bucket/key?endpoint=…&region=…, or a local path) and prints its index, each "
        "batch with its CRC-32C check, and each record. Exit code 1 when the file does "
        "not check out.",
    )
    parser.add_argument("url", metavar="URL")
    parser.add_argument("--no-records", action="store_true", help="batches only")
    parser.add_argument("--json", action="store_true", help="one JSON document")
    parser.set_defaults(run=read_file)


def fetch(url: str) -> bytes:
    """The object's bytes: a local file directly, anything else through `core.storage`
    (the bucket is the URL's folder, the key its last segment)."""
    parts = urlsplit(url)
    try:
        if parts.scheme in ("", "file"):
            if parts.netloc not in ("", "localhost"):
                raise BadInput(f"a file:// URL names an absolute path, got {url!r}")
            return Path(unquote(parts.path)).read_bytes()
        folder, _, key = parts.path.rpartition("/")
        if not key:
            raise BadInput(f"{url!r} names a folder, not a file")
        store = open_store(urlunsplit((parts.scheme, parts.netloc, folder, parts.query, "")))
        return store.get(key)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    except (OSError, StorageError) as exc:
        raise CommandFailed(f"cannot read {url}: {exc}") from None


def _shown(data: bytes | None) -> str | None:
    if data is None:
        return None
    text = data[:SHOWN_BYTES].decode("utf-8", "backslashreplace")
    return text + (f"…(+{len(data) - SHOWN_BYTES} bytes)" if len(data) > SHOWN_BYTES else "")


def describe(data: bytes, *, records: bool) -> dict[str, Any]:
    """The file as a document: size, batches (each with its index entry, header fields,
    CRC check and records) and the problems found. SegmentCorrupt when the index itself
    (trailer, footer CRC, layout) does not check out."""
    entries = read_index(data)
    view = memoryview(data)
    batches, problems = [], []
    for number, entry in enumerate(entries):
        raw = view[entry.position : entry.end]
        item: dict[str, Any] = {
            "batch": number,
            "topic_id": str(entry.topic_id),
            "partition": entry.partition,
            "position": entry.position,
            "length": entry.length,
            "index_base_offset": entry.base_offset,
            "record_count": entry.record_count,
        }
        try:
            [(_, _, header)] = list(iter_batches(raw))
        except (CorruptRecord, ValueError) as exc:
            problems.append(f"batch {number} at {entry.position}: not one whole batch ({exc})")
            item["crc_ok"] = False
            batches.append(item)
            continue
        crc_ok = batch_crc_ok(raw, header)
        if not crc_ok:
            problems.append(f"batch {number} at {entry.position}: CRC-32C mismatch")
        item.update(
            {
                "crc_ok": crc_ok,
                "base_offset": header.base_offset,
                "last_offset_delta": header.last_offset_delta,
                "compression": COMPRESSION.get(header.compression, str(header.compression)),
                "transactional": header.is_transactional,
                "control": header.is_control,
                "producer_id": header.producer_id,
                "producer_epoch": header.producer_epoch,
                "base_sequence": header.base_sequence,
                "base_timestamp": header.base_timestamp,
                "max_timestamp": header.max_timestamp,
            }
        )
        if header.record_count != entry.record_count:
            problems.append(
                f"batch {number}: index says {entry.record_count} records, batch "
                f"{header.record_count}"
            )
        # Compacted files: the batch carries the offset the index gives it.
        if entry.base_offset != -1 and header.base_offset != entry.base_offset:
            problems.append(
                f"batch {number}: index says base offset {entry.base_offset}, batch "
                f"{header.base_offset}"
            )
        if records and crc_ok:
            _, decoded = decode_records(raw)
            item["records"] = [
                {
                    "offset": r.offset,
                    "timestamp": r.timestamp,
                    "key": _shown(r.key),
                    "value": _shown(r.value),
                    "headers": {k: _shown(v) for k, v in r.headers},
                }
                for r in decoded
            ]
        batches.append(item)
    return {
        "bytes": len(data),
        "batches": batches,
        "records": sum(b["record_count"] for b in batches),
        "problems": problems,
    }


def _print_text(url: str, doc: dict[str, Any]) -> None:
    out = sys.stdout
    out.write(
        f"{url}: {doc['bytes']} bytes, {len(doc['batches'])} batches, {doc['records']} "
        "records, index and footer CRC ok\n"
    )
    for b in doc["batches"]:
        flags = [f for f in ("transactional", "control") if b.get(f)]
        out.write(
            f"batch {b['batch']}: topic {b['topic_id']} partition {b['partition']} "
            f"at {b['position']} ({b['length']} bytes) records {b['record_count']} "
            f"base offset {b.get('base_offset', '?')} (index {b['index_base_offset']}) "
            f"compression {b.get('compression', '?')} producer {b.get('producer_id', '?')}"
            f"/{b.get('producer_epoch', '?')}/{b.get('base_sequence', '?')}"
            f"{' ' + ' '.join(flags) if flags else ''} "
            f"CRC {'ok' if b['crc_ok'] else 'MISMATCH'}\n"
        )
        for r in b.get("records", ()):
            headers = ",".join(f"{k}={v}" for k, v in r["headers"].items())
            out.write(
                f"  offset {r['offset']} timestamp {r['timestamp']} key {r['key']} "
                f"value {r['value']}{' headers ' + headers if headers else ''}\n"
            )
    for problem in doc["problems"]:
        out.write(f"PROBLEM {problem}\n")


def read_file(args: argparse.Namespace) -> int:
    data = fetch(args.url)
    try:
        doc = describe(data, records=not args.no_records)
    except SegmentCorrupt as exc:
        raise CommandFailed(f"{args.url}: {exc}") from None
    if args.json:
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        _print_text(args.url, doc)
    if doc["problems"]:
        raise CommandFailed(f"{len(doc['problems'])} problems: {doc['problems'][0]}")
    return 0
