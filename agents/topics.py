"""A short-lived local copy of the cluster's topic metadata (name ↔ id ↔ partition count).

Produce and Fetch need it on every request, so it must be a dictionary lookup, not an
HTTP call. Entries live `ttl_s` seconds. A topic this agent knows is answered from memory
even once its entry expired — stale-while-revalidate: one refresh runs in the background
(coalesced: at most one at a time, the names of every stale lookup meanwhile go into the
next; each bounded by `LIST_TIMEOUT_S`), whatever the state of the control-plane link, so
no lookup of a known topic waits for the control plane. A stale entry serves at most
`MAX_STALE_S` past its expiry (then the lookup waits, as for a miss). A miss (an unknown
name or id, a topic known not to exist whose negative entry expired, or a partition past
the cached count) asks the control plane, and concurrent misses share that call. Admin
handlers invalidate what they change so this agent sees its own changes at once; changes
made through other agents (a deleted topic, new configs) show up once a refresh answered,
i.e. within the TTL plus one refresh. While the control plane is unreachable, expired
entries still answer (`last_known`, and lookups that fail). With Ripcord
(`keep_through_outage()` true) a lookup does not even ask while the link is down: what this
agent knew answers at once, and a topic it never knew gets a retriable error.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from agents.control_plane import ControlPlaneClient, ControlPlaneUnavailable

# A topic listing is small and answered from indexes: waiting longer only delays the
# fallback to what this agent last knew.
LIST_TIMEOUT_S = 5.0
# With Ripcord, how often a lookup waiting on the control plane looks whether the link
# went down (then what the agent knew answers at once).
LINK_CHECK_S = 0.05
# How long past its expiry a topic this agent knew is still answered from memory while
# the background refresh has not answered (the control plane away, or slow): then the
# lookup waits for the control plane like a miss (and, that failing, answers what the
# agent last knew as before). Five minutes: as long as Ripcord keeps group leases through
# an outage, and short enough that a deletion is never ignored for long.
MAX_STALE_S = 300.0
# After a background refresh failed, the next one starts no sooner than this: a stale
# lookup per Produce must not become a topics/list per Produce to a struggling server.
REFRESH_RETRY_S = 1.0
# Kafka's default max.message.bytes (1 MiB + the 12-byte log overhead).
DEFAULT_MAX_MESSAGE_BYTES = 1048588


@dataclass(frozen=True)
class TopicInfo:
    """One topic as the control plane knows it; `configs` holds overrides only."""

    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, Any] = field(default_factory=dict)
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    # The migration mirroring the topic from another Kafka ("": none): read-only until
    # its cutover (docs/ARCHITECTURE.md "Migration").
    mirrored_by: str = ""

    @cached_property
    def topic_id_str(self) -> str:  # every Fetch names every partition's topic by it
        return str(self.topic_id)


def topic_from_json(item: dict[str, Any]) -> TopicInfo:
    """A `TopicInfo` from one entry of a `topics/list` answer."""
    configs = item.get("configs") or {}
    try:
        max_bytes = int(configs.get("max.message.bytes", DEFAULT_MAX_MESSAGE_BYTES))
    except (TypeError, ValueError):
        max_bytes = DEFAULT_MAX_MESSAGE_BYTES
    return TopicInfo(
        name=item["name"],
        topic_id=uuid.UUID(item["topic_id"]),
        partitions=int(item["partitions"]),
        configs=dict(configs),
        max_message_bytes=max_bytes,
        mirrored_by=str(item.get("mirrored_by") or ""),
    )


class TopicCache:
    """Topic metadata by name and by id, refreshed on miss and after `ttl_s`."""

    def __init__(
        self, client: ControlPlaneClient, *, ttl_s: float = 5.0, negative_ttl_s: float = 1.0
    ) -> None:
        self._client = client
        self._ttl = ttl_s
        self._negative_ttl = negative_ttl_s
        # name -> (expires_at, TopicInfo | None); None caches "does not exist" briefly so a
        # producer hammering a missing topic does not hammer the control plane.
        self._by_name: dict[str, tuple[float, TopicInfo | None]] = {}
        self._by_id: dict[uuid.UUID, tuple[float, TopicInfo]] = {}
        self._inflight: dict[frozenset[str] | None, asyncio.Future[None]] = {}
        # Stale-while-revalidate: the names (or the whole list: `_refresh_all`) to refresh
        # next, the one background refresh running, and when the last one failed.
        self._refresh_names: set[str] = set()
        self._refresh_all = False
        self._refresh_task: asyncio.Task[None] | None = None
        self._refresh_failed_at = -REFRESH_RETRY_S
        # Set by the runtime: whether Ripcord is on (then a down link is not even asked).
        self.keep_through_outage: Callable[[], bool] = lambda: False

    def invalidate(self, names: Iterable[str] = (), topic_ids: Iterable[uuid.UUID] = ()) -> None:
        """Forget these topics (after this agent created, deleted or changed them)."""
        for name in names:
            entry = self._by_name.pop(name, None)
            if entry and entry[1]:
                self._by_id.pop(entry[1].topic_id, None)
        for topic_id in topic_ids:
            entry_by_id = self._by_id.pop(topic_id, None)
            if entry_by_id:
                self._by_name.pop(entry_by_id[1].name, None)

    def store(self, topics: Iterable[TopicInfo]) -> None:
        """Remember freshly learned topics (e.g. from a `topics/create` answer)."""
        expires = time.monotonic() + self._ttl
        for topic in topics:
            self._by_name[topic.name] = (expires, topic)
            self._by_id[topic.topic_id] = (expires, topic)

    def peek(self, name: str) -> TopicInfo | None:
        """The cached topic if fresh; never calls the control plane."""
        entry = self._by_name.get(name)
        if entry and entry[0] > time.monotonic():
            return entry[1]
        return None

    def last_known(
        self, *, name: str | None = None, topic_id: uuid.UUID | None = None
    ) -> TopicInfo | None:
        """What this agent last knew of a topic, however old; never calls anyone (for
        answering while the control plane is unreachable)."""
        if name is not None:
            entry = self._by_name.get(name)
            return entry[1] if entry else None
        entry_by_id = self._by_id.get(topic_id) if topic_id is not None else None
        return entry_by_id[1] if entry_by_id else None

    def last_known_all(self) -> list[TopicInfo]:
        """Every topic this agent last knew of, however old, by name."""
        return sorted((t for _, t in self._by_name.values() if t is not None), key=lambda t: t.name)

    async def by_names(
        self, names: Iterable[str], *, need_partition: dict[str, int] | None = None
    ) -> dict[str, TopicInfo | None]:
        """Each name → its topic, or None when it does not exist.

        `need_partition` maps a name to the highest partition index the caller is about
        to use; a cached count that does not cover it counts as a miss (partitions may
        have been added through another agent).
        """
        now = time.monotonic()
        result: dict[str, TopicInfo | None] = {}
        missing: set[str] = set()
        revalidate: set[str] = set()
        for name in names:
            entry = self._by_name.get(name)
            if entry is None:
                missing.add(name)
                continue
            expires, topic = entry
            if expires <= now and (topic is None or now - expires >= MAX_STALE_S):
                missing.add(name)  # unknown (or known not to exist), or too stale
                continue
            if (
                need_partition
                and topic is not None
                and need_partition.get(name, -1) >= topic.partitions
            ):
                missing.add(name)
                continue
            if expires <= now:
                revalidate.add(name)  # known: answered now, refreshed in the background
            result[name] = topic
        if revalidate:
            self._refresh_in_background(revalidate)
        if missing:
            known = all((e := self._by_name.get(n)) is not None and e[1] for n in missing)
            try:
                await self._load_or_answer(frozenset(missing), known=known)
            except ControlPlaneUnavailable:
                # The control plane is away: what we last knew serves, if we knew it.
                stale = {name: self._by_name.get(name) for name in missing}
                if any(
                    entry is None
                    or entry[1] is None
                    or (need_partition and need_partition.get(name, -1) >= entry[1].partitions)
                    for name, entry in stale.items()
                ):
                    raise
                for name, entry in stale.items():
                    result[name] = entry[1] if entry else None
                return result
            for name in missing:
                entry = self._by_name.get(name)
                result[name] = entry[1] if entry else None
        return result

    async def by_ids(self, topic_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, TopicInfo | None]:
        """Each id → its topic, or None. A miss reloads the whole topic list (the API
        looks topics up by name only)."""
        now = time.monotonic()
        wanted = list(topic_ids)
        entries = [self._by_id.get(t) for t in wanted]
        if all(e is not None and now - e[0] < MAX_STALE_S for e in entries) and any(
            e is not None and e[0] <= now for e in entries
        ):
            self._refresh_in_background(None)  # all known: answered now, refreshed behind
        elif any(e is None or e[0] <= now for e in entries):
            try:
                await self._load_or_answer(None, known=all(t in self._by_id for t in wanted))
            except ControlPlaneUnavailable:
                # The control plane is away: what we last knew serves, if we knew them all.
                if any(t not in self._by_id for t in wanted):
                    raise
        return {t: (e[1] if (e := self._by_id.get(t)) else None) for t in wanted}

    async def all_topics(self) -> list[TopicInfo]:
        """Every topic of the cluster, freshly listed (while the control plane is away
        with Ripcord on: every topic this agent last knew of)."""
        try:
            await self._load_or_answer(None, known=bool(self._by_id))
        except ControlPlaneUnavailable:
            if not self.keep_through_outage():
                raise
            return self.last_known_all()
        now = time.monotonic()
        return sorted((t for exp, t in self._by_id.values() if exp > now), key=lambda t: t.name)

    def _refresh_in_background(self, names: set[str] | None) -> None:
        """Refresh these names (None: the whole list) behind the lookups that answered
        them stale: coalesced into the one background refresh, never awaited."""
        if names is None:
            self._refresh_all = True
        else:
            self._refresh_names |= names
        if self._refresh_task is not None and not self._refresh_task.done():
            return  # the running refresh takes these next
        if time.monotonic() - self._refresh_failed_at < REFRESH_RETRY_S:
            return  # the next stale lookup after the pause starts it
        self._refresh_task = asyncio.get_running_loop().create_task(self._refresh())

    async def _refresh(self) -> None:
        while self._refresh_all or self._refresh_names:
            names = None if self._refresh_all else frozenset(self._refresh_names)
            self._refresh_all = False
            self._refresh_names = set()
            try:
                await self._load(names, known=True)
            except Exception:  # noqa: BLE001 - stale answers go on; retried later
                self._refresh_failed_at = time.monotonic()
                return

    async def _load_or_answer(self, names: frozenset[str] | None, *, known: bool) -> None:
        """`_load` — but with Ripcord on and an answer from what this agent knew, stop
        waiting as soon as the link goes down (a frozen connection: the call would wait
        out its bounds, seconds, with every Produce of the topic behind it). The call
        goes on in the background and fills the cache if it is answered after all."""
        if not (known and self.keep_through_outage()):
            return await self._load(names, known=known)
        task = asyncio.ensure_future(self._load(names, known=known))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        while not task.done():
            await asyncio.wait([task], timeout=LINK_CHECK_S)
            if not task.done() and not self._client.link.up:
                raise ControlPlaneUnavailable(
                    "the control plane stopped answering (Ripcord: answering from what this "
                    "agent knew)",
                    outcome_unknown=False,
                )
        return task.result()

    async def _load(self, names: frozenset[str] | None, *, known: bool = False) -> None:
        """Ask the control plane — unless Ripcord is on, the link is down and the caller
        can answer from what it `known`s (a topic this agent never saw is still asked
        for: the link may be only briefly down, and a new topic deserves the chance)."""
        if known and self.keep_through_outage() and not self._client.link.up:
            raise ControlPlaneUnavailable(
                "the control plane is unreachable (Ripcord: answering from what this agent knew)",
                outcome_unknown=False,
            )
        # Single flight: concurrent misses for the same names wait on one call.
        pending = self._inflight.get(names)
        if pending is not None:
            await asyncio.wait([pending])
            if pending.cancelled():  # the caller that loaded went away; load ourselves
                return await self._load(names)
            return pending.result()
        future = asyncio.get_running_loop().create_future()
        self._inflight[names] = future
        try:
            answer = await self._client.call_with_retries(
                "topics/list",
                {"names": sorted(names) if names is not None else None},
                timeout_s=LIST_TIMEOUT_S,
            )
            self._apply(names, answer.get("topics", []))
            future.set_result(None)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: the waiters re-raise it, or nobody does
            raise
        finally:
            del self._inflight[names]

    def _apply(self, names: frozenset[str] | None, items: list[dict[str, Any]]) -> None:
        now = time.monotonic()
        found = [topic_from_json(item) for item in items]
        if names is None:
            # A full listing is authoritative: drop every id no longer present.
            self._by_id = {}
        self.store(found)
        present = {t.name for t in found}
        for name in names or ():
            if name not in present:
                stale = self._by_name.get(name)
                if stale and stale[1] is not None:
                    self._by_id.pop(stale[1].topic_id, None)
                self._by_name[name] = (now + self._negative_ttl, None)
        if names is None:
            for name, (_, topic) in list(self._by_name.items()):
                if topic is not None and name not in present:
                    self._by_name[name] = (now + self._negative_ttl, None)
