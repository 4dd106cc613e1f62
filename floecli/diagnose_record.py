"""``floe diagnose-record TOPIC PARTITION OFFSET``: find the committed run that holds a
record (the control plane's locate endpoint), read its bytes from the bucket, check
every batch's CRC-32C and that the record is there, and — with -b — compare it with what
a Kafka consumer reads at that offset."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any
from urllib.parse import quote

from core.kafka.records import CorruptRecord, Record, batch_crc_ok, decode_records
from core.segment import SegmentCorrupt, run_batches
from core.storage import StorageError, open_store
from floecli.errors import BadInput, CommandFailed
from floecli.kafka_config import add_connection_arguments, client_config, reachable
from floecli.rest import add_rest_arguments, cluster_bucket, cluster_path, get_json, rest_target


def add_parsers(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "diagnose-record",
        help="find the file and batch holding a record and check it end to end",
        description="Asks the control plane (--api-url, --cluster, an API key) which "
        "committed run holds TOPIC[PARTITION] at OFFSET (file, byte range, base offset), "
        "reads the run from the bucket (--bucket, default the cluster's), checks each "
        "batch's CRC-32C and that the record is there, and with -b compares it with what "
        "a Kafka consumer reads at that offset. Exit code 1 on any mismatch.",
    )
    parser.add_argument("topic", metavar="TOPIC")
    parser.add_argument("partition", metavar="PARTITION", type=int)
    parser.add_argument("offset", metavar="OFFSET", type=int)
    add_rest_arguments(parser)
    parser.add_argument(
        "--bucket",
        metavar="URL",
        help="the bucket (file:///abs/dir or s3://bucket/prefix?endpoint=…, as file-reader "
        "takes); default: the cluster's bucket URL",
    )
    add_connection_arguments(parser, required=False)
    parser.add_argument("--json", action="store_true", help="one JSON document")
    parser.set_defaults(run=diagnose)


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "backslashreplace")


def record_doc(offset: int, timestamp: int, key: Any, value: Any, headers: Any) -> dict[str, Any]:
    return {
        "offset": offset,
        "timestamp": timestamp,
        "key": _text(key),
        "value": _text(value),
        "headers": [[k, _text(v)] for k, v in headers or []],
    }


def locate(args: argparse.Namespace) -> dict[str, Any]:
    url, cluster, key = rest_target(args)
    path = cluster_path(
        cluster,
        f"topics/{quote(args.topic, safe='')}/partitions/{args.partition}/locate"
        f"?offset={args.offset}",
    )
    body, _ = get_json(url, path, key, args.request_timeout)
    return dict(body)


def check_run(data: bytes, where: dict[str, Any], offset: int) -> dict[str, Any]:
    """The run's batches (position in the file, offsets, CRC) and the record at `offset`
    as the file holds it, with the problems found."""
    problems: list[str] = []
    batches: list[dict[str, Any]] = []
    found: dict[str, Any] | None = None
    if len(data) != where["length"]:
        problems.append(
            f"the bucket returned {len(data)} bytes of the run's {where['length']} "
            f"(file {where['file_key']} is shorter than the index says)"
        )
    try:
        for rb in run_batches(
            data,
            base_offset=where["base_offset"],
            last_offset=where["last_offset"],
            rewrite=where["rewrite"],
        ):
            raw = memoryview(data)[rb.position : rb.position + rb.length]
            crc_ok = batch_crc_ok(raw, rb.header)
            holds = rb.base_offset <= offset <= rb.last_offset
            batches.append(
                {
                    "position": where["position"] + rb.position,
                    "length": rb.length,
                    "base_offset": rb.base_offset,
                    "last_offset": rb.last_offset,
                    "record_count": rb.header.record_count,
                    "crc_ok": crc_ok,
                    "holds_offset": holds,
                }
            )
            if not crc_ok:
                problems.append(
                    f"batch at byte {where['position'] + rb.position} of {where['file_key']} "
                    f"(offsets {rb.base_offset}..{rb.last_offset}): CRC-32C mismatch"
                )
            if holds and crc_ok:
                found = _record_in(raw, rb.base_offset, offset)
                if found is None:
                    problems.append(
                        f"no record at offset {offset} in its batch "
                        f"({rb.base_offset}..{rb.last_offset}; key compaction removed it?)"
                    )
    except (SegmentCorrupt, CorruptRecord) as exc:
        problems.append(f"run of {where['file_key']}: {exc}")
    if not any(b["holds_offset"] for b in batches) and not problems:
        problems.append(f"no batch of the run holds offset {offset}")
    return {"batches": batches, "record": found, "problems": problems}


def _record_in(raw: memoryview, assigned_base: int, offset: int) -> dict[str, Any] | None:
    header, records = decode_records(raw)
    shift = assigned_base - header.base_offset  # level 0: the producer's base offset
    for r in records:
        if r.offset + shift == offset:
            return _doc(r, r.offset + shift)
    return None


def _doc(r: Record, offset: int) -> dict[str, Any]:
    return record_doc(offset, r.timestamp, r.key, r.value, r.headers)


def consumer_record(args: argparse.Namespace, offset: int) -> dict[str, Any] | None:
    """What librdkafka reads at `offset` (read_uncommitted: aborted records too), or None
    when the first record it returns is past it."""
    import time

    from confluent_kafka import Consumer, KafkaError, TopicPartition

    config = client_config(args)
    reachable(config, args.request_timeout)
    consumer = Consumer(
        {
            **{k: v for k, v in config.items() if k != "error_cb"},
            "group.id": "floe-diagnose-record",
            "enable.auto.commit": False,
            "isolation.level": "read_uncommitted",
        }
    )
    try:
        consumer.assign([TopicPartition(args.topic, args.partition, offset)])
        deadline = time.monotonic() + args.request_timeout
        while time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None:
                continue
            error = m.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                raise CommandFailed(f"consumer: {error.str()}")
            at = m.offset() or 0  # None only on an error message
            if at < offset:
                continue
            if at > offset:
                return None
            return record_doc(at, m.timestamp()[1], m.key(), m.value(), m.headers())
        raise CommandFailed(
            f"consumer: nothing at {args.topic}[{args.partition}]@{offset} within "
            f"{args.request_timeout:g}s"
        )
    finally:
        consumer.close()


def diagnose(args: argparse.Namespace) -> int:
    if args.offset < 0 or args.partition < 0:
        raise BadInput("PARTITION and OFFSET are not negative")
    where = locate(args)
    bucket = cluster_bucket(args, args.request_timeout)
    try:
        store = open_store(bucket)
        data = store.get_range(where["file_key"], where["position"], where["length"])
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    except StorageError as exc:
        raise CommandFailed(f"cannot read {where['file_key']} from {bucket}: {exc}") from None
    doc: dict[str, Any] = {
        "location": where,
        "bucket": bucket,
        **check_run(data, where, args.offset),
    }
    if args.bootstrap_server:
        seen = consumer_record(args, args.offset)
        doc["consumer_record"] = seen
        if seen is None:
            doc["problems"].append(f"a Kafka consumer finds no record at offset {args.offset}")
        elif doc["record"] is not None and seen != doc["record"]:
            differ = [
                k for k in ("key", "value", "headers", "timestamp") if seen[k] != doc["record"][k]
            ]
            doc["problems"].append(
                f"a Kafka consumer reads a different record at offset {args.offset} "
                f"({', '.join(differ)} differ)"
            )
    if args.json:
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        _print_text(args, doc)
    if doc["problems"]:
        raise CommandFailed(f"{len(doc['problems'])} problems: {doc['problems'][0]}")
    return 0


def _print_text(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    w, out = doc["location"], sys.stdout
    out.write(
        f"{args.topic}[{args.partition}]@{args.offset}: run {w['base_offset']}..{w['last_offset']} "
        f"({w['record_count']} records, {w['batch_count']} batches) in {w['file_key']} "
        f"({w['file_state']}, level {w['file_level']}, {w['file_size']} bytes) at bytes "
        f"{w['position']}..{w['position'] + w['length'] - 1} of {doc['bucket']}\n"
    )
    for b in doc["batches"]:
        out.write(
            f"{'> ' if b['holds_offset'] else '  '}batch at byte {b['position']} "
            f"({b['length']} bytes) offsets {b['base_offset']}..{b['last_offset']} "
            f"CRC {'ok' if b['crc_ok'] else 'MISMATCH'}\n"
        )
    r = doc["record"]
    if r is not None:
        out.write(
            f"record: timestamp {r['timestamp']} key {r['key']} value {r['value']}"
            f"{' headers ' + json.dumps(r['headers']) if r['headers'] else ''}\n"
        )
    if "consumer_record" in doc and doc["consumer_record"] == r and r is not None:
        out.write("a Kafka consumer reads the same key, value, headers and timestamp\n")
    for problem in doc["problems"]:
        out.write(f"PROBLEM {problem}\n")
