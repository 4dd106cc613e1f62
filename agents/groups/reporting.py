"""The groups' reports to the control plane (`groups/report`), for the console.

A summary of every group this agent coordinates goes out every few seconds and soon
after each change (a burst of changes settles into one report); the control plane
answers which Empty groups it has nothing for, and the coordinator forgets those.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import Any

from agents.control_plane import ControlPlaneClient, ControlPlaneError

log = logging.getLogger(__name__)

REPORT_INTERVAL_S = 3.0


class GroupReporter:
    """Reports the groups `collect()` summarizes; hands `forget` what the store lacks."""

    def __init__(
        self,
        client: ControlPlaneClient,
        agent_id: str,
        *,
        interval_s: float = REPORT_INTERVAL_S,
        collect: Callable[[], list[dict[str, Any]]],
        forget: Callable[[Iterable[str]], None],
    ) -> None:
        self.client = client
        self.agent_id = agent_id
        self.interval_s = interval_s
        self.collect = collect
        self.forget = forget
        self._dirty = asyncio.Event()
        # The groups the last report named: a group gone from here is reported gone.
        self.reported: set[str] = set()

    def changed(self) -> None:
        """A group changed: report soon."""
        self._dirty.set()

    async def loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._dirty.wait(), self.interval_s)
            await asyncio.sleep(0.2)  # let a burst of changes settle into one report
            self._dirty.clear()
            try:
                await self.report_once()
            except ControlPlaneError as exc:
                log.warning("reporting groups failed: %s", exc)
            except Exception:
                log.exception("reporting groups failed")

    async def report_once(self) -> None:
        reports = self.collect()
        if not reports and not self.reported:
            return
        answer = await self.client.call(
            "groups/report",
            {"agent_id": self.agent_id, "groups": reports},
            timeout_s=5,
        )
        self.reported = {r["group_id"] for r in reports}
        self.forget(answer.get("forget") or ())
