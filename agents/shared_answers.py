"""Fetch answers encoded once and sent to every consumer that asks the same (issue 28).

Consumers of many groups tailing a topic ask for the same partitions at the same offsets:
after each commit every one of them is woken and wants exactly the new runs. The first
such Fetch is planned from the tail index, read and encoded as usual; its encoded body is
kept here under the request (API version, isolation level, byte limits, and each topic's
partitions with their fetch offsets and limits), together with the state of the tail
index it was planned from: for each partition the index's entry (the object itself) and
its high watermark, log start and open-transaction offset. The next identical Fetch takes
the body as is while every one of those partitions still has that entry in that state —
nothing else can change the answer: the runs below the high watermark of an entry never
change (files are immutable; retention, DeleteRecords, compaction swaps and markers drop
the entry, and a reset of the feed drops them all) — and only while the feed is live.

Only answers that were sent because they held records (at least the request's
`min_bytes`), planned from the tail index with no partition error and no read error, are
kept; an empty answer is never shared (its Fetch would have waited). Bounded by the bytes
of the bodies held, least recently used out first.

A request has two keys: as sent, and with its topics and partitions in sorted order.
librdkafka rotates the order of its partitions from one Fetch to the next, so consumers at
the same offsets ask in up to as many orders as there are partitions. An answer that holds
every partition's records up to its end (no byte budget cut one) is the same in any order
— the budgets cut nothing in another order either — and is kept under the sorted key;
clients find a partition's answer by its topic and index, not its place. Others are kept
under the request as sent.

One build at a time per key: the Fetches woken by one commit arrive together, and a build
that waits (a read the cache does not hold) would otherwise see every other one miss and
build the same answer; they wait for it (`pending`, bounded) and take what it kept.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agents.metrics import Counter

if TYPE_CHECKING:
    from agents.tail_index import PartitionTail, TailIndex

MAX_BYTES = 16 * 1024 * 1024

SHARED = Counter(
    "floe_fetch_shared_answers_total",
    "Fetch answers, by whether their encoded body was taken from an identical earlier"
    " Fetch at the same tail (hit) or built and kept for the next ones (kept); waited:"
    " Fetches that waited for an identical one's build first.",
    ("outcome",),
)

# (topic id string, partition) and the entry's (object, high watermark, log start, txn)
State = tuple[tuple[str, int], "PartitionTail", int, int, int]


def snapshot(index: TailIndex, keys: list[tuple[str, int]]) -> tuple[State, ...] | None:
    """The index's state of these partitions, or None when it holds one of them not."""
    states: list[State] = []
    for key in keys:
        tail = index.get(key)
        if tail is None:
            return None
        states.append((key, tail, *_fields(tail)))
    return tuple(states)


def _fields(tail: PartitionTail) -> tuple[int, int, int]:
    """What of an entry can change in place (a commit extends it; the rest replaces it)."""
    return tail.high_watermark, tail.log_start_offset, tail.open_txn_offset


def _unchanged(index: TailIndex, states: tuple[State, ...]) -> bool:
    return all(
        index.get(key) is tail and _fields(tail) == (high, start, txn)
        for key, tail, high, start, txn in states
    )


@dataclass(frozen=True, slots=True)
class Answer:
    """An encoded Fetch body and what its sending counts: each answered partition's topic,
    record bytes and records, and the record bytes of the whole answer."""

    body: bytes
    states: tuple[State, ...]
    consumed: tuple[tuple[str, int, int], ...]
    total: int


class SharedAnswers:
    """`get(request_key, index)` or None; `put(...)` after building an answer."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._answers: OrderedDict[Hashable, Answer] = OrderedDict()
        self._bytes = 0
        self._building: dict[Hashable, asyncio.Future[None]] = {}

    def __len__(self) -> int:
        return len(self._answers)

    def get(self, keys: Sequence[Hashable], index: TailIndex) -> Answer | None:
        """The answer kept under one of `keys` (the request as sent, sorted), if its
        partitions are still as they were."""
        for key in keys:
            answer = self._answers.get(key)
            if answer is None:
                continue
            if not _unchanged(index, answer.states):
                self._remove(key)
                continue
            self._answers.move_to_end(key)
            SHARED.inc(1, "hit")
            return answer
        return None

    def pending(self, keys: Sequence[Hashable]) -> asyncio.Future[None] | None:
        """The build under way for one of `keys`, if any (done once it kept its answer,
        or found it could not)."""
        for key in keys:
            if (future := self._building.get(key)) is not None:
                SHARED.inc(1, "waited")
                return future
        return None

    def building(self, keys: Sequence[Hashable]) -> asyncio.Future[None]:
        """Mark a build of `keys` under way until `built` is called with what it returns."""
        future = asyncio.get_running_loop().create_future()
        for key in keys:
            self._building.setdefault(key, future)
        return future

    def built(self, keys: Sequence[Hashable], future: asyncio.Future[None]) -> None:
        for key in keys:
            if self._building.get(key) is future:
                del self._building[key]
        if not future.done():
            future.set_result(None)

    def put(self, key: Hashable, answer: Answer) -> None:
        if len(answer.body) > self.max_bytes:
            return
        self._remove(key)
        self._answers[key] = answer
        self._bytes += len(answer.body)
        SHARED.inc(1, "kept")
        while self._bytes > self.max_bytes:
            _, oldest = self._answers.popitem(last=False)
            self._bytes -= len(oldest.body)

    def clear(self) -> None:
        self._answers.clear()
        self._bytes = 0

    def _remove(self, key: Hashable) -> None:
        old = self._answers.pop(key, None)
        if old is not None:
            self._bytes -= len(old.body)
