"""Agent API calls of the browse channel (docs/AGENT_API.md "browse/…"): an agent's
long-poll for the console's browse requests, and its answers.

The control plane trusts nothing an agent sends: an answer must name a request of the
agent key's own cluster that is still waiting, for the topic and partition asked, and
fit `schemas.BrowsedPage` (bounded: at most 500 records, base64 strings, offsets within
the partition's range) in at most `MAX_ANSWER_BYTES`; anything else is refused, and the
waiting person is told the agent's answer was refused (a 502) rather than left waiting.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
import redis
from django.conf import settings

from metadata_store.agent_api import schemas
from metadata_store.agent_api.endpoint import CallRefused, endpoint
from virtualclusters.browsing import channel
from virtualclusters.models import VirtualCluster

# A page of 500 small records is a few hundred KiB; a few large ones can be more. What the
# console shows of a page never needs more than this.
MAX_ANSWER_BYTES = 8 * 1024 * 1024

_Decoded = TypeVar("_Decoded")
_page = msgspec.json.Decoder(schemas.BrowsedPage)

# How an answer to each other kind of request than records (a query's ``kind``) is
# checked: ``(raw answer, the waiting request) -> what the console takes``, or
# `schemas.BadBody`. The apps that ask register theirs at start-up (`schema_registry`:
# ``schema_texts``); a kind nobody registered is refused.
ANSWER_CHECKS: dict[str, Callable[[bytes, dict[str, Any]], dict[str, Any]]] = {}


def _redis_down(exc: redis.RedisError | OSError) -> CallRefused:
    return CallRefused(503, f"the browse channel is unavailable (Redis: {type(exc).__name__})")


def answer_decoded(
    raw: bytes, decoder: msgspec.json.Decoder[_Decoded], *, what: str, max_bytes: int
) -> _Decoded:
    """`raw` decoded by `decoder` (at most `max_bytes`), or `schemas.BadBody` saying what
    is wrong with `what` (the page, the schema texts)."""
    if len(raw) > max_bytes:
        raise schemas.BadBody(f"the {what} is larger than {max_bytes} bytes")
    try:
        return decoder.decode(raw)
    except msgspec.DecodeError as exc:  # ValidationError included
        raise schemas.BadBody(f"{what}: {exc}") from None


def _check_page(raw: bytes, owner: dict[str, Any]) -> dict[str, Any]:
    """The page as the console will read it, or `schemas.BadBody` saying what is wrong."""
    page = answer_decoded(raw, _page, what="page", max_bytes=MAX_ANSWER_BYTES)
    if (page.topic, page.partition) != (owner["topic"], owner["partition"]):
        raise schemas.BadBody("page: another topic or partition than the one asked")
    if page.log_start_offset > page.high_watermark:
        raise schemas.BadBody("page: log_start_offset is past high_watermark")
    if any(not page.log_start_offset <= r.offset < page.high_watermark for r in page.records):
        raise schemas.BadBody("page: a record's offset is outside the partition's range")
    built: dict[str, Any] = msgspec.to_builtins(page)
    return built


@endpoint(schemas.BrowsePollRequest)
def browse_poll(cluster: VirtualCluster, body: schemas.BrowsePollRequest) -> dict[str, Any]:
    """Django's view of the poll answers at once; the web server's event loop holds it
    open (`browse_poll_on_loop`)."""
    try:
        return {"request": channel.poll_now(cluster.public_id, body.agent_id)}
    except redis.RedisError as exc:
        raise _redis_down(exc) from None


async def browse_poll_on_loop(
    cluster: VirtualCluster, body: schemas.BrowsePollRequest, gone: asyncio.Event
) -> dict[str, Any]:
    """The long-poll: a browse request of the cluster, or none after
    ``FLOE_BROWSE_POLL_S`` (the agent polls again)."""
    try:
        request = await channel.poll(
            cluster.public_id, body.agent_id, wait_s=settings.FLOE_BROWSE_POLL_S, gone=gone
        )
    except (redis.RedisError, OSError) as exc:
        raise _redis_down(exc) from None
    return {"request": request}


browse_poll.on_loop = browse_poll_on_loop


@endpoint(schemas.BrowseAnswerRequest)
def browse_answer(cluster: VirtualCluster, body: schemas.BrowseAnswerRequest) -> dict[str, Any]:
    try:
        owner = channel.request_owner(body.id)
        if owner is None or owner["cluster"] != cluster.public_id:
            raise CallRefused(404, f"no browse request {body.id!r} is waiting for this cluster")
        if bytes(body.page) == b"null":
            answer = {"error": body.error or "no reason given", "not_found": body.not_found}
        else:
            try:
                kind = owner.get("kind")
                check = _check_page if kind is None else ANSWER_CHECKS.get(kind)
                if check is None:
                    raise schemas.BadBody(f"no answer to a {kind!r} request is taken")
                page = check(bytes(body.page), owner)
                answer = {"page": {**page, "agent": body.agent_id or "an agent"}}
            except schemas.BadBody as exc:
                channel.answer_post(body.id, {"refused": str(exc)})
                raise
        channel.answer_post(body.id, answer)
    except redis.RedisError as exc:
        raise _redis_down(exc) from None
    return {"ok": True}
