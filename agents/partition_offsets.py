"""High watermarks, last stable offsets and log start offsets this agent learned recently.

Fetch plans and ListOffsets answers tell the agent where each partition begins and ends;
its own commits tell it the high watermark is at least so far. ListOffsets for the
latest or earliest offset is answered from what was learned within the last
`max_age_s` (a second by default) — a consumer group starting on thousands of
partitions, or a lag monitor polling them, costs the control plane nothing more. Other
agents' commits are not seen here, so an answer may be that much behind, as a Kafka
follower's may be. The last stable offset (KIP-98: read_committed's latest) is known
only from the control plane's answers; this agent's commits do not tell it.
"""

from __future__ import annotations

import time


class PartitionOffsets:
    """(topic id, partition) → (high watermark, log start offset, last stable offset or -1,
    learned at)."""

    def __init__(self, *, max_age_s: float = 1.0, max_entries: int = 200_000) -> None:
        self.max_age_s = max_age_s
        self._max_entries = max_entries
        self._known: dict[tuple[str, int], tuple[int, int, int, float]] = {}

    def learn(
        self,
        topic_id: str,
        partition: int,
        *,
        high_watermark: int,
        log_start: int,
        last_stable: int = -1,
    ) -> None:
        """Record what the control plane answered (offsets never move back)."""
        key = (topic_id, partition)
        known = self._known.get(key)
        if known is not None:
            high_watermark, log_start = max(high_watermark, known[0]), max(log_start, known[1])
            last_stable = max(last_stable, known[2])
        elif len(self._known) >= self._max_entries:
            self._known.clear()
        self._known[key] = (high_watermark, log_start, last_stable, time.monotonic())

    def committed(self, topic_id: str, partition: int, *, end: int, log_start: int) -> None:
        """This agent's commit put the high watermark at `end` at least."""
        self.learn(topic_id, partition, high_watermark=end, log_start=log_start)

    def fresh(
        self, topic_id: str, partition: int, *, any_age: bool = False
    ) -> tuple[int, int] | None:
        """(high watermark, log start offset) learned within `max_age_s` (or at any time,
        with `any_age`: Ripcord's answer while the control plane is away), or None."""
        known = self._known.get((topic_id, partition))
        if known is None or (not any_age and time.monotonic() - known[3] > self.max_age_s):
            return None
        return known[0], known[1]

    def fresh_stable(self, topic_id: str, partition: int, *, any_age: bool = False) -> int | None:
        """The last stable offset learned within `max_age_s` (or at any time), or None."""
        known = self._known.get((topic_id, partition))
        if known is None or known[2] < 0:
            return None
        if not any_age and time.monotonic() - known[3] > self.max_age_s:
            return None
        return known[2]

    def forget(self, topic_id: str, partition: int) -> None:
        self._known.pop((topic_id, partition), None)
