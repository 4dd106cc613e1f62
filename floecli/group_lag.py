"""``floe consumer-group-lag``: each group's committed offset, the high watermark and the
lag per partition, through Kafka's admin API (as ``kafka-consumer-groups --describe``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from floecli.errors import BadInput, CommandFailed
from floecli.kafka_config import add_connection_arguments, client_config, reachable
from floecli.rest import cluster_path, get_all

COLUMNS = ("GROUP", "TOPIC", "PARTITION", "COMMITTED", "HIGH-WATERMARK", "LAG")


def add_parsers(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "consumer-group-lag",
        help="lag per consumer group and partition",
        description="For each group (every group the cluster lists, or those named), "
        "each partition it committed: committed offset, high watermark and lag — from an "
        "agent (Kafka's admin API, -b) or from the control plane's REST API (--api-url, "
        "--cluster, an API key in --api-key or FLOE_API_KEY; adds lag_seconds).",
    )
    add_connection_arguments(parser, required=False)
    rest = parser.add_argument_group("control plane (instead of -b)")
    rest.add_argument(
        "--api-url", metavar="URL", help="the control plane, e.g. https://floe.example"
    )
    rest.add_argument("--cluster", metavar="ID", help="the cluster's id (vci_…)")
    rest.add_argument("--api-key", help="an API key (default: $FLOE_API_KEY)")
    parser.add_argument(
        "--group", "-g", action="append", default=[], help="only this group (repeatable)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON array instead of a table")
    parser.set_defaults(run=show_lag)


def _result(future: Any, timeout_s: float, what: str) -> Any:
    from confluent_kafka import KafkaException

    try:
        return future.result(timeout=timeout_s)
    except KafkaException as exc:
        reason = exc.args[0].str() if exc.args else str(exc)
        raise CommandFailed(f"{what}: {reason}") from None
    except TimeoutError:
        raise CommandFailed(f"{what}: no answer within {timeout_s:g}s") from None


def group_lag(config: dict[str, Any], groups: list[str], timeout_s: float) -> list[dict[str, Any]]:
    """Rows {group, topic, partition, committed_offset, high_watermark, lag}, sorted."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({k: v for k, v in config.items() if k != "error_cb"})
    if not groups:
        listed = _result(admin.list_consumer_groups(request_timeout=timeout_s), timeout_s, "list")
        groups = sorted(g.group_id for g in listed.valid)
    committed: list[tuple[str, Any]] = []
    for group in groups:  # librdkafka takes one group per request
        futures = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=timeout_s
        )
        answer = _result(futures[group], timeout_s, f"group {group!r}")
        committed.extend((group, tp) for tp in answer.topic_partitions if tp.offset >= 0)
    wanted = {(tp.topic, tp.partition) for _, tp in committed}
    high: dict[tuple[str, int], int] = {}
    if wanted:
        latest = admin.list_offsets(
            {TopicPartition(t, p): OffsetSpec.latest() for t, p in wanted},
            request_timeout=timeout_s,
        )
        for tp, future in latest.items():
            high[(tp.topic, tp.partition)] = _result(
                future, timeout_s, f"{tp.topic}[{tp.partition}]"
            ).offset
    rows = []
    for group, tp in committed:
        hw = high[(tp.topic, tp.partition)]
        rows.append(
            {
                "group": group,
                "topic": tp.topic,
                "partition": tp.partition,
                "committed_offset": tp.offset,
                "high_watermark": hw,
                "lag": max(hw - tp.offset, 0),
            }
        )
    return sorted(rows, key=lambda r: (r["group"], r["topic"], r["partition"]))


def rest_group_lag(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The same rows from the REST API's groups (with ``lag_seconds``)."""
    api_key = args.api_key or os.environ.get("FLOE_API_KEY", "")
    if not (args.cluster and api_key):
        raise BadInput("--api-url needs --cluster and an API key (--api-key or FLOE_API_KEY)")
    groups = get_all(
        args.api_url, cluster_path(args.cluster, "groups/"), api_key, args.request_timeout
    )
    rows = [
        {
            "group": group["group_id"],
            "topic": p["topic"],
            "partition": p["partition"],
            "committed_offset": p["committed_offset"],
            "high_watermark": p["high_watermark"],
            "lag": p["lag"],
            "lag_seconds": p["lag_seconds"],
        }
        for group in groups
        if not args.group or group["group_id"] in args.group
        for p in group["partitions"]
        if p["committed_offset"] is not None
    ]
    return sorted(rows, key=lambda r: (r["group"], r["topic"], r["partition"]))


def show_lag(args: argparse.Namespace) -> int:
    if args.api_url and args.bootstrap_server:
        raise BadInput("give -b (an agent) or --api-url (the control plane), not both")
    if args.api_url:
        rows = rest_group_lag(args)
    elif args.bootstrap_server:
        config = client_config(args)
        reachable(config, args.request_timeout)
        rows = group_lag(config, args.group, args.request_timeout)
    else:
        raise BadInput("give -b HOST:PORT (an agent) or --api-url (the control plane)")
    if args.json:
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    table = [COLUMNS] + [
        tuple(
            str(r[k])
            for k in ("group", "topic", "partition", "committed_offset", "high_watermark", "lag")
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(COLUMNS))]
    for row in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    return 0
