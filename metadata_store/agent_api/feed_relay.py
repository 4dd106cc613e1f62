"""The tail feed's relay: every web process listens on ``floe_tail`` and serves its
clusters' agents the notifications as a long-poll (``tail-feed``, docs/AGENT_API.md).

One connection of its own LISTENs (``metadata_store.tail_feed``: the commits' runs, the
other changes' partitions, in commit order). Each notification gets the next sequence
number of the relay's epoch and joins a ring (as it came: it is parsed, and its
partitions — named by row id — get their topic id and index, read once on a second
connection, when an agent first asks for it) of the last ``RING`` ones; an agent asks for
what came after the last one it saw, `(epoch, seq)`, and waits at most a few seconds
for it. The epoch is new whenever the listener (re)connects — notifications sent while
nobody listened are lost — and whenever the process starts, so an agent whose position
is not in the ring, or of another epoch (another web process, a restart, a reconnect)
is told to start again (`reset`): it forgets its tail index and learns the partitions
anew from their next runs. While the listener is not connected the relay says so
(`live` false), and agents plan every fetch through the control plane.

The connection is checked every ``CHECK_S`` of silence with a bounded ``SELECT 1``; a
failure closes it and the relay reconnects after ``RECONNECT_S``.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from prometheus_client import Counter, Gauge

from metadata_store import tail_feed

log = logging.getLogger(__name__)

NAMES_SQL = 'SELECT id, topic_id, "index" FROM floe_partition WHERE id = ANY(%s)'
NAMES = 1_000_000  # partitions named at most (then forgotten, and asked again)
RING = 8192  # notifications kept for agents that come back (of every cluster)
MAX_ENTRIES = 2000  # notifications per answer; the agent asks again at once
MAX_WAIT_S = 10.0
RECONNECT_S = 1.0
CHECK_S = 5.0
CONNECT_TIMEOUT_S = 5

NOTES = Counter("floe_tail_feed_notifications_total", "Tail-feed notifications relayed.")
RESETS = Counter("floe_tail_feed_resets_total", "Tail-feed answers that told an agent to reset.")
CONNECTED = Gauge("floe_tail_feed_connected", "Whether the tail-feed relay is listening.")


# A ring item: [seq, cluster id, payload, received at (ms), its entries once parsed].
_Item = list[Any]
Lookup = Callable[[list[int]], Awaitable[list[tuple[int, Any, int]]]]


class Relay:
    """The ring of one web process. `run(conninfo)` listens until cancelled;
    `poll(cluster_id, epoch, after, wait_s, gone)` answers an agent.

    A notification is kept as it came: only its header is read when it arrives (the
    relay shares the web process's loop with the commit pipeline, and a busy cluster's
    commits bring thousands of runs a second), and its runs are parsed — and their
    partitions named, ``lookup`` (row ids → topic id, index) for those not yet known —
    once, when an agent first asks for it."""

    def __init__(self, ring: int = RING, lookup: Lookup | None = None) -> None:
        self.epoch = ""
        self.seq = 0
        self.live = False
        self._ring: deque[_Item] = deque(maxlen=ring)  # seq is contiguous within an epoch
        self._names: dict[int, tuple[str, int]] = {}  # partition row id -> (topic id, index)
        self._lookup = lookup
        self._changed: asyncio.Event | None = None

    def _event(self) -> asyncio.Event:
        if self._changed is None:
            self._changed = asyncio.Event()
        return self._changed

    def _wake(self) -> None:
        event = self._event()
        event.set()
        self._changed = asyncio.Event()

    def restart(self, live: bool) -> None:
        """A new epoch: what the last one promised cannot be kept."""
        self.epoch = secrets.token_hex(8)
        self.seq = 0
        self._ring.clear()
        self.live = live
        CONNECTED.set(1 if live else 0)
        self._wake()

    def add(self, payload: str) -> None:
        """One notification, in order, as it arrived (its header read: its cluster)."""
        head = payload.partition("\n")[0].split(" ")
        if len(head) < 2 or head[0] not in ("r", "x", "c") or not head[1].isdigit():
            log.error("tail feed: not a notification of ours: %r; a new epoch", payload[:80])
            self.restart(self.live)  # lost, so the agents start again
            return
        self.seq += 1
        self._ring.append([self.seq, int(head[1]), payload, int(time.time() * 1000), None])
        NOTES.inc()
        self._wake()

    def names(self, rows: list[tuple[int, Any, int]]) -> None:
        """(partition row id, topic id, index) of partitions (row ids never change)."""
        if len(self._names) > NAMES:
            self._names.clear()
        for pid, topic_id, index in rows:
            self._names[pid] = (str(topic_id), index)

    def _entries(self, note: tail_feed.Note, seq: int, at_ms: int) -> list[dict[str, Any]]:
        """What agents get of a note — an entry per file of a commit, its partitions named
        (runs of partitions that are gone — their topic deleted — are left out), one of
        the partitions created, or one of the partitions changed otherwise."""
        if note.created:
            return [{"seq": seq, "at_ms": at_ms, "created": [list(c) for c in note.created]}]
        if not note.files:
            return [{"seq": seq, "at_ms": at_ms, "changed": [list(c) for c in note.changed]}]
        return [
            {
                "seq": seq,
                "at_ms": at_ms,
                "file_key": file_key,
                "runs": [
                    [
                        *self._names[r.partition_id],
                        r.base_offset,
                        r.last_offset,
                        r.pos,
                        r.len,
                        r.batch_count,
                        r.open_txn_offset,
                        r.log_start_offset,
                    ]
                    for r in runs
                    if r.partition_id in self._names
                ],
            }
            for file_key, runs in note.files
        ]

    async def _after(self, cluster_id: int, after: int) -> tuple[list[dict[str, Any]], int] | None:
        """The cluster's entries after `after`, parsed and named, of at most
        ``MAX_ENTRIES`` notifications, and the position they bring the agent to; None
        when one could not be parsed (the epoch is then new)."""
        if not self._ring:
            return [], self.seq
        epoch = self.epoch
        start = max(0, after + 1 - self._ring[0][0])
        items = [
            item for item in itertools.islice(self._ring, start, None) if item[1] == cluster_id
        ]
        seq = items[MAX_ENTRIES - 1][0] if len(items) > MAX_ENTRIES else self.seq
        items = items[:MAX_ENTRIES]
        unparsed = [item for item in items if item[4] is None]
        if unparsed:
            notes = []
            try:
                notes = [tail_feed.parse(item[2]) for item in unparsed]
            except ValueError as exc:
                log.error("tail feed: %s; a new epoch", exc)
                self.restart(self.live)
                return None
            unknown = sorted({r.partition_id for n in notes for r in n.runs} - self._names.keys())
            if unknown:
                if self._lookup is None:
                    raise RuntimeError("the tail feed's relay cannot name partitions")
                self.names(await self._lookup(unknown))
                if self.epoch != epoch:  # restarted meanwhile: the items are gone
                    return None
            for item, note in zip(unparsed, notes, strict=True):
                item[4] = self._entries(note, item[0], item[3])
        return [entry for item in items for entry in item[4]], seq

    def _answer(
        self, entries: list[dict[str, Any]], seq: int | None = None, *, reset: bool = False
    ) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "seq": self.seq if seq is None else seq,
            "live": self.live,
            "reset": reset,
            "now_ms": int(time.time() * 1000),
            "entries": entries,
        }

    async def poll_now(self, cluster_id: int, epoch: str, after: int) -> dict[str, Any] | None:
        """The answer to give at once, or None: nothing yet, wait."""
        if not self.live:
            return self._answer([], reset=True)
        first = self._ring[0][0] if self._ring else self.seq + 1
        if epoch != self.epoch or after > self.seq or after < first - 1:
            RESETS.inc()
            return self._answer([], reset=True)
        found = await self._after(cluster_id, after)
        if found is None:
            RESETS.inc()
            return self._answer([], reset=True)
        entries, seq = found
        if entries:
            return self._answer(entries, seq)
        return None

    async def poll(
        self, cluster_id: int, epoch: str, after: int, wait_s: float, gone: asyncio.Event
    ) -> dict[str, Any]:
        """What came after `after` of `epoch` for the cluster, waiting up to `wait_s` for
        something (the answer then carries the relay's position and no entries)."""
        deadline = time.monotonic() + min(max(wait_s, 0.0), MAX_WAIT_S)
        while True:
            answer = await self.poll_now(cluster_id, epoch, after)
            if answer is not None:
                return answer
            # Nothing of this cluster yet: move past what others' notifications used.
            after = self.seq
            remaining = deadline - time.monotonic()
            if remaining <= 0 or gone.is_set():
                return self._answer([])
            changed = asyncio.ensure_future(self._event().wait())
            left = asyncio.ensure_future(gone.wait())
            try:
                await asyncio.wait(
                    {changed, left}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                changed.cancel()
                left.cancel()

    async def run(self, conninfo: str) -> None:
        """Listen and relay until cancelled, reconnecting after failures."""
        while True:
            try:
                # Each connection closes with its block, a cancelled connect's too.
                async with (
                    await psycopg.AsyncConnection.connect(
                        conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S
                    ) as conn,
                    await psycopg.AsyncConnection.connect(
                        conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S
                    ) as names,
                ):
                    self._lookup = functools.partial(_lookup, names, asyncio.Lock())
                    await conn.execute(f"LISTEN {tail_feed.CHANNEL}")
                    self.restart(live=True)
                    while True:
                        got = False
                        async for notification in conn.notifies(timeout=CHECK_S):
                            got = True
                            self.add(notification.payload)
                        # A lookup that failed left the naming connection broken (its
                        # backend killed or restarted while LISTEN's lived): every poll
                        # naming a partition would fail until both connect again.
                        if names.broken:
                            raise psycopg.OperationalError("the naming connection was lost")
                        if not got:
                            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                                await conn.execute("SELECT 1")
                                await names.execute("SELECT 1")
            except (psycopg.Error, OSError, TimeoutError) as exc:
                log.warning("tail feed: %s; listening again in %.0f s", exc, RECONNECT_S)
            finally:
                self._lookup = None
                if self.live:
                    self.restart(live=False)
            await asyncio.sleep(RECONNECT_S)


async def _lookup(
    names: psycopg.AsyncConnection[Any], lock: asyncio.Lock, pids: list[int]
) -> list[tuple[int, Any, int]]:
    """(row id, topic id, index) of these partitions, one query at a time on `names`
    (bounded by the agent API's statement timeout in its connection string)."""
    async with lock:
        cursor = await names.execute(NAMES_SQL, [pids])
        return await cursor.fetchall()


RELAY = Relay()
