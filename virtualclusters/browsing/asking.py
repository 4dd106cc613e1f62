"""Asking a live agent of a cluster over the browse channel (`channel`): the console's
and the REST API's reads of what only the cluster's agents may read — records
(`virtualclusters.record_browser`), schema texts (`schema_registry.browser`).

The request is queued for the cluster's agents, one of them takes it over its long-poll
and posts the answer back (``browse/answer``, checked there by the request's kind); the
person who asked waits at most ``FLOE_BROWSE_WAIT_S``. Nothing of the answer is kept.
"""

from __future__ import annotations

from typing import Any

import redis
from django.conf import settings

from virtualclusters.browsing import channel
from virtualclusters.models import VirtualCluster


class BrowseUnavailable(Exception):
    """No agent of the cluster is connected (or the channel is down); the message says
    why. `status` is the HTTP status that says it best."""

    status = 409


class BrowseNotFound(LookupError):
    """The agent knows no such thing (topic, partition, schema text)."""


class BrowseBadAnswer(BrowseUnavailable):
    """An agent answered something the control plane refuses (502)."""

    status = 502


class BrowseNoAnswer(BrowseUnavailable):
    """No agent answered in time (504)."""

    status = 504


def agent_ask(cluster: VirtualCluster, query: dict[str, Any], *, what: str) -> dict[str, Any]:
    """What a live agent of `cluster` answers `query` (its ``page``, as the browse
    channel checked it, with ``agent``: which agent). `what` names what is read in the
    messages (``"the records"``)."""
    wait_s = settings.FLOE_BROWSE_WAIT_S
    try:
        if not channel.agents_connected(cluster.public_id):
            raise BrowseUnavailable(
                f"No live agent of this cluster is connected to read {what}: start one "
                "(agents connect out to the control plane; it never connects to them)."
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
        raise BrowseBadAnswer(f"The agent could not read {what}: {answer.get('error')}")
    page: dict[str, Any] = answer["page"]
    return page
