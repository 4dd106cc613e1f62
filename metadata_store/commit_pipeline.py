"""Group commit on the web process's event loop: a cluster's commits that arrive together
are one statement.

Every commit must reach the disk before its agent acknowledges anything, and it holds
its partitions' row locks until then, so commits to the same partitions go one after
another whatever we do; what we choose is how much each one costs. Here a cluster has at
most one group in the database at a time: the commits that arrive while it runs wait,
and the moment it is done they go out together as the next group — one call of
``floe_commit_files``, one transaction, one WAL flush — before the finished group's
answers are even handed back. A lone commit goes at once. (Two groups of a cluster in
flight at once only split the same commits into smaller groups that wait on each
other's locks: slower, measured.)

A failure of the group's statement keeps nothing of it; each of its commits then runs
again alone, so a failing file fails alone and the others land (a commit is idempotent by
its file key). Not when the database is out of reach or a lock could not be had in
time: then every commit of the group gets that error at once (the agents retry), rather
than each waiting out the same timeout again.

The statement runs on a connection of the process's own pool (``psycopg_pool``), in
autocommit, with the agent API's statement and lock timeouts; the web process's threads
and Django's connections are never involved, so no thread hand-off stands between two
groups.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg

log = logging.getLogger(__name__)

MAX_GROUP = 64  # commits per statement; more wait for the next group

# SQLSTATEs after which running a group's commits again one by one would only wait out
# the same bound again: lock_not_available, and the connection failures (08xxx).
_WHOLE_GROUP = {"55P03"}


def fails_whole_group(exc: BaseException) -> bool:
    """Whether `exc` is about the database, not about one of the group's files."""
    if isinstance(exc, TimeoutError | psycopg.OperationalError | psycopg.InterfaceError):
        sqlstate = getattr(exc, "sqlstate", None)
        return sqlstate is None or sqlstate in _WHOLE_GROUP or sqlstate.startswith("08")
    return False


@dataclass(eq=False)
class _Waiting:
    request: Any
    future: asyncio.Future[Any]


# (the commit, its result, or the error it gets)
_Outcome = tuple[_Waiting, Any, BaseException | None]


@dataclass(eq=False)
class _Cluster:
    queue: list[_Waiting] = field(default_factory=list)
    running: bool = False


class CommitPipeline:
    """`await pipeline.commit(cluster_id, request)` → `execute(cluster_id, [request, …])`'s
    result for `request`.

    `execute(cluster_id, requests)` runs one statement for all of `requests` and returns
    one result per request, in order, or raises.
    """

    def __init__(self, execute: Callable[[int, list[Any]], Awaitable[list[Any]]]) -> None:
        self._execute = execute
        self._clusters: dict[int, _Cluster] = {}

    async def commit(self, cluster_id: int, request: Any) -> Any:
        state = self._clusters.get(cluster_id)
        if state is None:
            state = self._clusters[cluster_id] = _Cluster()
        waiting = _Waiting(request, asyncio.get_running_loop().create_future())
        state.queue.append(waiting)
        self._start_next(cluster_id, state)
        return await waiting.future

    async def commit_many(self, cluster_id: int, requests: list[Any]) -> list[Any]:
        """Several commits that must go in this order (one agent's journal entries): each
        one's result, or the exception it got. They join the queue together, so they go
        out in one group when they fit (a group that must split puts the rest in the
        next group, which runs after it); a failed group runs its commits alone, in
        order."""
        state = self._clusters.get(cluster_id)
        if state is None:
            state = self._clusters[cluster_id] = _Cluster()
        loop = asyncio.get_running_loop()
        waiting = [_Waiting(request, loop.create_future()) for request in requests]
        state.queue.extend(waiting)
        self._start_next(cluster_id, state)
        return await asyncio.gather(*(w.future for w in waiting), return_exceptions=True)

    def _start_next(self, cluster_id: int, state: _Cluster) -> None:
        if state.running or not state.queue:
            return
        group, state.queue = state.queue[:MAX_GROUP], state.queue[MAX_GROUP:]
        state.running = True
        asyncio.get_running_loop().create_task(self._run(cluster_id, state, group))

    async def _run(self, cluster_id: int, state: _Cluster, group: list[_Waiting]) -> None:
        outcomes: list[_Outcome] = []
        try:
            outcomes = await self._outcomes(cluster_id, group)
        finally:
            # The next group goes to the database before these answers go back.
            state.running = False
            self._start_next(cluster_id, state)
            if not outcomes:  # cancelled (the process is stopping)
                outcomes = [(w, None, ConnectionError("the server is stopping")) for w in group]
            for waiting, result, error in outcomes:
                if waiting.future.done():  # the agent went away
                    continue
                if error is None:
                    waiting.future.set_result(result)
                else:
                    waiting.future.set_exception(error)
            if not state.queue and not state.running:
                self._clusters.pop(cluster_id, None)

    async def _outcomes(self, cluster_id: int, group: list[_Waiting]) -> list[_Outcome]:
        try:
            results = await self._execute(cluster_id, [w.request for w in group])
            return [(w, r, None) for w, r in zip(group, results, strict=True)]
        except Exception as exc:  # noqa: BLE001 - handed to the commits below
            if len(group) == 1 or fails_whole_group(exc):
                return [(w, None, exc) for w in group]
            log.warning("a group of %d commits failed (%r): each runs alone", len(group), exc)
        outcomes: list[_Outcome] = []
        for waiting in group:
            try:
                (result,) = await self._execute(cluster_id, [waiting.request])
                outcomes.append((waiting, result, None))
            except Exception as exc:  # noqa: BLE001 - handed to its own commit
                outcomes.append((waiting, None, exc))
        return outcomes
