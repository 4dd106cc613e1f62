"""Idempotent producers on the journal path: what the agent can check before it answers.

A lightning batch is answered before the control plane checks its sequence (that happens
when the journal is sequenced). This agent has seen the producer's earlier batches to the
partition, though, when the producer keeps writing through it — the usual case, as a
partition's produce goes to one agent: a batch that does not follow the last one answered
(a gap) is refused here with OUT_OF_ORDER_SEQUENCE_NUMBER, before it is acknowledged, as
Kafka's leader would. A resent batch (a sequence already answered) passes: its commit is
recognised as a duplicate. What this agent has not seen (a producer that moved here from
another agent, state older than `window_s`) passes and is checked when sequenced; a batch
refused then was acknowledged already, and the producer's next batch to the partition is
answered with the refusal instead (`SegmentWriter.refused_after_ack`).
"""

from __future__ import annotations

import time
from typing import Any

from core.kafka.records import BatchHeader

SEQUENCE_WRAP = 2**31  # KIP-98: sequences wrap to 0 after Int32.MAX_VALUE


class SequenceWatch:
    """The next sequence expected of each (producer, topic, partition) on this agent."""

    def __init__(self, *, window_s: float = 30.0, max_entries: int = 100_000) -> None:
        self.window_s = window_s
        self.max_entries = max_entries
        self._next: dict[tuple[int, str, int], tuple[int, int, float]] = {}

    def gap(self, topic_id: str, partition: int, header: BatchHeader) -> str | None:
        """Why the batch cannot follow what was answered before (a sequence gap), or None."""
        if header.producer_id < 0:
            return None
        known = self._next.get((header.producer_id, topic_id, partition))
        if known is None:
            return None
        epoch, expected, seen_at = known
        if epoch != header.producer_epoch or time.monotonic() - seen_at > self.window_s:
            return None  # a new epoch starts its own sequences; stale: let the commit judge
        ahead = (header.base_sequence - expected) % SEQUENCE_WRAP
        if ahead == 0 or ahead > SEQUENCE_WRAP // 2:  # the next one, or a resend
            return None
        return (
            f"sequence {header.base_sequence} of producer {header.producer_id} does not follow"
            f" {expected - 1 if expected else SEQUENCE_WRAP - 1}: {ahead} sequences missing"
        )

    def answered(self, topic_id: str, partition: int, header: BatchHeader) -> None:
        """The batch is taken (it will be answered from the journal)."""
        if header.producer_id < 0:
            return
        key = (header.producer_id, topic_id, partition)
        known = self._next.get(key)
        following = (header.base_sequence + header.record_count) % SEQUENCE_WRAP
        if known is not None and known[0] == header.producer_epoch:
            ahead = (following - known[1]) % SEQUENCE_WRAP
            if ahead > SEQUENCE_WRAP // 2:  # a resend of an earlier batch: keep the newest
                following = known[1]
        if len(self._next) >= self.max_entries and key not in self._next:
            self._next.pop(next(iter(self._next)))  # the oldest producer seen
        self._next[key] = (header.producer_epoch, following, time.monotonic())


class GapHold:
    """Batches answered from the journal whose commit found a sequence gap, held per
    (producer, topic, partition) to be journaled again together, in sequence order.

    A gap at sequencing means the producer's earlier batch to the partition is
    acknowledged in another journal not sequenced yet: the producer moved to this agent
    (partition leaders follow the agents' load and liveness) while its earlier batches
    wait in the other agent's journal, or in a dead agent's until another takes it over.
    The metadata store takes a producer's batches only in sequence order, so a held batch
    commits once its predecessor has, and never twice. What must not happen is this agent
    sending the held batches back out of order (each retried on its own clock: a later
    one ahead of an earlier one is refused again, round after round, until patience ran
    out): all of a partition's held batches go back in one append, sorted.

    Patience runs while nothing of the partition commits and the control plane is up:
    a key is given up only after `patience_s` without progress, counted from the later of
    its first hold, its last committed batch and the end of the last outage."""

    def __init__(self, *, patience_s: float) -> None:
        self.patience_s = patience_s
        self._held: dict[tuple[int, str, int], dict[tuple[int, int], Any]] = {}
        self._held_at: dict[tuple[int, str, int], float] = {}  # monotonic: first held
        self._since: dict[tuple[int, str, int], float] = {}  # monotonic: last progress

    def __bool__(self) -> bool:
        return bool(self._held)

    def committed(self, key: tuple[int, str, int]) -> None:
        """A batch of `key` was committed: progress."""
        if key in self._since:
            self._since[key] = time.monotonic()

    def hold(self, key: tuple[int, str, int], header: BatchHeader, batch: Any) -> None:
        self._held.setdefault(key, {})[(header.producer_epoch, header.base_sequence)] = batch
        now = time.monotonic()
        self._since.setdefault(key, now)
        self._held_at.setdefault(key, now)

    def backlog(self) -> tuple[int, float | None]:
        """Bytes held (acknowledged, not sequenced) and when the oldest was first held."""
        size = sum(len(b.data) for held in self._held.values() for b in held.values())
        return size, min(self._held_at.values(), default=None)

    def out_of_patience(self, key: tuple[int, str, int], link_up_for_s: float) -> bool:
        """No progress on `key` for `patience_s` while the control plane was up."""
        since = self._since.get(key)
        if since is None:
            return False
        waited = min(time.monotonic() - since, link_up_for_s)
        return waited > self.patience_s

    def take(self, key: tuple[int, str, int]) -> list[Any]:
        """The held batches of `key`, in sequence order (epoch first), to append again."""
        held = self._held.pop(key, {})
        sequences = [seq for _, seq in held]
        # Sequences wrap to 0 after 2**31 - 1: held ones on both sides of it sort by
        # their place in a window shifted by half the range.
        shift = (
            SEQUENCE_WRAP // 2
            if sequences and max(sequences) - min(sequences) > SEQUENCE_WRAP // 2
            else 0
        )
        return [held[k] for k in sorted(held, key=lambda k: (k[0], (k[1] + shift) % SEQUENCE_WRAP))]

    def give_up(self, key: tuple[int, str, int]) -> list[Any]:
        """Patience ran out: the held batches of `key`, forgotten."""
        self._since.pop(key, None)
        self._held_at.pop(key, None)
        return self.take(key)

    def settled(self, key: tuple[int, str, int]) -> None:
        """A batch of `key` journaled again was committed: when nothing of it is held,
        forget its clocks."""
        if key not in self._held:
            self._since.pop(key, None)
            self._held_at.pop(key, None)
