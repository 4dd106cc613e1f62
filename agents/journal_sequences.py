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
