"""Fetch: resolve the requested topics and partitions, then read them (``read_path``)."""

from __future__ import annotations

from functools import partial
from typing import Any

from agents import read_path
from agents.context import AgentContext
from agents.zone_routing import client_zone
from core.kafka import RequestHeader
from core.kafka.codec import EncodedResponse, encode_response_body
from core.kafka.errors import ErrorCode


async def handle_fetch(
    ctx: AgentContext, header: RequestHeader, body: dict[str, Any]
) -> dict[str, Any]:
    """Kafka Fetch v4–v13, sessionless (KIP-227: session_id 0 means "no session")."""
    uses_ids = header.api_version >= 13
    if body.get("session_epoch", -1) > 0:
        # An incremental fetch on a session we never created (we always answer with
        # session id 0, so a client only gets here after talking to another broker).
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
            "session_id": 0,
            "responses": [],
        }

    topics = body["topics"]
    if uses_ids:
        found = await ctx.topics.by_ids(t["topic_id"] for t in topics)
        grown = [
            t["topic_id"]
            for t in topics
            if (info := found.get(t["topic_id"])) is not None
            and any(p["partition"] >= info.partitions for p in t["partitions"])
        ]
        if grown:  # partitions added through another agent: look again once
            ctx.topics.invalidate(topic_ids=grown)
            found = await ctx.topics.by_ids(t["topic_id"] for t in topics)
        infos = [found.get(t["topic_id"]) for t in topics]
    else:
        highest = {
            t["topic"]: max((p["partition"] for p in t["partitions"]), default=-1) for t in topics
        }
        found_by_name = await ctx.topics.by_names(highest, need_partition=highest)
        infos = [found_by_name.get(t["topic"]) for t in topics]

    responses = []
    wanted: list[read_path.Wanted] = []
    unknown = ErrorCode.UNKNOWN_TOPIC_ID if uses_ids else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    for topic, info in zip(topics, infos, strict=True):
        answers: list[dict[str, Any]] = []
        responses.append(
            {
                "topic": info.name if info else topic.get("topic"),
                "topic_id": topic.get("topic_id") or (info.topic_id if info else None),
                "partitions": answers,
            }
        )
        for request in topic["partitions"]:
            index = request["partition"]
            if info is None:
                answers.append(read_path.partition_answer(index, unknown))
            elif not 0 <= index < info.partitions:
                answers.append(
                    read_path.partition_answer(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                )
            else:
                item = read_path.Wanted(info, request)
                answers.append(item.answer)
                wanted.append(item)

    response = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}
    if not wanted:
        return response
    share = None
    if ctx.tail is not None and len(wanted) == sum(len(t["partitions"]) for t in topics):
        # Every partition is readable: an identical Fetch at the same tail gets the same
        # answer, encoded once (agents.shared_answers).
        share = (
            _shared_request_keys(header.api_version, body, uses_ids),
            partial(encode_response_body, header, response),
        )
    encoded = await read_path.fill(ctx, wanted, body, client_zone(header.client_id), share=share)
    return response if encoded is None else EncodedResponse(encoded)


# `_request_keys` by request body: identical Fetches share one decoded body
# (`agents.fetch_requests`), so consumers at the same offsets find their keys made. Each
# entry holds its body, so no other object can take its id while it is kept.
_KEYS: dict[
    tuple[int, int, bool], tuple[dict[str, Any], tuple[tuple[object, ...], tuple[object, ...]]]
] = {}
_KEYS_MAX = 1024


def _shared_request_keys(
    version: int, body: dict[str, Any], uses_ids: bool
) -> tuple[tuple[object, ...], tuple[object, ...]]:
    memo = (id(body), version, uses_ids)
    known = _KEYS.get(memo)
    if known is not None and known[0] is body:
        return known[1]
    keys = _request_keys(version, body, uses_ids)
    if len(_KEYS) >= _KEYS_MAX:
        del _KEYS[next(iter(_KEYS))]
    _KEYS[memo] = body, keys
    return keys


def _request_keys(
    version: int, body: dict[str, Any], uses_ids: bool
) -> tuple[tuple[object, ...], tuple[object, ...]]:
    """What of a Fetch request its answer depends on (the rest — max_wait_ms, rack, the
    client's id — changes how long it may wait or how it is counted, not what it gets):
    as sent, and with topics and partitions sorted (``agents.shared_answers``)."""
    head = (
        version,
        body.get("isolation_level") == 1,
        body.get("max_bytes", 0x7FFFFFFF),
        body.get("min_bytes", 1),
    )
    topics = tuple(
        (
            t["topic_id"] if uses_ids else t["topic"],
            tuple(
                (p["partition"], p["fetch_offset"], p["partition_max_bytes"])
                for p in t["partitions"]
            ),
        )
        for t in body["topics"]
    )
    in_order = tuple(sorted((str(topic), tuple(sorted(parts))) for topic, parts in topics))
    return (*head, topics), (*head, "sorted", in_order)
