"""One share-partition's records in flight (KIP-932), as pure values: acquire, acknowledge,
release, expire. No database here; `share_groups` loads a row, applies these, saves it.

The state covers [start, end) with consecutive ranges ``[first, last, state, delivery
count, member, lock deadline ms]``. Kafka's record states: AVAILABLE (released or lock
expired: acquirable again), ACQUIRED (locked to one member until its deadline),
ACKNOWLEDGED (accepted) and ARCHIVED (rejected, or delivered too often). Acquiring
counts a delivery; a record released or whose lock expires when it was delivered
`limit` times is archived instead of made available again. Done ranges at the head
move `start` on; adjacent ranges alike are merged, so a steady consumer keeps a few.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
STATE_NAMES = {AVAILABLE: "available", ACQUIRED: "acquired", ACKNOWLEDGED: "acknowledged",
               ARCHIVED: "archived"}  # fmt: skip
# KIP-932 acknowledge types (ShareFetch / ShareAcknowledge AcknowledgeTypes).
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4

FIRST, LAST, STATE, COUNT, MEMBER, DEADLINE = range(6)


class InvalidRecordState(Exception):
    """An acknowledgement of records the member does not hold (INVALID_RECORD_STATE)."""


@dataclass
class ShareState:
    start: int
    end: int
    ranges: list[list[Any]] = field(default_factory=list)

    # -- reads ------------------------------------------------------------------------

    def count(self, state: int) -> int:
        return sum(r[LAST] - r[FIRST] + 1 for r in self.ranges if r[STATE] == state)

    def member_holds(self, member: str) -> bool:
        return any(r[STATE] == ACQUIRED and r[MEMBER] == member for r in self.ranges)

    # -- changes ----------------------------------------------------------------------

    def _release(self, r: list[Any], limit: int) -> None:
        r[STATE] = ARCHIVED if r[COUNT] >= limit else AVAILABLE
        r[MEMBER] = ""
        r[DEADLINE] = 0

    def expire(self, now_ms: int, limit: int) -> bool:
        """Acquired ranges whose lock passed: available again (or archived at the
        limit). Whether anything changed."""
        changed = False
        for r in self.ranges:
            if r[STATE] == ACQUIRED and r[DEADLINE] <= now_ms:
                self._release(r, limit)
                changed = True
        return changed

    def release_member(self, member: str, limit: int) -> bool:
        """What `member` holds, released (it left, or its session ended)."""
        changed = False
        for r in self.ranges:
            if r[STATE] == ACQUIRED and r[MEMBER] == member:
                self._release(r, limit)
                changed = True
        return changed

    def acquire(
        self,
        member: str,
        max_records: int,
        *,
        until: int,
        deadline_ms: int,
        max_in_flight: int,
    ) -> list[tuple[int, int, int]]:
        """Lock up to `max_records` offsets for `member`: available ones first (oldest
        first), then new ones below `until` (the high watermark or the last stable
        offset), never more than `max_in_flight` past `start`. Answers (first, last,
        delivery count) of what was acquired."""
        acquired: list[tuple[int, int, int]] = []
        left = max_records
        i = 0
        while i < len(self.ranges) and left > 0:
            r = self.ranges[i]
            if r[STATE] == AVAILABLE:
                if r[LAST] - r[FIRST] + 1 > left:
                    self._split_at(i, r[FIRST] + left)
                    r = self.ranges[i]
                r[STATE], r[MEMBER], r[DEADLINE] = ACQUIRED, member, deadline_ms
                r[COUNT] += 1
                acquired.append((r[FIRST], r[LAST], r[COUNT]))
                left -= r[LAST] - r[FIRST] + 1
            i += 1
        room = self.start + max_in_flight - self.end
        new = min(left, until - self.end, room)
        if new > 0:
            self.ranges.append([self.end, self.end + new - 1, ACQUIRED, 1, member, deadline_ms])
            acquired.append((self.end, self.end + new - 1, 1))
            self.end += new
        return _joined(acquired)

    def acknowledge(
        self, member: str, first: int, last: int, kinds: list[int], limit: int, renew_ms: int = 0
    ) -> None:
        """Apply one acknowledgement batch: one type for all of [first, last], or one
        per offset. Every offset must be acquired by `member` (else InvalidRecordState,
        nothing changed)."""
        if last < first or not kinds or (len(kinds) > 1 and len(kinds) != last - first + 1):
            raise InvalidRecordState(f"bad acknowledgement batch {first}-{last}")
        if any(k not in (GAP, ACCEPT, RELEASE, REJECT, RENEW) for k in kinds):
            raise InvalidRecordState(f"unknown acknowledge type in {kinds}")
        if first < self.start or last >= self.end:
            raise InvalidRecordState(f"offsets {first}-{last} are not in flight")
        for r in self.ranges:
            if r[LAST] < first or r[FIRST] > last:
                continue
            if r[STATE] != ACQUIRED or r[MEMBER] != member:
                raise InvalidRecordState(f"offsets {first}-{last} are not acquired by the member")
        if len(kinds) == 1:
            self._apply(first, last, kinds[0], limit, renew_ms)
            return
        run_start = first
        for offset in range(first + 1, last + 2):
            if offset > last or kinds[offset - first] != kinds[run_start - first]:
                self._apply(run_start, offset - 1, kinds[run_start - first], limit, renew_ms)
                run_start = offset

    def _apply(self, first: int, last: int, kind: int, limit: int, renew_ms: int) -> None:
        for r in self._cut(first, last):
            if kind == ACCEPT:
                r[STATE], r[MEMBER], r[DEADLINE] = ACKNOWLEDGED, "", 0
            elif kind in (GAP, REJECT):
                r[STATE], r[MEMBER], r[DEADLINE] = ARCHIVED, "", 0
            elif kind == RELEASE:
                self._release(r, limit)
            elif kind == RENEW:
                r[DEADLINE] = renew_ms

    def give_back(self, member: str, first: int, last: int) -> None:
        """Records `member` acquired but the agent could not send (past the fetch's
        MaxBytes): available again with the delivery uncounted, as if never acquired —
        at the tail, never acquired (`end` moves back). Offsets the member does not hold
        are left alone."""
        for r in self._cut(max(first, self.start), min(last, self.end - 1)):
            if r[STATE] == ACQUIRED and r[MEMBER] == member:
                r[STATE], r[MEMBER], r[DEADLINE] = AVAILABLE, "", 0
                r[COUNT] = max(r[COUNT] - 1, 0)
        while self.ranges and self.ranges[-1][STATE] == AVAILABLE and self.ranges[-1][COUNT] == 0:
            self.end = self.ranges.pop()[FIRST]

    def move_start(self, offset: int) -> None:
        """Start over at `offset` (AlterShareGroupOffsets, or records deleted below it):
        nothing in flight below it; from it on, nothing acquired yet."""
        self.start = self.end = offset
        self.ranges = []

    def archive_below(self, offset: int) -> bool:
        """Records below `offset` (the log start) no longer exist: done with them."""
        if offset <= self.start:
            return False
        if offset >= self.end:
            self.move_start(offset)
            return True
        for r in self._cut(self.start, offset - 1):
            r[STATE], r[MEMBER], r[DEADLINE] = ARCHIVED, "", 0
        return True

    def compact(self) -> None:
        """Merge adjacent alike ranges and move `start` past done ones."""
        merged: list[list[Any]] = []
        for r in self.ranges:
            if merged and _alike(merged[-1], r):
                merged[-1][LAST] = r[LAST]
            else:
                merged.append(list(r))
        while merged and merged[0][STATE] in (ACKNOWLEDGED, ARCHIVED):
            self.start = merged.pop(0)[LAST] + 1
        if not merged:
            self.start = self.end
        self.ranges = merged

    # -- ranges -----------------------------------------------------------------------

    def _split_at(self, i: int, offset: int) -> None:
        """Split range i so that `offset` begins a range."""
        r = self.ranges[i]
        if r[FIRST] < offset <= r[LAST]:
            tail = list(r)
            tail[FIRST] = offset
            r[LAST] = offset - 1
            self.ranges.insert(i + 1, tail)

    def _cut(self, first: int, last: int) -> list[list[Any]]:
        """The ranges exactly covering [first, last] (split where needed)."""
        out: list[list[Any]] = []
        i = 0
        while i < len(self.ranges):
            r = self.ranges[i]
            if r[LAST] < first:
                i += 1
                continue
            if r[FIRST] > last:
                break
            self._split_at(i, first)
            r = self.ranges[i]
            if r[FIRST] < first:
                i += 1
                continue
            self._split_at(i, last + 1)
            out.append(self.ranges[i])
            i += 1
        return out

    def saved(self) -> list[list[Any]]:
        return self.ranges


def _alike(a: list[Any], b: list[Any]) -> bool:
    return a[LAST] + 1 == b[FIRST] and a[STATE:] == b[STATE:]


def _joined(acquired: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    out: list[tuple[int, int, int]] = []
    for first, last, count in acquired:
        if out and out[-1][1] + 1 == first and out[-1][2] == count:
            out[-1] = (out[-1][0], last, count)
        else:
            out.append((first, last, count))
    return out
