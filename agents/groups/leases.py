"""The agent's side of group leases (`metadata_store.group_leases`): which groups this
agent coordinates, as the metadata store decided.

An agent coordinates a group only while it holds the group's lease. It asks the store
(`groups/leases`) whenever it must know a group's coordinator and does not: the store
gives it the lease when nobody holds a live one, else names the holder (remembered here
until that lease's expiry, so a holder's death is noticed within a ttl). Every held
lease is renewed in one call per `renew_interval_s`; a lease counts as held only until
`ttl - margin` after the request that last acquired or renewed it was *sent* — the
store's expiry is its own clock plus the ttl from when it received the request, later
than that, so the agent always lets go first (the margin absorbs clocks running at
different rates). A lease renewal refused, or not confirmed in time, loses the group at
once (`on_lost`). Acquisitions that arrive together go out as one call.

Ripcord (`keep_through_outage()` true) changes one thing: while the control plane cannot
be reached (`client.link` down), a held lease is not given up when its renewals fail —
nobody can take the group meanwhile, since taking it goes through the same store — so
the members keep their coordinator through the outage. Such a lease is then *resumed*:
once the link is back it is renewed even if it expired at the store, unless another agent
took it meanwhile (`groups/leases` `resume`); until that answer arrives it stays held for
at most a renewal round. State saves that failed during the outage are sent again then.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agents.control_plane import ControlPlaneClient, ControlPlaneError
from agents.metrics import Counter

log = logging.getLogger(__name__)

LEASE_TTL_S = 4.0
RENEW_INTERVAL_S = 1.0
LEASE_MARGIN_S = 1.0
CALL_TIMEOUT_S = 2.0
# Ripcord: how long a lease is kept through an outage at most. Past this the members'
# sessions (45 s by default) have long ended; keeping groups longer would only widen the
# window in which an agent cut off alone holds a group another agent has taken.
OUTAGE_HOLD_MAX_S = 300.0

_LEASES = Counter(
    "floe_group_leases_total",
    "Group lease events on this agent: acquired, lost (renewal refused or not confirmed in"
    " time), released.",
    ("event",),
)


@dataclass
class Lease:
    epoch: int
    valid_until: float  # time.monotonic()
    resume: bool = False  # kept through an outage: renew it with `resume`


class GroupLeases:
    """The leases this agent holds and the holders of others it recently asked about."""

    def __init__(
        self,
        client: ControlPlaneClient,
        agent_id: str,
        *,
        ttl_s: float = LEASE_TTL_S,
        renew_interval_s: float = RENEW_INTERVAL_S,
        margin_s: float = LEASE_MARGIN_S,
    ) -> None:
        self.client = client
        self.agent_id = agent_id
        self.ttl_s = ttl_s
        self.renew_interval_s = renew_interval_s
        self.margin_s = margin_s
        self.held: dict[str, Lease] = {}
        # group -> (holder, until, the store's stamp of its expiry or None)
        self._others: dict[str, tuple[str, float, int | None]] = {}
        self._asking: dict[str, asyncio.Future[str | None]] = {}  # to ask in the next call
        self._targets: dict[str, str] = {}  # group -> the agent to give it to, if free
        self._inflight: dict[str, asyncio.Future[str | None]] = {}  # asked, not yet answered
        self._flush: asyncio.Task[None] | None = None
        self._release: dict[str, int] = {}
        # Set by the coordinator: a lease was acquired (group id, epoch, saved state) /
        # is no longer held.
        self.on_acquired: Callable[[str, int, dict[str, Any]], None] = lambda *_: None
        self.on_lost: Callable[[str], None] = lambda _: None
        # Set by the runtime: whether Ripcord is on (then leases survive an outage).
        self.keep_through_outage: Callable[[], bool] = lambda: False
        # States whose save failed while the lease was kept through an outage.
        self._unsaved: dict[str, dict[str, Any]] = {}

    # -- what is held ---------------------------------------------------------------------

    def epoch(self, group_id: str) -> int | None:
        """The epoch of the group's lease while this agent may act on it, else None (and
        the lease is given up)."""
        lease = self.held.get(group_id)
        if lease is None:
            return None
        now = time.monotonic()
        if lease.valid_until <= now:
            if not self._in_outage():
                self._lose(group_id, "not renewed in time")
                return None
            # Kept through the outage; once the link is back, valid until the resume
            # has had a renewal round to be answered.
            lease.resume = True
            lease.valid_until = now + self.renew_interval_s + CALL_TIMEOUT_S
        return lease.epoch

    def resuming(self, group_id: str) -> bool:
        """The lease was kept through an outage and is not yet resumed: writes fenced by
        it (offset commits) would be refused by the store until it is."""
        lease = self.held.get(group_id)
        return lease is not None and lease.resume

    def _in_outage(self) -> bool:
        """Ripcord is on and the control plane has been unreachable (not too long)."""
        if not self.keep_through_outage():
            return False
        link = self.client.link
        return not link.up and link.down_for_s < OUTAGE_HOLD_MAX_S

    def _lose(self, group_id: str, why: str) -> None:
        self._unsaved.pop(group_id, None)
        if self.held.pop(group_id, None) is not None:
            _LEASES.inc(1, "lost")
            log.warning("lost the lease of group %s (%s)", group_id, why)
            self.on_lost(group_id)

    def release(self, group_id: str) -> None:
        """Give a lease back (sent with the next renewal)."""
        lease = self.held.pop(group_id, None)
        if lease is not None:
            _LEASES.inc(1, "released")
            self._release[group_id] = lease.epoch

    # -- who holds a group ------------------------------------------------------------------

    async def holder(self, group_id: str, suggest: str | None = None) -> str | None:
        """The agent holding the group's lease; when nobody holds a live one, this agent
        takes it — or `suggest` (another agent of the cluster, the rendezvous choice) is
        given it. None when the metadata store cannot be asked."""
        if self.epoch(group_id) is not None:
            return self.agent_id
        known = self._others.get(group_id)
        if known is not None and known[1] > time.monotonic():
            return known[0]
        future = self._inflight.get(group_id) or self._asking.get(group_id)
        if future is None:
            future = self._asking[group_id] = asyncio.get_running_loop().create_future()
            self._targets[group_id] = suggest or self.agent_id
            if self._flush is None:
                self._flush = asyncio.get_running_loop().create_task(self._acquire_asked())
        return await asyncio.shield(future)

    async def _acquire_asked(self) -> None:
        await asyncio.sleep(0)  # let the acquisitions of this moment join one call
        asking, self._asking, self._flush = self._asking, {}, None
        targets, self._targets = self._targets, {}
        self._inflight.update(asking)
        try:
            await self._acquire(asking, targets)
        finally:
            for group_id, future in asking.items():
                if self._inflight.get(group_id) is future:
                    del self._inflight[group_id]
                if not future.done():
                    future.set_result(None)

    async def _acquire(
        self, asking: dict[str, asyncio.Future[str | None]], targets: dict[str, str]
    ) -> None:
        sent = time.monotonic()
        mine = sorted(g for g in asking if targets.get(g, self.agent_id) == self.agent_id)
        offer = [{"group_id": g, "agent_id": a} for g, a in targets.items() if a != self.agent_id]
        try:
            answer = await self._exchange(acquire=mine, offer=offer)
        except ControlPlaneError as exc:
            log.warning("asking for group leases failed: %s", exc)
            return
        for lease in answer.get("leases") or ():
            group_id, holder = lease["group_id"], lease["agent_id"]
            if holder == self.agent_id:
                self.held[group_id] = Lease(lease["epoch"], sent + self.ttl_s - self.margin_s)
                self._others.pop(group_id, None)
                _LEASES.inc(1, "acquired")
                self.on_acquired(group_id, lease["epoch"], lease["state"] or {})
            elif holder:
                until = time.monotonic() + lease["expires_in_ms"] / 1000
                stamp = lease.get("expires_at_ms")
                self._others[group_id] = (holder, until, stamp if type(stamp) is int else None)
            future = asking.get(group_id)
            if future is not None and not future.done():
                future.set_result(holder or None)

    def known_until(self, group_id: str) -> float | None:
        """When the lease of another holder this agent knows of ends (time.monotonic()),
        unless renewed meanwhile; None when none is known."""
        known = self._others.get(group_id)
        return known[1] if known is not None else None

    def known_stamp(self, group_id: str) -> int | None:
        """The store's stamp of that lease's expiry (its own clock, ms): unchanged between
        two answers exactly when the holder did not renew in between; None when unknown."""
        known = self._others.get(group_id)
        return known[2] if known is not None else None

    def forget_holder(self, group_id: str) -> None:
        """A peer named as holder said it is not: ask the store next time."""
        self._others.pop(group_id, None)

    # -- renewing ---------------------------------------------------------------------------

    async def renew_once(self) -> None:
        """Renew every held lease (and send the releases) in one call."""
        renew = {g: lease.epoch for g, lease in self.held.items()}
        resumed = {g for g, lease in self.held.items() if lease.resume}
        release, self._release = self._release, {}
        if not renew and not release:
            return
        sent = time.monotonic()
        try:
            answer = await self._exchange(
                renew=[{"group_id": g, "epoch": e} for g, e in renew.items() if g not in resumed],
                release=[{"group_id": g, "epoch": e} for g, e in release.items()],
                **(
                    {"resume": [{"group_id": g, "epoch": renew[g]} for g in sorted(resumed)]}
                    if resumed
                    else {}
                ),
            )
        except ControlPlaneError as exc:
            log.warning("renewing %d group leases failed: %s", len(renew), exc)
            self._release.update(release)
        else:
            for group_id in answer.get("renewed") or ():
                lease = self.held.get(group_id)
                if lease is not None and lease.epoch == renew.get(group_id):
                    lease.valid_until = sent + self.ttl_s - self.margin_s
                    if lease.resume:
                        lease.resume = False
                        log.info("group %s: lease resumed after the outage", group_id)
                    state = self._unsaved.get(group_id)
                    if state is not None:
                        asyncio.get_running_loop().create_task(self.save(group_id, state))
            for group_id in answer.get("lost") or ():
                lease = self.held.get(group_id)
                if lease is not None and lease.epoch == renew.get(group_id):
                    self._lose(group_id, "renewal refused")
        for group_id in list(self.held):
            self.epoch(group_id)  # gives up what was not confirmed in time
        now = time.monotonic()
        self._others = {g: known for g, known in self._others.items() if known[1] > now}

    async def renew_loop(self) -> None:
        # A fixed rate from each renewal's start: a slow answer does not push the next
        # renewal later (a lease lasts ttl - margin = 3 s from the send that renewed it).
        next_at = time.monotonic()
        while True:
            next_at = max(next_at + self.renew_interval_s, time.monotonic())
            await asyncio.sleep(next_at - time.monotonic())
            try:
                await self.renew_once()
            except Exception:
                log.exception("renewing group leases failed")

    async def release_all(self) -> None:
        """At shutdown: give every lease back, so other agents take the groups at once."""
        for group_id in list(self.held):
            self.release(group_id)
        release, self._release = self._release, {}
        if release:
            with contextlib.suppress(ControlPlaneError):
                await self._exchange(
                    release=[{"group_id": g, "epoch": e} for g, e in release.items()]
                )

    async def _exchange(self, **parts: list[Any]) -> dict[str, Any]:
        body = {"agent_id": self.agent_id, "ttl_ms": int(self.ttl_s * 1000), **parts}
        return await self.client.call("groups/leases", body, timeout_s=CALL_TIMEOUT_S)

    # -- the group's state --------------------------------------------------------------------

    async def save(self, group_id: str, state: dict[str, Any]) -> bool:
        """Store the group's state under this agent's lease; False when the store refused
        it (the lease is lost) or could not be reached (the lease cannot be trusted)."""
        epoch = self.epoch(group_id)
        if epoch is None:
            return False
        if self.resuming(group_id):
            # Kept through an outage, not yet resumed: the store would refuse the epoch
            # until it is. Saved then (renew_once).
            self._unsaved[group_id] = state
            return True
        body = {"agent_id": self.agent_id, "group_id": group_id, "epoch": epoch, **state}
        self._unsaved.pop(group_id, None)  # this state supersedes one not yet saved
        try:
            answer = await self.client.call("groups/save", body, timeout_s=CALL_TIMEOUT_S)
        except ControlPlaneError as exc:
            if self._in_outage() or (self.held.get(group_id) and self.held[group_id].resume):
                # Ripcord: the members go on with this state; it is saved once the
                # lease is resumed (a holder that dies first leaves the previous one,
                # and the members rejoin the next holder once, as after any move).
                log.info("group %s: state saved after the outage (%s)", group_id, exc)
                self._unsaved[group_id] = state
                return True
            log.warning("saving group %s failed: %s", group_id, exc)
            return False
        if answer.get("error_code"):
            if self.held.get(group_id) is not None and self.held[group_id].epoch == epoch:
                self._lose(group_id, "state save refused")
            return False
        return True


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def unb64(text: str) -> bytes:
    return base64.b64decode(text or "")
