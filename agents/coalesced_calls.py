"""One control-plane call for many requests: what arrives while a call is out rides on
the next one.

librdkafka looks up a consumer's starting offsets with one ListOffsets request per
partition; a consumer of 10,000 partitions would make the agent ask the control plane
10,000 times. Here the first request goes at once; the requests that arrive while it is
out wait for it and then go together in one call, and so on. An idle agent adds no
latency, a busy one makes a call per round trip instead of one per request.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agents.control_plane import ControlPlaneClient

MAX_PARTITIONS_PER_CALL = 10_000  # the agent API takes 100,000; keep each answer small


class CoalescedCalls:
    """`await calls.ask(partitions)` → the answers of `call` for those partitions."""

    def __init__(self, client: ControlPlaneClient, call: str) -> None:
        self._client = client
        self._call = call
        self._pending: list[tuple[list[dict[str, Any]], asyncio.Future[list[dict[str, Any]]]]] = []
        self._running = False

    async def ask(self, partitions: list[dict[str, Any]]) -> list[dict[str, Any]]:
        future: asyncio.Future[list[dict[str, Any]]] = asyncio.get_running_loop().create_future()
        self._pending.append((partitions, future))
        if not self._running:
            self._running = True
            asyncio.get_running_loop().create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        try:
            while self._pending:
                group: list[tuple[list[dict[str, Any]], asyncio.Future[list[dict[str, Any]]]]] = []
                size = 0
                while self._pending and (
                    not group or size + len(self._pending[0][0]) <= MAX_PARTITIONS_PER_CALL
                ):
                    item = self._pending.pop(0)
                    group.append(item)
                    size += len(item[0])
                await self._send(group)
        finally:
            self._running = False

    async def _send(
        self, group: list[tuple[list[dict[str, Any]], asyncio.Future[list[dict[str, Any]]]]]
    ) -> None:
        query = [p for partitions, _ in group for p in partitions]
        try:
            answers = (await self._client.call(self._call, {"partitions": query}))["partitions"]
            if len(answers) != len(query):
                raise ValueError(f"{self._call} answered {len(answers)} of {len(query)}")
        except Exception as exc:  # every waiting request fails the way a lone one would
            for _, future in group:
                if not future.done():
                    future.set_exception(exc)
            return
        start = 0
        for partitions, future in group:
            if not future.done():
                future.set_result(answers[start : start + len(partitions)])
            start += len(partitions)
