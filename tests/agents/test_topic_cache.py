"""The topic cache's stale-while-revalidate (agents/topics.py): a topic the agent knows is
answered from memory once its entry expired, while one refresh runs in the background —
whatever the control-plane link's state — so a slow or hung `topics/list` right after the
link came back (a web server just started, a control plane answering a frozen backlog)
does not hold a Produce of a known topic. Unit tests on a stand-in for the control-plane
client: they run in well under a second."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from agents import topics as topics_module
from agents.topics import TopicCache

TTL_S = 0.05
PROMPT_S = 0.5  # a lookup answered from memory takes microseconds; a hung call forever


class Link:
    up = True


class SlowControlPlane:
    """Answers `topics/list` from `topics`; while `hung` is set, every call waits until
    it is cleared (a web server that has just started, or a thawed connection)."""

    def __init__(self, topics: list[dict]):
        self.topics = topics
        self.calls: list[list[str] | None] = []
        self.link = Link()
        self.release = asyncio.Event()
        self.release.set()

    async def call_with_retries(self, name: str, body: dict, **_) -> dict:
        assert name == "topics/list"
        self.calls.append(body["names"])
        await self.release.wait()
        names = body["names"]
        return {"topics": [t for t in self.topics if names is None or t["name"] in names]}


def _topic(name: str, partitions: int = 3) -> dict:
    return {"name": name, "topic_id": str(uuid.uuid4()), "partitions": partitions, "configs": {}}


@pytest.mark.parametrize("ripcord", [False, True])
def test_a_hung_topic_listing_does_not_delay_a_known_topic(ripcord):
    known = _topic("orders")
    api = SlowControlPlane([known])
    known_id = uuid.UUID(known["topic_id"])

    async def scenario():
        cache = TopicCache(api, ttl_s=TTL_S)  # type: ignore[arg-type]
        cache.keep_through_outage = lambda: ripcord
        await cache.by_names(["orders"])
        await cache.by_ids([known_id])
        await asyncio.sleep(TTL_S * 2)  # both entries expired (an outage, a freeze)
        api.release.clear()  # the link is up, but the control plane does not answer yet
        calls_before = len(api.calls)
        # A Produce by name (with its partition) and a Fetch by id, many at once.
        by_name = await asyncio.wait_for(
            asyncio.gather(
                *(cache.by_names(["orders"], need_partition={"orders": 2}) for _ in range(50))
            ),
            PROMPT_S,
        )
        by_id = await asyncio.wait_for(cache.by_ids([known_id]), PROMPT_S)
        await asyncio.sleep(0)
        in_background = api.calls[calls_before:]
        # The topic is deleted through another agent; the control plane answers again.
        api.topics.clear()
        api.release.set()
        await asyncio.sleep(0.05)
        await asyncio.sleep(TTL_S * 2)
        after = await asyncio.wait_for(cache.by_names(["orders"]), PROMPT_S)
        after_id = await asyncio.wait_for(cache.by_ids([known_id]), PROMPT_S)
        return by_name, by_id, in_background, api.calls[calls_before:], after, after_id

    by_name, by_id, in_background, calls, after, after_id = asyncio.run(scenario())
    assert all(found["orders"] is not None for found in by_name)
    assert by_id[known_id] is not None and by_id[known_id].name == "orders"
    # One refresh for the 50 lookups by name, none awaited; the id's full listing was
    # coalesced behind it (one background refresh at a time) and ran once it answered.
    assert in_background == [["orders"]]
    assert calls[:2] == [["orders"], None]
    # Deleted meanwhile: noticed once a refresh answered (here at once: the background
    # refreshes that were hung answered without it).
    assert after["orders"] is None and after_id[known_id] is None


def test_unknown_topics_and_too_stale_entries_still_wait_for_the_control_plane(monkeypatch):
    api = SlowControlPlane([_topic("orders"), _topic("new")])

    async def scenario():
        cache = TopicCache(api, ttl_s=TTL_S)  # type: ignore[arg-type]
        await cache.by_names(["orders"])
        api.release.clear()
        unknown = asyncio.ensure_future(cache.by_names(["new"]))
        await asyncio.sleep(0.1)
        waited_unknown = not unknown.done()
        # Past the staleness cap a known topic waits like a miss.
        monkeypatch.setattr(topics_module, "MAX_STALE_S", 0.01)
        await asyncio.sleep(TTL_S * 2)
        stale = asyncio.ensure_future(cache.by_names(["orders"]))
        await asyncio.sleep(0.1)
        waited_stale = not stale.done()
        # A partition past the cached count waits too (partitions added elsewhere).
        monkeypatch.setattr(topics_module, "MAX_STALE_S", 300.0)
        grown = asyncio.ensure_future(cache.by_names(["orders"], need_partition={"orders": 5}))
        await asyncio.sleep(0.1)
        waited_grown = not grown.done()
        api.release.set()
        answers = await asyncio.wait_for(asyncio.gather(unknown, stale, grown), 1)
        return waited_unknown, waited_stale, waited_grown, answers

    waited_unknown, waited_stale, waited_grown, answers = asyncio.run(scenario())
    assert waited_unknown and waited_stale and waited_grown
    assert answers[0]["new"] is not None and answers[1]["orders"] is not None


def test_a_failing_refresh_keeps_answering_and_is_not_retried_per_lookup():
    api = SlowControlPlane([_topic("orders")])

    async def scenario():
        cache = TopicCache(api, ttl_s=TTL_S)  # type: ignore[arg-type]
        await cache.by_names(["orders"])
        await asyncio.sleep(TTL_S * 2)

        async def refuse(name: str, body: dict, **_) -> dict:
            from agents.control_plane import ControlPlaneUnavailable

            api.calls.append(body["names"])
            raise ControlPlaneUnavailable("refused", outcome_unknown=False)

        api.call_with_retries = refuse  # type: ignore[method-assign]
        calls_before = len(api.calls)
        answers = []
        for _ in range(100):
            answers.append(await asyncio.wait_for(cache.by_names(["orders"]), PROMPT_S))
            await asyncio.sleep(0.001)
        return answers, api.calls[calls_before:]

    answers, calls = asyncio.run(scenario())
    assert all(a["orders"] is not None for a in answers)
    assert len(calls) == 1  # then paused for REFRESH_RETRY_S
