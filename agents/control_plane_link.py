"""Whether this agent can reach its control plane right now.

Every call of the metadata API reports its outcome here (`ControlPlaneClient.call`): a
transport error, timeout or 5xx marks the link down, any answer from the control plane
(2xx or 4xx: it is there and speaking) marks it up. Whoever must decide differently while the
control plane is away (the write path's Ripcord, the group coordinator keeping its members,
metadata served from the agent's cache) asks `link.up` instead of finding out by waiting on a
call of its own.

A control plane that stopped is found out at once (connection refused). One whose
connection froze — packets silently dropped, the socket left open — would only be found out
when a call's own bound ran out (seconds). So the link also watches the calls in flight
(`call_started`/`call_ended`): a call unanswered for `stall_after_s` while nothing else was
answered either marks the link down then (looked at again a moment later when the check
itself ran late: this agent's own loop was stalled and may not have handled an answer
yet). Calls that expect to wait (long polls) are not watched. While the link is down a
probe (`set_probe`: the control plane's `/healthz`, short bound) runs every
`probe_interval_s`, so the link comes back up by itself as soon as the control plane
answers, without waiting for traffic.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import time
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

# A watched call unanswered this long, with no other answer meanwhile, means the path to
# the control plane is frozen. Its answers usually take milliseconds (p99 tens of ms); the
# frozen-connection case must fail over to Ripcord's journal well within 1.5 s.
STALL_AFTER_S = 0.5
PROBE_INTERVAL_S = 0.25
# The stall check ran this much after its time: this agent's own loop was stalled (busy, or
# starved of CPU), and an answer that arrived meanwhile may be waiting a turn or two of the
# loop to be handled. It looks again `RECHECK_S` later before calling the link frozen.
LATE_S = 0.1
RECHECK_S = 0.05


class ControlPlaneLink:
    """The last known state of the agent's path to the control plane."""

    def __init__(
        self, *, stall_after_s: float = STALL_AFTER_S, probe_interval_s: float = PROBE_INTERVAL_S
    ) -> None:
        self.stall_after_s = stall_after_s
        self.probe_interval_s = probe_interval_s
        self._up = True
        self._down_since: float | None = None
        self._last_ok = time.monotonic()
        self._came_up = asyncio.Event()
        self._came_up.set()
        self._inflight: dict[int, float] = {}  # watched call -> when it was sent
        self._ids = itertools.count()
        self._probe: Callable[[], Awaitable[bool]] | None = None
        self._probing: asyncio.Task[None] | None = None
        self.outages = 0  # times the link went down (for /metrics and tests)
        self._came_up_at = float("-inf")  # when the last outage ended (monotonic)

    @property
    def up(self) -> bool:
        """False from the first failed (or stalled) call until the next answer."""
        return self._up

    @property
    def down_for_s(self) -> float:
        """Seconds since the link went down (0 while it is up)."""
        return 0.0 if self._down_since is None else time.monotonic() - self._down_since

    @property
    def since_outage_s(self) -> float:
        """Seconds since the link last came back up (infinite: it never went down)."""
        return time.monotonic() - self._came_up_at

    @property
    def last_ok_age_s(self) -> float:
        """Seconds since a call last got an answer."""
        return time.monotonic() - self._last_ok

    def record_answer(self) -> None:
        """A call reached the control plane (any HTTP answer but a 5xx)."""
        self._last_ok = time.monotonic()
        if not self._up:
            log.warning("control plane reachable again after %.1fs", self.down_for_s)
            self._up = True
            self._down_since = None
            self._came_up_at = time.monotonic()
            self._came_up.set()

    def record_failure(self) -> None:
        """A call failed in transport, timed out, or got a 5xx."""
        if self._up:
            self._up = False
            self._down_since = time.monotonic()
            self._came_up = asyncio.Event()
            self.outages += 1
            log.warning("control plane unreachable")
            self._start_probing()

    async def wait_up(self, timeout_s: float) -> bool:
        """Wait until the link is up again, at most `timeout_s`; True if it is."""
        if self._up:
            return True
        try:
            await asyncio.wait_for(self._came_up.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    # -- frozen connections ---------------------------------------------------------------

    def call_started(self) -> int:
        """A watched call was sent; `call_ended(token)` when it is over, however it ended."""
        token = next(self._ids)
        sent = self._inflight[token] = time.monotonic()
        with contextlib.suppress(RuntimeError):  # no loop: nobody to watch for
            asyncio.get_running_loop().call_later(self.stall_after_s, self._check_stall, sent)
        return token

    def call_ended(self, token: int) -> None:
        self._inflight.pop(token, None)

    def _check_stall(self, sent: float, *, again: bool = False) -> None:
        """`stall_after_s` after a call was sent: still unanswered, and nothing answered
        since it was sent → the path is frozen. Unless this check itself ran late — the
        loop was stalled, not necessarily the path —: then once more, `RECHECK_S` on."""
        if not self._up or self._last_ok >= sent:
            return
        if not any(started <= sent for started in self._inflight.values()):
            return
        if not again and time.monotonic() - (sent + self.stall_after_s) > LATE_S:
            asyncio.get_running_loop().call_later(
                RECHECK_S, functools.partial(self._check_stall, sent, again=True)
            )
            return
        self.record_failure()

    # -- coming back by itself ------------------------------------------------------------

    def set_probe(self, probe: Callable[[], Awaitable[bool]]) -> None:
        """How to ask whether the control plane answers (True: it does), short-bounded."""
        self._probe = probe

    def _start_probing(self) -> None:
        if self._probe is None or (self._probing is not None and not self._probing.done()):
            return
        with contextlib.suppress(RuntimeError):
            self._probing = asyncio.get_running_loop().create_task(
                self._probe_until_up(), name="control-plane-probe"
            )

    async def _probe_until_up(self) -> None:
        probe = self._probe
        assert probe is not None
        while not self._up:
            try:
                if await probe():
                    self.record_answer()
                    return
            except Exception:  # a probe that fails in any way: still down
                log.debug("control plane probe failed", exc_info=True)
            await asyncio.sleep(self.probe_interval_s)

    async def close(self) -> None:
        """Stop probing (the agent is stopping)."""
        if self._probing is not None:
            self._probing.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._probing
