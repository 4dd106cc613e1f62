"""Group commit: the commits that arrive together in one process share one transaction.

Every commit must reach the disk before its agent acknowledges anything, and it holds
its partitions' row locks until then, so commits to the same partitions queue behind
each other's WAL flush. Here the first thread to arrive leads: it takes every commit
waiting at that moment, runs them in one transaction (each in a savepoint, so one
failing file fails alone), commits once — one flush for all — and hands each thread its
own answer; commits arriving meanwhile form the next group. A lone commit runs at once.

Locks: the leader locks every partition of the group in id order before the first
commit function runs, so two groups (two worker processes) can never deadlock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

# A follower waits for its group at most this long (the leader's statements are bounded
# by the database's statement timeout well before this).
FOLLOWER_TIMEOUT_S = 120.0
MAX_GROUP = 64  # commits per transaction; more wait for the next group


@dataclass
class _Waiting:
    request: Any
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: BaseException | None = None


class CommitGroup:
    """`group.run(request)` → `execute_one(request)`'s answer, in a shared transaction.

    `lock_all(requests)` runs first in the transaction (it takes the group's partition
    locks in one order); `execute_one(request)` runs in a savepoint per request.
    """

    def __init__(
        self,
        *,
        lock_all: Callable[[list[Any]], None],
        execute_one: Callable[[Any], Any],
    ) -> None:
        self._lock_all = lock_all
        self._execute_one = execute_one
        self._mutex = threading.Lock()
        self._queue: list[_Waiting] = []
        self._leading = False

    def run(self, request: Any) -> Any:
        mine = _Waiting(request)
        with self._mutex:
            self._queue.append(mine)
            lead = not self._leading
            if lead:
                self._leading = True
        if lead:
            self._lead()
        elif not mine.done.wait(FOLLOWER_TIMEOUT_S):
            raise TimeoutError("the commit group did not finish in time")
        if mine.error is not None:
            raise mine.error
        return mine.result

    def _lead(self) -> None:
        """Run groups until the queue is empty (our own commit is in the first)."""
        while True:
            with self._mutex:
                group, self._queue = self._queue[:MAX_GROUP], self._queue[MAX_GROUP:]
                if not group:
                    self._leading = False
                    return
            try:
                self._run_group(group)
            finally:
                for waiting in group:
                    waiting.done.set()

    def _run_group(self, group: list[_Waiting]) -> None:
        if len(group) == 1:  # alone: no savepoint, the commit function takes its locks
            waiting = group[0]
            try:
                with transaction.atomic():
                    waiting.result = self._execute_one(waiting.request)
            except Exception as exc:  # noqa: BLE001 - handed to its own thread
                waiting.error = exc
            return
        try:
            with transaction.atomic():
                self._lock_all([w.request for w in group])
                for waiting in group:
                    try:
                        with transaction.atomic():  # a savepoint: one bad file fails alone
                            waiting.result = self._execute_one(waiting.request)
                    except Exception as exc:  # noqa: BLE001 - handed to its own thread
                        waiting.error = exc
        except BaseException as exc:  # the group's transaction failed: all of it did
            for waiting in group:
                if waiting.error is None:
                    waiting.result, waiting.error = None, exc
            if not isinstance(exc, Exception):
                raise
