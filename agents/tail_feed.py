"""The agent's end of the tail feed (docs/AGENT_API.md "tail-feed"): a long-poll of the
control plane that keeps the tail index (``tail_index``) current and wakes the Fetches
waiting on the partitions it brings.

The feed is trusted only while it is heard from: an answer at least every
``STALE_S`` (the relay answers within ``WAIT_MS`` even when nothing happened). A call
that fails while the feed is live is made again at once from the same position (the
relay's ring replays what it missed, in order); a second failure in a row, any other
error, a `reset` (this agent's position fell out of the relay's ring, or another epoch:
another web process, a restart, a reconnect to the database) or a relay that is not live
drops every entry, and until the feed is heard from again every Fetch is planned by the
control plane. Nothing here waits unbounded: each poll is one call of at most
``CALL_TIMEOUT_S``.

Ripcord (`keep_through_outage()` true) keeps the index through a control-plane outage
instead: while the control plane cannot be reached nothing new is committed anywhere it
could tell us of, so what the index holds is what was committed before the outage, and
Fetches go on being served from it. The feed polls again, from where it was, once the
link is back (a relay that lost our place answers with a reset, as always).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from agents.control_plane import ControlPlaneClient, ControlPlaneError, ControlPlaneUnavailable
from agents.metrics import Counter, Gauge
from agents.shared_answers import Answer, SharedAnswers
from agents.tail_index import TailIndex
from agents.write_path import CommitWatch

log = logging.getLogger(__name__)

WAIT_MS = 5_000
CALL_TIMEOUT_S = WAIT_MS / 1000 + 3.0
STALE_S = CALL_TIMEOUT_S
RETRY_S = 1.0
AGAIN_AFTER_S = 0.05

PLANS = Counter(
    "floe_fetch_plans_total",
    "Fetch plans, by where they came from (tail_index, control_plane).",
    ("source",),
)
FEED_RESETS = Counter(
    "floe_tail_feed_resets_total", "Times the tail index was dropped (reset, error, not live)."
)
FEED_LAG = Gauge(
    "floe_tail_feed_lag_seconds",
    "From the relay's receipt of the last notification to this agent applying it.",
)
OWN_COMMIT_WAKES_SKIPPED = Counter(
    "floe_tail_feed_own_commit_wakes_skipped_total",
    "This agent's commits that did not wake Fetches themselves: the live feed brings them.",
)
INDEX_INVALIDATED = Counter(
    "floe_tail_index_invalidated_total",
    "Partitions the feed named as changed other than by a commit (retention, DeleteRecords,"
    " compaction swaps, transaction markers, deletion): their entries were dropped.",
)
INDEX_PARTITIONS = Gauge("floe_tail_index_partitions", "Partitions the tail index holds.")
INDEX_RUNS = Gauge("floe_tail_index_runs", "Runs the tail index holds.")


class FedCommitWatch(CommitWatch):
    """The `CommitWatch` of an agent whose Fetches a tail feed serves. This agent's own
    commits (`notify`, from the segment writer) wake waiting Fetches only while the feed
    is not live: a live feed brings the same runs, and the index plans only from what the
    feed brought — a Fetch woken by the commit before the feed's run arrives finds
    nothing new and waits again, one wasted plan per waiting Fetch and commit. The feed
    wakes through `CommitWatch.notify` itself. Without a live feed (none yet, cut, stale)
    every commit wakes as before; a feed that stops answering leaves a Fetch woken at the
    latest by its `FED_REPLAN_INTERVAL_S` re-plan, one that is reset wakes every
    partition it held."""

    def __init__(self) -> None:
        super().__init__()
        self.feed: TailFeed | None = None

    def notify(self, partitions: Iterable[tuple[str, int]]) -> None:
        if self.feed is not None and self.feed.live:
            OWN_COMMIT_WAKES_SKIPPED.inc()
            return
        super().notify(partitions)


class TailFeed:
    """`await feed.run_forever()`; `feed.plan(...)` while `feed.live`."""

    def __init__(self, client: ControlPlaneClient, watch: CommitWatch) -> None:
        self.client = client
        self.watch = watch
        if isinstance(watch, FedCommitWatch):
            watch.feed = self
        self.index = TailIndex()
        self.shared = SharedAnswers()  # encoded Fetch answers at the tail (shared_answers)
        self.epoch = ""
        self.seq = 0
        self._live = False
        self._heard = 0.0
        self.lag_s = 0.0
        # Set by the runtime: whether Ripcord is on (then the index outlives an outage).
        self.keep_through_outage: Callable[[], bool] = lambda: False
        self._keeping = False  # serving the index through an outage now

    @property
    def live(self) -> bool:
        if not self._live:
            return False
        return time.monotonic() - self._heard < STALE_S or self._kept()

    def _kept(self) -> bool:
        """Ripcord keeps the index while the control plane cannot be reached."""
        return self.keep_through_outage() and not self.client.link.up

    def plan(
        self, partitions: list[dict[str, Any]], max_bytes: int, isolation_level: int
    ) -> list[dict[str, Any]] | None:
        """The index's plan, or None (not live, or it refuses)."""
        if not self.live:
            return None
        return self.index.plan(partitions, max_bytes, isolation_level)

    def at_end(self, positions: list[tuple[tuple[str, int], int]], read_committed: bool) -> bool:
        """Whether the index, live, plans nothing to read for these (partition, offset)s
        (`TailIndex.at_end`)."""
        return self.live and self.index.at_end(positions, read_committed)

    def shared_answer(self, keys: tuple[Any, ...]) -> Answer | None:
        """The encoded answer of an identical Fetch at the same tail, or None."""
        if not self.live:
            return None
        return self.shared.get(keys, self.index)

    def _reset(self) -> None:
        if self.index.runs or len(self.index):
            FEED_RESETS.inc()
        self.shared.clear()
        self._wake(self.index.clear())
        self._gauges()

    def _wake(self, keys: set[tuple[str, int]]) -> None:
        """Wake the Fetches waiting on these partitions (`FedCommitWatch.notify` is for
        this agent's commits)."""
        CommitWatch.notify(self.watch, keys)

    def _gauges(self) -> None:
        INDEX_PARTITIONS.set(len(self.index))
        INDEX_RUNS.set(self.index.runs)

    def take(self, answer: dict[str, Any]) -> None:
        """One answer of the relay."""
        if answer.get("reset") or answer.get("epoch") != self.epoch or not answer.get("live"):
            self._reset()
        self.epoch = str(answer.get("epoch", ""))
        self.seq = int(answer.get("seq", 0))
        self._live = bool(answer.get("live")) and bool(self.epoch)
        self._heard = time.monotonic()
        entries = answer.get("entries") or []
        if entries:
            self._wake(self.index.apply(entries))
            INDEX_INVALIDATED.inc(
                sum(len(e.get("changed", ())) for e in entries if "runs" not in e)
            )
            self.lag_s = max(0.0, time.time() - entries[-1]["at_ms"] / 1000)
            FEED_LAG.set(self.lag_s)
            self._gauges()

    async def run_forever(self) -> None:
        retried = False  # this failure's poll again at once has been made
        while True:
            try:
                answer = await self.client.call(
                    "tail-feed",
                    {"epoch": self.epoch, "after": self.seq, "wait_ms": WAIT_MS},
                    timeout_s=CALL_TIMEOUT_S,
                )
            except ControlPlaneUnavailable as exc:
                if self._live and self._kept():
                    if not self._keeping:
                        log.warning("tail feed: %s; Ripcord keeps serving the index", exc)
                    self._keeping = True
                    await self.client.link.wait_up(RETRY_S)
                    continue
                if self.live and not retried:
                    # One lost call (a connection reset, a web process restarting) is
                    # not a lost feed: polled again at once from the same place, the
                    # relay's ring brings what was missed, in order, as after any lag.
                    log.info("tail feed: %s; polling again", exc)
                    retried = True
                    # A moment for the loop to see which other pooled connections went
                    # with it, so that the poll is not sent down one of them.
                    await asyncio.sleep(AGAIN_AFTER_S)
                    continue
                self._drop(exc)
                await asyncio.sleep(RETRY_S)
                continue
            except (ControlPlaneError, ValueError, KeyError) as exc:
                self._drop(exc)
                await asyncio.sleep(RETRY_S)
                continue
            self._keeping = False
            retried = False
            try:
                self.take(answer)
            except (ValueError, KeyError, TypeError) as exc:  # an answer that does not fit
                log.error("tail feed: a bad answer (%s); starting again", exc)
                self._live = False
                self.epoch = ""
                self._reset()
                await asyncio.sleep(RETRY_S)
                continue
            if not self._live:
                await asyncio.sleep(RETRY_S)

    def _drop(self, exc: Exception) -> None:
        """The feed failed: drop the index; Fetches are planned by the control plane."""
        if self._live:
            log.warning("tail feed: %s; fetches are planned by the control plane", exc)
        self._live = False
        self.epoch = ""
        self._reset()

    def stats(self) -> dict[str, int]:
        """The heartbeat's counters (docs/AGENT_API.md)."""
        return {
            "tail_plans": int(PLANS.value("tail_index")),
            "control_plane_plans": int(PLANS.value("control_plane")),
            "tail_index_partitions": len(self.index),
            "tail_index_runs": self.index.runs,
            "tail_feed_lag_ms": int(self.lag_s * 1000),
        }
