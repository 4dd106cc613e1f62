"""The rendezvous between a person's browse request and an agent's long-poll, in Redis.

The console's request runs in a thread of any web process; the agent's long-poll
(``browse/poll``) is held by the event loop of any web process (maybe another one). Both
meet in Redis, which every web process already reaches (it is the Celery broker), with
keys that expire by themselves:

- ``floe:browse:<cluster id>:pollers`` — a sorted set of the agents polling (one member
  per agent, scored by when its poll lapses, in ms): the console says at once that no
  agent is connected instead of waiting for nobody;
- ``floe:browse:<cluster id>:queue`` — the waiting requests, each ``{"id", "deadline",
  "query"}``; a poll takes one with BLPOP;
- ``floe:browse:request:<id>`` — which cluster (and topic, partition) a request id
  belongs to, so an answer is taken only from that cluster's agents;
- ``floe:browse:answer:<id>`` — the answer, which the console takes with BLPOP.

The control plane never connects to an agent: agents dial out, so a cluster whose
agents sit in a private network that only lets connections out can be browsed, and an
agent key cannot point the control plane at any address. Records pass through Redis
for the moment between the agent's answer and the console taking it (their keys
expire within seconds even when nobody takes them); nothing else keeps them.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any, cast

import redis
import redis.asyncio
from django.conf import settings

# A poll counts as connected for this long past its wait (the agent re-polls at once).
POLL_GRACE_S = 10.0
# A request nobody takes, or an answer nobody takes, lives at most this long in Redis.
KEY_TTL_S = 30
ANSWER_TTL_S = 10


@dataclass(frozen=True)
class Waiting:
    """A request the console is waiting on."""

    id: str
    payload: str  # as queued, to take it back when no agent took it


def redis_url() -> str:
    """The Redis URL for redis-py (the embedded Redis's ``redis+socket://`` is Celery's
    spelling of ``unix://``)."""
    url = settings.REDIS_URL
    return "unix://" + url.removeprefix("redis+socket://") if url.startswith("redis+") else url


_sync: dict[str, redis.Redis] = {}
_sync_lock = threading.Lock()


def sync_client() -> redis.Redis:
    """The process's Redis client for threads (the console, the agent API's threads):
    every call bounded (connect 2 s, each reply the console's wait plus 2 s)."""
    url = redis_url()
    with _sync_lock:
        if url not in _sync:
            _sync[url] = redis.Redis.from_url(
                url,
                socket_connect_timeout=2,
                socket_timeout=settings.FLOE_BROWSE_WAIT_S + 2,
                health_check_interval=30,
            )
        return _sync[url]


_async: dict[tuple[int, str], redis.asyncio.Redis] = {}


def async_client() -> redis.asyncio.Redis:
    """This event loop's Redis client (the web server's long-polls). A BLPOP holds a
    connection of its pool while it waits: one per agent polling this process."""
    key = (id(asyncio.get_running_loop()), redis_url())
    if key not in _async:
        _async[key] = redis.asyncio.Redis.from_url(
            key[1],
            socket_connect_timeout=2,
            socket_timeout=settings.FLOE_BROWSE_POLL_S + 5,
            health_check_interval=30,
        )
    return _async[key]


def _pollers(cluster_id: str) -> str:
    return f"floe:browse:{cluster_id}:pollers"


def _queue(cluster_id: str) -> str:
    return f"floe:browse:{cluster_id}:queue"


def _request(request_id: str) -> str:
    return f"floe:browse:request:{request_id}"


def _answer(request_id: str) -> str:
    return f"floe:browse:answer:{request_id}"


# --- the console's side ------------------------------------------------------------------


def agents_connected(cluster_id: str) -> int:
    """How many of the cluster's agents have a poll in progress (or just ended)."""
    client = sync_client()
    pipe = client.pipeline()
    pipe.zremrangebyscore(_pollers(cluster_id), "-inf", _ms(time.time()))
    pipe.zcard(_pollers(cluster_id))
    return int(pipe.execute()[1])


def request_send(cluster_id: str, query: dict[str, Any], *, wait_s: float) -> Waiting:
    """Queue a browse request for the cluster's agents; the first poll takes it."""
    request_id = secrets.token_urlsafe(24)
    payload = json.dumps(
        {"id": request_id, "deadline": time.time() + wait_s, "query": query},
        separators=(",", ":"),
    )
    owner = json.dumps({"cluster": cluster_id, **query}, separators=(",", ":"))
    pipe = sync_client().pipeline()
    pipe.set(_request(request_id), owner, ex=KEY_TTL_S)
    pipe.rpush(_queue(cluster_id), payload)
    pipe.expire(_queue(cluster_id), KEY_TTL_S)
    pipe.execute()
    return Waiting(request_id, payload)


def answer_wait(
    cluster_id: str, waiting: Waiting, *, wait_s: float
) -> tuple[dict[str, Any] | None, bool]:
    """(the answer, or None after `wait_s`; whether an agent took the request). A
    request nobody took is taken back, so no agent reads it after the person gave up."""
    client = sync_client()
    found = client.blpop([_answer(waiting.id)], timeout=wait_s)
    if found is not None:
        client.delete(_request(waiting.id))
        return json.loads(found[1]), True
    untaken = client.lrem(_queue(cluster_id), 1, waiting.payload)
    client.delete(_request(waiting.id))
    return None, not untaken


# --- the agent's side ----------------------------------------------------------------------


def _taken(popped: bytes | str | None) -> dict[str, Any] | None:
    """The request a poll popped, unless its console gave up waiting already."""
    if popped is None:
        return None
    request = json.loads(popped)
    if request["deadline"] < time.time():
        return None
    return {"id": request["id"], **request["query"]}


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


# Leave the set only if no newer poll of the same agent came meanwhile (a poll on a
# connection the agent gave up on can outlive its successor's start).
_LEAVE = """
if redis.call('ZSCORE', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('ZREM', KEYS[1], ARGV[1])
end
return 0
"""


async def poll(
    cluster_id: str, agent_id: str, *, wait_s: float, gone: asyncio.Event
) -> dict[str, Any] | None:
    """Wait up to `wait_s` for a browse request of the cluster: the request, or None.

    Registers the poll (the console then knows an agent is connected); when the agent
    hangs up (`gone`), the poll leaves and a request taken at that moment goes back to
    the head of the queue for the next poll."""
    client = async_client()
    pollers, queue = _pollers(cluster_id), _queue(cluster_id)
    deadline = time.monotonic() + wait_s
    lapses = _ms(time.time() + wait_s + POLL_GRACE_S)
    await client.zadd(pollers, {agent_id: lapses})
    await client.expire(pollers, int(wait_s + POLL_GRACE_S) + 1)
    hung_up = asyncio.ensure_future(gone.wait())
    try:
        while (left := deadline - time.monotonic()) > 0:
            # BLPOP's timeout has a one-second grain in old Redis versions: round up.
            taking = asyncio.ensure_future(client.blpop([queue], timeout=max(left, 1.0)))
            done, _ = await asyncio.wait({taking, hung_up}, return_when=asyncio.FIRST_COMPLETED)
            if taking not in done:
                taking.cancel()
                await client.eval(_LEAVE, 1, pollers, agent_id, str(lapses))
                return None
            popped = taking.result()
            if popped is not None and gone.is_set():
                await client.lpush(queue, popped[1])
                await client.eval(_LEAVE, 1, pollers, agent_id, str(lapses))
                return None
            request = _taken(None if popped is None else popped[1])
            if request is not None:
                return request
        return None
    finally:
        hung_up.cancel()


def poll_now(cluster_id: str, agent_id: str) -> dict[str, Any] | None:
    """A poll that does not wait (Django's WSGI view of ``browse/poll``: a WSGI thread is
    too dear to park): the first request still waiting, or None."""
    client = sync_client()
    client.zadd(_pollers(cluster_id), {agent_id: _ms(time.time() + POLL_GRACE_S)})
    while (popped := client.lpop(_queue(cluster_id))) is not None:
        request = _taken(cast(bytes, popped))  # one item: lpop without a count
        if request is not None:
            return request
    return None


def request_owner(request_id: str) -> dict[str, Any] | None:
    """The cluster id, topic and partition a waiting request belongs to, or None."""
    found = sync_client().get(_request(request_id))
    return None if found is None else json.loads(found)


def answer_post(request_id: str, answer: dict[str, Any]) -> None:
    """Hand `answer` to the console waiting on `request_id` (it expires unless taken)."""
    pipe = sync_client().pipeline()
    pipe.rpush(_answer(request_id), json.dumps(answer, separators=(",", ":")))
    pipe.expire(_answer(request_id), ANSWER_TTL_S)
    pipe.delete(_request(request_id))  # one answer per request
    pipe.execute()
