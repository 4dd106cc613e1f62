"""The console's message browser: a few records of a partition, read by a live agent of
the cluster over the channel the agent opens (`virtualclusters.browsing`).

The control plane holds no bucket credentials and stores no record data (seed 001: the
data stays in the customer's environment), and it never connects to an agent: agents
long-poll the agent API (``browse/poll``), one of them takes the request, reads through
its normal read path and posts the page back (``browse/answer``), which is passed on to
the person who asked and kept nowhere. A person waits at most ``FLOE_BROWSE_WAIT_S``.
"""

from __future__ import annotations

import redis
from django.conf import settings

from virtualclusters.browsing import channel
from virtualclusters.models import VirtualCluster

MAX_LIMIT = 500


class BrowseUnavailable(Exception):
    """No agent of the cluster is connected (or the channel is down); the message says
    why. `status` is the HTTP status that says it best."""

    status = 409


class BrowseNotFound(LookupError):
    """The agent knows no such topic or partition."""


class BrowseBadAnswer(BrowseUnavailable):
    """An agent answered something the control plane refuses (502)."""

    status = 502


class BrowseNoAnswer(BrowseUnavailable):
    """No agent answered in time (504)."""

    status = 504


def records_browse(
    cluster: VirtualCluster,
    *,
    topic: str,
    partition: int,
    offset: int | None,
    limit: int,
    timestamp: int | None = None,
) -> dict:
    """Up to ``limit`` records of ``topic``/``partition`` from ``offset`` on, from the
    first record at or after ``timestamp`` (ms since the epoch; the agent resolves it as
    ListOffsets by time does) when one is given, else the newest, as an agent of
    ``cluster`` reads them: ``{"records": [{offset, timestamp, key, value, headers}],
    "log_start_offset", "high_watermark"}`` (and ``from_offset`` by time) with keys,
    values and header values in base64."""
    query = {
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "limit": max(1, min(limit, MAX_LIMIT)),
        "timestamp": timestamp,
    }
    wait_s = settings.FLOE_BROWSE_WAIT_S
    try:
        if not channel.agents_connected(cluster.public_id):
            raise BrowseUnavailable(
                "No live agent of this cluster is connected: start one to browse (agents "
                "connect out to the control plane; it never connects to them)."
            )
        waiting = channel.request_send(cluster.public_id, query, wait_s=wait_s)
        answer, taken = channel.answer_wait(cluster.public_id, waiting, wait_s=wait_s)
    except redis.RedisError as exc:
        down = BrowseUnavailable(
            f"The browse channel is unavailable (Redis: {type(exc).__name__}); try again."
        )
        down.status = 503
        raise down from None
    if answer is None:
        if taken:
            raise BrowseNoAnswer(
                f"An agent of this cluster took the request but did not answer within {wait_s} s."
            )
        raise BrowseNoAnswer(f"No agent of this cluster took the request within {wait_s} s.")
    if "refused" in answer:
        raise BrowseBadAnswer(f"The agent's answer was refused: {answer['refused']}")
    if "page" not in answer:
        if answer.get("not_found"):
            raise BrowseNotFound(answer.get("error", ""))
        raise BrowseBadAnswer(f"The agent could not read the records: {answer.get('error')}")
    return answer["page"]
