"""Whether this agent can reach its control plane right now.

Every call of the metadata API reports its outcome here (`ControlPlaneClient.call`): a
transport error, timeout or 5xx marks the link down, any answer from the control plane
(2xx or 4xx: it is there and speaking) marks it up. Whoever must decide differently while the
control plane is away (the write path's Ripcord, the group coordinator keeping its members,
metadata served from the agent's cache) asks `link.up` instead of finding out by waiting on a
call of its own.
"""

from __future__ import annotations

import asyncio
import time


class ControlPlaneLink:
    """The last known state of the agent's path to the control plane."""

    def __init__(self) -> None:
        self._up = True
        self._down_since: float | None = None
        self._last_ok = time.monotonic()
        self._came_up = asyncio.Event()
        self._came_up.set()

    @property
    def up(self) -> bool:
        """False from the first failed call until the next call that got an answer."""
        return self._up

    @property
    def down_for_s(self) -> float:
        """Seconds since the link went down (0 while it is up)."""
        return 0.0 if self._down_since is None else time.monotonic() - self._down_since

    @property
    def last_ok_age_s(self) -> float:
        """Seconds since a call last got an answer."""
        return time.monotonic() - self._last_ok

    def record_answer(self) -> None:
        """A call reached the control plane (any HTTP answer but a 5xx)."""
        self._last_ok = time.monotonic()
        if not self._up:
            self._up = True
            self._down_since = None
            self._came_up.set()

    def record_failure(self) -> None:
        """A call failed in transport, timed out, or got a 5xx."""
        if self._up:
            self._up = False
            self._down_since = time.monotonic()
            self._came_up = asyncio.Event()

    async def wait_up(self, timeout_s: float) -> bool:
        """Wait until the link is up again, at most `timeout_s`; True if it is."""
        if self._up:
            return True
        try:
            await asyncio.wait_for(self._came_up.wait(), timeout_s)
        except TimeoutError:
            return False
        return True
