"""``floe console-producer`` (stdin lines → records) and ``floe console-consumer``
(records → stdout lines), Kafka's console tools on librdkafka."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from floecli.errors import BadInput, CommandFailed
from floecli.kafka_config import add_connection_arguments, client_config, reachable


def add_parsers(subparsers: Any) -> None:
    producer = subparsers.add_parser(
        "console-producer",
        help="write records read from stdin, one a line",
        description="Each line of stdin becomes a record of TOPIC (its key before "
        "--key-separator, when given). Ends at end of input, once every record is "
        "acknowledged.",
    )
    add_connection_arguments(producer)
    producer.add_argument("--topic", "-t", required=True)
    producer.add_argument(
        "--key-separator",
        metavar="SEP",
        help="split each line at its first SEP: key before, value after",
    )
    producer.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a header on every record (repeatable)",
    )
    producer.add_argument("--partition", type=int, help="write to this partition only")
    producer.add_argument("--acks", default="all", choices=("0", "1", "all", "-1"))
    producer.set_defaults(run=produce_lines)

    consumer = subparsers.add_parser(
        "console-consumer",
        help="print records of a topic, one a line",
        description="Prints each record's value (and, when asked, key, headers, partition "
        "and offset) to stdout. Ends after --max-messages records or when none arrives "
        "for --timeout-ms.",
    )
    add_connection_arguments(consumer)
    consumer.add_argument("--topic", "-t", required=True)
    consumer.add_argument("--group", "-g", help="consumer group (default: none, nothing committed)")
    consumer.add_argument(
        "--from-beginning", action="store_true", help="start at the earliest offset"
    )
    consumer.add_argument("--max-messages", type=int, metavar="N", help="stop after N records")
    consumer.add_argument(
        "--timeout-ms",
        type=int,
        default=None,
        metavar="MS",
        help="stop when no record arrives for MS milliseconds (default: wait for ever)",
    )
    consumer.add_argument("--print-key", action="store_true", help="print KEY<sep>VALUE")
    consumer.add_argument("--key-separator", default="\t", metavar="SEP")
    consumer.add_argument("--print-headers", action="store_true")
    consumer.add_argument(
        "--print-offset", action="store_true", help="prefix each line with PARTITION:OFFSET"
    )
    consumer.set_defaults(run=consume_lines)


def _headers(items: list[str]) -> list[tuple[str, str | bytes | None]]:
    headers: list[tuple[str, str | bytes | None]] = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise BadInput(f"--header wants KEY=VALUE, got {item!r}")
        headers.append((key, value.encode()))
    return headers


def produce_lines(args: argparse.Namespace) -> int:
    from confluent_kafka import Producer

    headers = _headers(args.header)
    if args.key_separator == "":
        raise BadInput("--key-separator may not be empty")
    config = client_config(
        args,
        acks=args.acks,
        **{"message.timeout.ms": int(args.request_timeout * 3000)},
    )
    reachable(config, args.request_timeout)
    failures: list[str] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failures.append(error.str())

    producer = Producer(config)
    sent = 0
    for line in sys.stdin.buffer:
        line = line.rstrip(b"\r\n")
        key: bytes | None = None
        if args.key_separator is not None:
            key, sep, value = line.partition(args.key_separator.encode())
            if not sep:
                raise BadInput(f"line {sent + 1} has no key separator {args.key_separator!r}")
        else:
            value = line
        extra = {"partition": args.partition} if args.partition is not None else {}
        while True:
            try:
                producer.produce(
                    args.topic,
                    value=value,
                    key=key,
                    headers=headers,
                    on_delivery=delivered,
                    **extra,
                )
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.1)
        sent += 1
        producer.poll(0)
    left = producer.flush(args.request_timeout * 3)
    if left or failures:
        reason = failures[0] if failures else f"{left} records unacknowledged"
        raise CommandFailed(f"{len(failures) + left} of {sent} records not written: {reason}")
    print(f"{sent} records written to {args.topic}", file=sys.stderr)
    return 0


def _text(data: str | bytes | None) -> str:
    if data is None:
        return "null"
    return data if isinstance(data, str) else data.decode("utf-8", "backslashreplace")


def consume_lines(args: argparse.Namespace) -> int:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

    if args.max_messages is not None and args.max_messages < 1:
        raise BadInput("--max-messages must be at least 1")
    if args.timeout_ms is not None and args.timeout_ms < 0:
        raise BadInput("--timeout-ms may not be negative")
    group = args.group or f"floe-console-consumer-{os.getpid()}"
    config = client_config(
        args,
        **{
            "group.id": group,
            "enable.auto.commit": bool(args.group),
            "auto.offset.reset": "earliest" if args.from_beginning else "latest",
        },
    )
    reachable(config, args.request_timeout)
    consumer = Consumer(config)
    try:
        if args.group:
            if args.from_beginning:

                def rewind(c: Any, partitions: list[Any]) -> None:
                    # Kafka's tool: --from-beginning only where the group has no offset.
                    committed = c.committed(partitions, timeout=args.request_timeout)
                    for p in committed:
                        if p.offset < 0:
                            p.offset = OFFSET_BEGINNING
                    c.assign(committed)

                consumer.subscribe([args.topic], on_assign=rewind)
            else:
                consumer.subscribe([args.topic])
        else:
            metadata = consumer.list_topics(args.topic, timeout=args.request_timeout)
            topic = metadata.topics.get(args.topic)
            if topic is None or topic.error is not None:
                reason = topic.error.str() if topic is not None and topic.error else "unknown"
                raise CommandFailed(f"topic {args.topic!r}: {reason}")
            start = OFFSET_BEGINNING if args.from_beginning else -1  # OFFSET_END
            consumer.assign([TopicPartition(args.topic, p, start) for p in topic.partitions])
        printed = 0
        idle_since = time.monotonic()
        out = sys.stdout
        while args.max_messages is None or printed < args.max_messages:
            if args.timeout_ms is not None and (
                time.monotonic() - idle_since > args.timeout_ms / 1000
            ):
                break
            message = consumer.poll(0.2)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.fatal() or not error.retriable():
                    raise CommandFailed(error.str())
                continue
            idle_since = time.monotonic()
            parts = []
            if args.print_offset:
                parts.append(f"{message.partition()}:{message.offset()}")
            if args.print_headers:
                headers: list[Any] = list(message.headers() or [])
                parts.append(",".join(f"{k}={_text(v)}" for k, v in headers) or "-")
            if args.print_key:
                parts.append(_text(message.key()))
            parts.append(_text(message.value()))
            out.write(args.key_separator.join(parts) + "\n")
            printed += 1
        out.flush()
        print(f"{printed} records", file=sys.stderr)
        return 0
    except KafkaException as exc:
        raise CommandFailed(exc.args[0].str() if exc.args else str(exc)) from None
    finally:
        consumer.close()
