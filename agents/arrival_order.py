"""A connection's produce requests reach the open segment in the order they arrived.

Kafka handles a connection's requests one after another. The agent runs each in a task
of its own (a produce is parked until its segment commits), and before appending its
batches a request may wait — a topic missing from the cache or gone stale, a schema
registry lookup, the ACL cache, backpressure — while a later request of the same
connection does not. The later one would then be appended, and committed, first. An
idempotent producer has up to five requests of a partition in flight (librdkafka: while
fewer than five of its records are), so its later batch would reach the metadata store
before the earlier one, be refused OUT_OF_ORDER_SEQUENCE_NUMBER, and — the earlier one
being acknowledged meanwhile — librdkafka, which then expected exactly that batch,
raises its fatal "sequence desynchronization with broker".

So the connection hands each Produce a `Turn` as it arrives (`ArrivalOrder.take`, in
`agents.server`, into the request's task as `TURN`); the handler waits for the turn
before it appends and passes it on right after (`release`), and the turn is released
anyway when its request ends (refused, failed, cancelled). Only the appends are put in
order: the lookups before them still overlap, and the commits after them are in segment
order already (`agents.write_path`).
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar


class Turn:
    """One request's place among its connection's produce requests."""

    __slots__ = ("_before", "_own")

    def __init__(self, before: asyncio.Future[None] | None, own: asyncio.Future[None]) -> None:
        self._before = before
        self._own = own

    async def wait(self) -> None:
        """Until every earlier produce of the connection has appended or given up."""
        before = self._before
        if before is not None and not before.done():
            # asyncio.wait: cancelling this request must not cancel the earlier one's turn.
            await asyncio.wait([before])
        self._before = None

    def release(self) -> None:
        """Let the next request append (idempotent)."""
        if not self._own.done():
            self._own.set_result(None)


class ArrivalOrder:
    """Hands out the turns of one connection's produce requests, in arrival order."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: asyncio.Future[None] | None = None

    def take(self) -> Turn:
        own: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        turn = Turn(self._last, own)
        self._last = own
        return turn


# The turn of the produce request running in this task; None outside one (a handler
# called directly, as some tests do, appends at once).
TURN: ContextVar[Turn | None] = ContextVar("floe_produce_turn", default=None)
