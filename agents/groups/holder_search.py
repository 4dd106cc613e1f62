"""Which agent coordinates a group: the search for its lease holder.

A group's coordinator is the holder of its lease in the metadata store
(`agents.groups.leases`); nobody holding one, the rendezvous choice among the live agents
this one can reach (`agents.groups.ring`) is offered it. FindCoordinator asks here; a
holder this agent cannot reach is told apart from a dead one by whether its lease is
renewed (`HolderSearch.coordinator_of`).
"""

from __future__ import annotations

import asyncio
import time

from agents.groups.leases import GroupLeases
from agents.groups.ring import CoordinatorRing, Peer

# A holder this agent cannot reach is asked about again a renew interval and this
# much later; it renewed when the store's stamp of its lease's expiry moved (without
# stamps: when the expiry estimated here moved on by more than this).
RENEWED_SLACK_S = 0.5
# A lease's end as known here is the store's, to the millisecond and on another clock:
# waiting it out waits this much longer, so the store is not asked a hair before the end
# (and still names the dead holder).
LEASE_END_SLACK_S = 0.05


class HolderSearch:
    """Names a group's coordinator: its lease holder, at its address among the live agents."""

    def __init__(self, ring: CoordinatorRing, leases: GroupLeases) -> None:
        self.ring = ring
        self.leases = leases
        # Groups whose holder this agent cannot reach but saw renew its lease.
        self._renewing: dict[str, str] = {}

    async def coordinator_of(self, group_id: str) -> Peer | None:
        """The agent coordinating the group: the lease holder at its address in the
        control plane's live list (this agent when nobody held it), or None when the
        store cannot be asked or the holder is not among the live agents.

        Whether this agent can reach the holder does not decide the answer: a member
        reaches agents this one may not. A holder it cannot reach is either dead (its
        lease expires within a ttl) or alive behind a cut only this agent sees; the
        store tells them apart within about a renew interval — a live holder's lease
        expiry moves on, a dead one's stays. So the answer waits a renew interval (or
        the lease's remaining time, when less) and asks the store afresh: renewed, the
        holder is named (and remembered, so later answers do not wait); not renewed,
        the answer waits out the rest of the lease and names whoever holds it then —
        the agent that took the group over, or the holder after all.
        COORDINATOR_NOT_AVAILABLE meanwhile would do worse: librdkafka retries it
        twice, 0.1 s apart, then waits for a broker's state to change; and naming a
        holder that may be dead sends every member into a loop of refused connections
        and FindCoordinators until its lease ends."""
        holder = await self.holder(group_id)
        if holder is None or holder == self.ring.me.agent_id:
            return None if holder is None else self.ring.me
        peer = self.ring.peer(holder)
        if peer is not None and (
            self._renewing.get(group_id) == holder or await self.ring.reachable(peer)
        ):
            return peer
        # Two fresh answers a renew interval apart (a remembered one may predate the
        # holder's last renewals and make a dead holder look renewed).
        fresh = await self._fresh_expiry(group_id, holder)
        if fresh is not None:
            until = fresh[0]
            first = self.leases.renew_interval_s + RENEWED_SLACK_S
            await asyncio.sleep(min(max(until - time.monotonic(), 0.0) + LEASE_END_SLACK_S, first))
            again_fresh = await self._fresh_expiry(group_id, holder)
            if peer is not None and again_fresh is not None and _renewed(fresh, again_fresh):
                self._renewing[group_id] = holder
                return peer
            if again_fresh is not None:
                moved = again_fresh[0]
                left = max(moved - time.monotonic(), 0.0) + LEASE_END_SLACK_S
                await asyncio.sleep(min(left, self.leases.ttl_s))
        self.leases.forget_holder(group_id)
        again = await self.holder(group_id)
        if again is None or again == self.ring.me.agent_id:
            return None if again is None else self.ring.me
        if again == holder:
            self._renewing[group_id] = holder
        else:
            self._renewing.pop(group_id, None)
        return self.ring.peer(again)

    async def _fresh_expiry(self, group_id: str, holder: str) -> tuple[float, int | None] | None:
        """When `holder`'s lease of the group ends (time.monotonic()) and the store's stamp
        of that end, asked of the store now; None when it no longer holds it (or the store
        cannot be asked)."""
        self.leases.forget_holder(group_id)
        if await self.holder(group_id) != holder:
            return None
        until = self.leases.known_until(group_id)
        return None if until is None else (until, self.leases.known_stamp(group_id))

    async def holder(self, group_id: str) -> str | None:
        """The group's lease holder; nobody holding it, the rendezvous choice among the
        live agents this one can reach is given the lease (so groups spread over the
        agents; an agent that refuses connections is never offered it)."""
        suggested = await self.ring.resolve(group_id)
        return await self.leases.holder(group_id, suggest=suggested.agent_id)


def _renewed(before: tuple[float, int | None], after: tuple[float, int | None]) -> bool:
    """Whether the holder renewed its lease between two fresh answers of the store: its
    expiry stamp (the store's clock) moved — exact; without stamps (an older control
    plane), the local estimate moved by more than the answers' latencies could explain."""
    if before[1] is not None and after[1] is not None:
        return after[1] > before[1]
    return after[0] > before[0] + RENEWED_SLACK_S
