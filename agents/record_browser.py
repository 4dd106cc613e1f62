"""Reading a few records of one partition for a person (the console's message browser).

The control plane asks over the channel the agent opens (`agents.browse_channel`: the
agent long-polls it and posts the page back), so the bucket stays the customer's: only
the agents hold its credentials, and the control plane never connects to an agent. The records come through the same read path as a consumer's Fetch (fetch
plan, zone cache, assigned base offsets) and go back as JSON, keys, values and header
values in base64.
"""

from __future__ import annotations

import base64
from typing import Any

from agents import read_path
from agents.context import AgentContext
from agents.handlers.offsets import handle_list_offsets
from agents.topics import TopicInfo
from core.kafka.records import decode_records, iter_batches

MAX_RECORDS = 500
# What one look reads from the partition at most; enough for MAX_RECORDS small records.
READ_BYTES = 4 * 1024 * 1024


class BrowseError(LookupError):
    """The request names no such topic or partition; the message says which."""


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


async def _read_from(
    ctx: AgentContext, info: TopicInfo, partition: int, offset: int
) -> dict[str, Any]:
    wanted = read_path.Wanted(
        info, {"partition": partition, "fetch_offset": offset, "partition_max_bytes": READ_BYTES}
    )
    await read_path.fill(
        ctx,
        [wanted],
        {"max_wait_ms": 0, "min_bytes": 0, "max_bytes": READ_BYTES},
        consumed=False,  # a person looking is no consumer: not throughput out
    )
    return wanted.answer


async def offset_for_time(ctx: AgentContext, *, topic: str, partition: int, timestamp: int) -> int:
    """The offset of the first record of `topic`/`partition` whose timestamp is at or
    after `timestamp` (ms), answered by the agent's own ListOffsets by time (KIP-79), or
    -1 when every record is older."""
    answer = await handle_list_offsets(
        ctx,
        None,
        {
            "isolation_level": 0,
            "topics": [
                {
                    "name": topic,
                    "partitions": [{"partition_index": partition, "timestamp": timestamp}],
                }
            ],
        },
    )
    found = answer["topics"][0]["partitions"][0]
    if found["error_code"]:
        raise BrowseError(
            f"finding the offset for a time failed (Kafka error {found['error_code']})"
        )
    offset: int = found["offset"]
    return offset


async def browse(
    ctx: AgentContext,
    *,
    topic: str,
    partition: int,
    offset: int | None,
    limit: int,
    timestamp: int | None = None,
) -> dict[str, Any]:
    """Up to `limit` records of `topic`/`partition` from `offset` on, from the first record
    at or after `timestamp` (ms since the epoch) when one is given, or the newest `limit`
    records when neither is; with the partition's start and end offsets and, by time,
    the offset the time resolved to (`from_offset`, -1: no record that late). By time
    the offset comes from this agent's own ListOffsets by time, so the browser and a
    consumer seeking to the time start at the same record."""
    info = (await ctx.topics.by_names([topic], need_partition={topic: partition})).get(topic)
    if info is None:
        raise BrowseError(f"no topic {topic!r}")
    if not 0 <= partition < info.partitions:
        raise BrowseError(f"topic {topic!r} has no partition {partition}")
    limit = max(1, min(limit, MAX_RECORDS))
    from_offset = None
    if timestamp is not None:
        from_offset = await offset_for_time(
            ctx, topic=topic, partition=partition, timestamp=timestamp
        )
        offset = from_offset
    answer = await _read_from(ctx, info, partition, max(offset or 0, 0))
    start, end = answer["log_start_offset"], answer["high_watermark"]
    if offset is not None and offset < 0:  # by time, every record is older: none to show
        offset, answer = end, {"error_code": 0, "records": []}
    elif offset is None or offset < start:
        offset = max(start, end - limit) if offset is None else start
        answer = await _read_from(ctx, info, partition, offset)
    if answer["error_code"]:
        raise BrowseError(f"reading the partition failed (Kafka error {answer['error_code']})")
    pieces = answer["records"] or []
    data = b"".join(bytes(p) for p in pieces) if isinstance(pieces, list) else bytes(pieces)
    records: list[dict[str, Any]] = []
    for position, size, header in iter_batches(data):
        if header.is_control:
            continue
        _, decoded = decode_records(data[position : position + size], verify_crc=False)
        for record in decoded:
            if record.offset < offset or len(records) >= limit:
                continue
            records.append(
                {
                    "offset": record.offset,
                    "timestamp": record.timestamp,
                    "key": _b64(record.key),
                    "value": _b64(record.value),
                    "headers": [[name, _b64(value)] for name, value in record.headers],
                }
            )
    found: dict[str, Any] = {
        "topic": topic,
        "partition": partition,
        "log_start_offset": start,
        "high_watermark": end,
        "records": records,
    }
    if from_offset is not None:
        found["from_offset"] = from_offset
    return found
