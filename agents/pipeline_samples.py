"""A pipeline's dry run on this agent (the browse channel's ``pipeline_dry_run``): the
newest records of the input topics, read as the message browser reads them
(`agents.record_browser`), run through `core.pipelines.dry_run` — nothing is written,
no offset committed. The control plane checks the configuration against the cluster
before it asks, and checks the answer (``virtualclusters.pipelines.dry_run``)."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

from agents import record_browser
from agents.context import AgentContext
from core.pipelines import InRecord, dry_run

MAX_SAMPLES = 100
MAX_TOPICS = 16
# Partitions read at once: a topic of many partitions is read a few at a time.
READ_CONCURRENCY = 8


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


async def newest_records(ctx: AgentContext, topics: list[str], limit: int) -> list[InRecord]:
    """The newest `limit` records of `topics` (all their partitions), oldest first."""
    infos = await ctx.topics.by_names(topics)
    slots = asyncio.Semaphore(READ_CONCURRENCY)

    async def read(topic: str, partition: int) -> dict[str, Any]:
        async with slots:
            return await record_browser.browse(
                ctx, topic=topic, partition=partition, offset=None, limit=limit
            )

    reads = []
    for topic in topics:
        info = infos.get(topic)
        if info is None:
            raise record_browser.BrowseError(f"no topic {topic!r}")
        reads += [read(topic, p) for p in range(info.partitions)]
    records = [
        InRecord(
            topic=page["topic"],
            partition=page["partition"],
            offset=r["offset"],
            timestamp_ms=r["timestamp"],
            key=_bytes(r["key"]),
            value=_bytes(r["value"]),
            headers=tuple((name, _bytes(value)) for name, value in r["headers"]),
        )
        for page in await asyncio.gather(*reads)
        for r in page["records"]
    ]
    records.sort(key=lambda r: (r.timestamp_ms, r.topic, r.partition, r.offset))
    return records[-limit:]


async def dry_run_answer(ctx: AgentContext, request: dict[str, Any]) -> dict[str, Any]:
    """The page to answer a ``pipeline_dry_run`` request with: `core.pipelines.dry_run`'s
    result on the newest records of the input topics."""
    config, topics, limit = request.get("config"), request.get("topics"), request.get("limit")
    if (
        not isinstance(config, str)
        or not isinstance(topics, list)
        or not all(isinstance(t, str) for t in topics)
        or not 1 <= len(topics) <= MAX_TOPICS
        or not isinstance(limit, int)
        or not 1 <= limit <= MAX_SAMPLES
    ):
        raise ValueError(
            "bad pipeline_dry_run request: config (text), topics (1-16 names) and "
            f"limit (1-{MAX_SAMPLES}) are needed"
        )
    samples = await newest_records(ctx, topics, limit)
    # The engine is CPU work (expressions): off the event loop that serves Kafka.
    result: dict[str, Any] = await asyncio.to_thread(dry_run, config, samples)
    return result
