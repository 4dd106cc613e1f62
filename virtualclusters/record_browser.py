"""The console's message browser: a few records of a partition, read by a live agent of
the cluster over the channel the agent opens (`virtualclusters.browsing`).

The control plane holds no bucket credentials and stores no record data (seed 001: the
data stays in the customer's environment), and it never connects to an agent: agents
long-poll the agent API (``browse/poll``), one of them takes the request, reads through
its normal read path and posts the page back (``browse/answer``), which is passed on to
the person who asked and kept nowhere. A person waits at most ``FLOE_BROWSE_WAIT_S``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from virtualclusters.browsing.asking import (
    BrowseBadAnswer,
    BrowseNoAnswer,
    BrowseNotFound,
    BrowseUnavailable,
    agent_ask,
)
from virtualclusters.models import VirtualCluster

__all__ = [
    "BrowseBadAnswer",
    "BrowseNoAnswer",
    "BrowseNotFound",
    "BrowseUnavailable",
    "records_browse",
]

MAX_LIMIT = 500
# Decoders of keys and values framed with a registry schema id, set on start-up by the
# schema registry (`schema_registry.record_decoding`; this app cannot import that one):
# each sets ``key_decoded`` and ``value_decoded`` on the records of a page.
RECORD_DECODERS: list[Callable[[VirtualCluster, str, list[dict[str, Any]]], None]] = []


def records_browse(
    cluster: VirtualCluster,
    *,
    topic: str,
    partition: int,
    offset: int | None,
    limit: int,
    timestamp: int | None = None,
) -> dict[str, Any]:
    """Up to ``limit`` records of ``topic``/``partition`` from ``offset`` on, from the
    first record at or after ``timestamp`` (ms since the epoch; the agent resolves it as
    ListOffsets by time does) when one is given, else the newest, as an agent of
    ``cluster`` reads them: ``{"records": [{offset, timestamp, key, value, headers}],
    "log_start_offset", "high_watermark"}`` (and ``from_offset`` by time) with keys,
    values and header values in base64, and each record's ``key_decoded`` and
    ``value_decoded`` (`RECORD_DECODERS`; None when not framed with a schema id)."""
    query = {
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "limit": max(1, min(limit, MAX_LIMIT)),
        "timestamp": timestamp,
    }
    page = agent_ask(cluster, query, what="the records")
    for record in page.get("records", []):
        record["key_decoded"] = record["value_decoded"] = None
    for decode in RECORD_DECODERS:
        decode(cluster, topic, page.get("records", []))
    return page
