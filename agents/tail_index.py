"""The tail index: the newest runs of every partition of the cluster, learned from the
control plane's tail feed (docs/ARCHITECTURE.md "The tail feed"), so that a Fetch at the
tail is planned here instead of by a `fetch-plan` call (issue 28).

The feed brings each committed file's runs in commit order, each with what a plan needs
(offsets, where the bytes are, the partition's log start and the first offset of its
oldest open transaction after the commit). A partition's entry starts at the first run
the feed brings of it — or, for a partition the feed announced as created (a new topic's,
CreatePartitions'), empty at offset 0, so that consumers waiting on a brand-new topic are
planned here before its first record (issue 44): the announcement comes in the creating
transaction, so before any commit to the partition, and the feed's order and its reset on
any gap mean the entry's next run is the partition's first — and holds its last
``MAX_RUNS`` runs; `plan` answers exactly what
the metadata store's ``fetch_plan`` would for a request whose every partition's offset
lies within what the entries hold (from their first run to their high watermark), or
None — refusing — when one does not: a partition it does not hold, an offset below its
first run (catch-up) or past its high watermark (the feed may lag), or a feed that is
not live. Whatever else changes a partition's plan (retention, DeleteRecords, compaction
swaps, transaction markers, the topic's deletion) drops its entry, and the next run
starts it again: markers and rewritten files therefore never lie within an entry. A
reset of the feed (a gap, a new epoch, an error) drops every entry.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

FETCH_PLAN_MAX_RUNS = 128  # as the metadata store's fetch plan (per partition and call)
MAX_RUNS = 64  # per partition: a consumer further behind asks the control plane
MAX_PARTITIONS = 50_000  # entries beyond this push out the least recently started ones

Key = tuple[str, int]  # (topic id string, partition index)
# (base offset, last offset, position, length, batch count, file key)
Run = tuple[int, int, int, int, int, str]


@dataclass(slots=True)
class PartitionTail:
    """What the index holds of one partition: its newest runs, contiguous up to its
    high watermark."""

    high_watermark: int
    log_start_offset: int
    open_txn_offset: int  # the first offset of the oldest open transaction; -1: none
    runs: list[Run] = field(default_factory=list)
    lasts: list[int] = field(default_factory=list)  # each run's last offset, for bisect

    @property
    def first_offset(self) -> int:
        """The first offset the entry answers for: its first run's, or, for an empty
        entry (a created partition), its high watermark."""
        return self.runs[0][0] if self.runs else self.high_watermark

    @property
    def last_stable_offset(self) -> int:
        return self.open_txn_offset if self.open_txn_offset >= 0 else self.high_watermark


class TailIndex:
    """`apply(entries)` as the feed brings them; `plan(...)` or None."""

    def __init__(self, max_runs: int = MAX_RUNS, max_partitions: int = MAX_PARTITIONS) -> None:
        self.max_runs = max_runs
        self.max_partitions = max_partitions
        self._parts: dict[Key, PartitionTail] = {}
        self.runs = 0  # held, over every partition

    def __len__(self) -> int:
        return len(self._parts)

    def get(self, key: Key) -> PartitionTail | None:
        return self._parts.get(key)

    def clear(self) -> set[Key]:
        """Forget everything (the feed was reset); the keys that were held."""
        keys = set(self._parts)
        self._parts.clear()
        self.runs = 0
        return keys

    def drop(self, keys: Iterable[Key]) -> None:
        for key in keys:
            tail = self._parts.pop(key, None)
            if tail is not None:
                self.runs -= len(tail.runs)

    def seed(self, key: Key) -> None:
        """A partition just created: empty, its log start and high watermark 0, no
        transaction open. Its first run (base 0) continues the entry as any run does."""
        self.drop([key])
        if len(self._parts) >= self.max_partitions:
            self.drop([next(iter(self._parts))])
        self._parts[key] = PartitionTail(0, 0, -1)

    def add_run(
        self,
        key: Key,
        file_key: str,
        base: int,
        last: int,
        pos: int,
        length: int,
        batch_count: int,
        open_txn_offset: int,
        log_start_offset: int,
    ) -> None:
        """One committed run. It continues the partition's entry when it starts at the
        entry's high watermark; one the entry already covers changes nothing; anything
        else (an entry missing, a run past the high watermark) starts the entry anew
        from it — the run and its fields are the partition's truth up to its end."""
        high = last + 1
        # After this run the oldest open transaction holds the LSO where it started
        # below the run's end; one starting later in the commit had not written yet.
        txn = open_txn_offset if 0 <= open_txn_offset < high else -1
        tail = self._parts.get(key)
        if tail is not None and last < tail.high_watermark:
            return
        if tail is None or base != tail.high_watermark:
            self.drop([key])
            if len(self._parts) >= self.max_partitions:
                self.drop([next(iter(self._parts))])
            tail = self._parts[key] = PartitionTail(high, log_start_offset, txn)
        tail.runs.append((base, last, pos, length, batch_count, file_key))
        tail.lasts.append(last)
        tail.high_watermark = high
        tail.log_start_offset = log_start_offset
        tail.open_txn_offset = txn
        self.runs += 1
        if len(tail.runs) > self.max_runs:
            cut = len(tail.runs) - self.max_runs
            del tail.runs[:cut]
            del tail.lasts[:cut]
            self.runs -= cut

    def apply(self, entries: list[dict[str, Any]]) -> set[Key]:
        """The feed's entries, in order; the partitions they changed."""
        changed: set[Key] = set()
        for entry in entries:
            runs = entry.get("runs")
            if runs is not None:
                file_key = entry["file_key"]
                for topic, index, *fields in runs:
                    key = (topic, index)
                    self.add_run(key, file_key, *fields)
                    changed.add(key)
            elif "created" in entry:
                for topic, first, end in entry["created"]:
                    for index in range(first, end):
                        key = (topic, index)
                        self.seed(key)
                        changed.add(key)
            else:
                keys = [(topic, index) for topic, index in entry.get("changed", ())]
                self.drop(keys)
                changed.update(keys)
        return changed

    def at_end(self, positions: list[tuple[Key, int]], read_committed: bool = False) -> bool:
        """Whether `plan` would answer these (partition, fetch offset)s with nothing to
        read: every partition held, each offset within its entry and at its end (the last
        stable offset for read_committed, else the high watermark)."""
        for key, offset in positions:
            tail = self._parts.get(key)
            if tail is None or not tail.first_offset <= offset <= tail.high_watermark:
                return False
            if offset < (tail.last_stable_offset if read_committed else tail.high_watermark):
                return False
        return True

    def plan(
        self, partitions: list[dict[str, Any]], max_bytes: int, isolation_level: int = 0
    ) -> list[dict[str, Any]] | None:
        """The metadata store's ``fetch_plan`` answer for these partitions (the agent's
        `fetch-plan` request), or None when one of them lies outside what is held."""
        read_committed = isolation_level == 1
        answers: list[dict[str, Any]] = []
        to_read: list[tuple[int, PartitionTail, int, int]] = []  # (answer, tail, offset, end)
        for request in partitions:
            tail = self._parts.get((request["topic_id"], request["partition"]))
            offset = request["offset"]
            if tail is None or not tail.first_offset <= offset <= tail.high_watermark:
                return None
            lso = tail.last_stable_offset
            answers.append(
                {
                    "topic_id": request["topic_id"],
                    "partition": request["partition"],
                    "error_code": 0,
                    "high_watermark": tail.high_watermark,
                    "last_stable_offset": lso,
                    "log_start_offset": tail.log_start_offset,
                    "batches": [],
                }
            )
            end = lso if read_committed else tail.high_watermark
            if offset < end:
                to_read.append((len(answers) - 1, tail, offset, end))
        budget = max_bytes
        first = True
        for index, tail, offset, end in to_read:
            part_max = partitions[index].get("max_bytes", max_bytes)
            part_budget = part_max
            used, count = 0, 0
            # As floe_plan_runs: runs from the offset on, below the end, while the bytes
            # before each stay under the budget (the one crossing it comes too).
            for i in range(bisect.bisect_left(tail.lasts, offset), len(tail.runs)):
                base, last, pos, length, batch_count, file_key = tail.runs[i]
                if base >= end or count >= FETCH_PLAN_MAX_RUNS or used >= max(1, part_max):
                    break
                used += length
                count += 1
                # As fetch_plan: the response's first run whatever the budgets (KIP-74).
                if not first and (part_budget <= 0 or budget <= 0):
                    continue
                first = False
                answers[index]["batches"].append(
                    {
                        "file_key": file_key,
                        "pos": pos,
                        "len": length,
                        "base_offset": base,
                        "last_offset": last,
                        "batch_count": batch_count,
                        "rewrite": True,  # committed files are level 0 until a swap
                    }
                )
                part_budget -= length
                budget -= length
        return answers
