"""Journals of other agents: sequence what a dead agent journaled and never committed.

Every agent that journals (lightning topics, Ripcord) holds the lease of its own journal
(`journal/lease`, renewed every `interval_s`) and, every `scan_s`, lists the cluster's
journal markers (core/journal_keys.py). For a journal whose lease it can take — its
writer stopped renewing: killed, or cut off from the control plane longer than the
lease — it lists the journal's entries, asks the control plane which are committed
(`journal/status`), and commits the rest in journal order, each with the body its writer
would have sent. Committing an entry twice returns its first answer, and whoever commits
does so in journal order, so an entry is sequenced exactly once and in order even when
its writer comes back and sequences the same entries.

A journal's marker is deleted once everything in it is sequenced and its writer is
certainly gone: another boot of this agent, or an agent not among the cluster's live
agents whose marker is older than `forget_after_s` (a writer refreshes its marker every
minute while it journals). A writer that stops cleanly deletes its own.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import Executor
from datetime import UTC, datetime
from typing import Any

from agents.control_plane import ControlPlaneClient, ControlPlaneError
from agents.metrics import Counter
from agents.write_path import BatchToWrite, commit_entries_of, gap_refused_batches
from core.journal_keys import JournalName, markers_prefix, parse_marker_key
from core.storage import ObjectStore

log = logging.getLogger(__name__)

_RECOVERED = Counter(
    "floe_journal_recovered_entries_total",
    "Entries of other agents' journals this agent committed.",
)

LEASE_S = 15  # a journal's lease; its writer renews it every INTERVAL_S
INTERVAL_S = 3.0
SCAN_S = 5.0
FORGET_AFTER_S = 600.0
CALL_TIMEOUT_S = 5.0


class JournalKeeper:
    """Holds this agent's journal lease and sequences dead agents' journals."""

    def __init__(
        self,
        client: ControlPlaneClient,
        store: ObjectStore,
        *,
        cluster_id: str,
        agent_id: str,
        journal: JournalName,
        live_agents: Callable[[], set[str]],
        executor: Executor | None = None,
        interval_s: float = INTERVAL_S,
        scan_s: float = SCAN_S,
        lease_s: int = LEASE_S,
        forget_after_s: float = FORGET_AFTER_S,
        journaling: Callable[[], bool] = lambda: True,
        on_gap: Callable[[list[BatchToWrite]], None] | None = None,
    ) -> None:
        self.client = client
        self.store = store
        self.cluster_id = cluster_id
        self.agent_id = agent_id
        self.journal = journal
        self.live_agents = live_agents
        self.executor = executor
        self.interval_s = interval_s
        self.scan_s = scan_s
        self.lease_s = lease_s
        self.forget_after_s = forget_after_s
        self.journaling = journaling  # has this agent's journal an entry yet?
        # Batches of a recovered entry refused for a sequence gap go to this agent's
        # writer, which holds them until their predecessors commit.
        self.on_gap = on_gap
        self._token: str | None = None
        self._last_scan = float("-inf")

    async def run_forever(self) -> None:
        """Renew the own lease and scan for dead journals until cancelled."""
        while True:
            try:
                await self.step()
            except ControlPlaneError as exc:
                log.info("journals: control plane not reachable (%s)", exc)
            except Exception:  # our bug or the bucket: log, go on next time
                log.exception("journals: a round failed")
            await asyncio.sleep(self.interval_s)

    async def step(self) -> None:
        """One round: renew the own lease; scan when due."""
        if not self.client.link.up and self.client.link.down_for_s < self.lease_s:
            return  # calls would only time out; the link's state changes with any call
        if self.journaling():  # no lease row for an agent that never journals
            answer = await self._lease(self.journal, self._token)
            self._token = answer.get("token")
        now = time.monotonic()
        if self.client.link.since_outage_s < self.lease_s / 2:
            # Back from an outage: every writer's lease expired meanwhile, and each
            # renews its own within a round; taking theirs now would only sequence
            # their backlogs twice, in parallel with them.
            return
        if now - self._last_scan >= self.scan_s:
            self._last_scan = now
            await self.scan()

    async def _lease(self, journal: JournalName, token: str | None) -> dict[str, Any]:
        body = {"journal": str(journal), "agent_id": self.agent_id, "lease_s": self.lease_s}
        if token:
            body["token"] = token
        return await self.client.call("journal/lease", body, timeout_s=CALL_TIMEOUT_S)

    async def _in_thread(self, call: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.executor, call, *args)

    async def scan(self) -> int:
        """Sequence every journal of another writer whose lease is free; the number of
        entries committed."""
        markers = await self._in_thread(
            lambda: list(self.store.list(markers_prefix(self.cluster_id)))
        )
        done = 0
        for info in markers:
            journal = parse_marker_key(info.key)
            if journal is None or journal == self.journal:
                continue
            answer = await self._lease(journal, None)
            if not answer.get("token"):
                continue  # its writer (or another agent) holds it
            done += await self.recover(journal, marker_modified=info.last_modified)
        return done

    async def recover(self, journal: JournalName, *, marker_modified: datetime) -> int:
        """Commit `journal`'s unsequenced entries in order; the number committed."""
        prefix = journal.entries_prefix(self.cluster_id)
        keys = await self._in_thread(
            lambda: sorted(i.key for i in self.store.list(prefix) if i.key.endswith(".seg"))
        )
        committed: set[str] = set()
        if keys:
            answer = await self.client.call(
                "journal/status", {"file_keys": keys}, timeout_s=CALL_TIMEOUT_S
            )
            committed = set(answer.get("committed") or [])
        # Entries are committed in journal order: all before the last committed one are.
        last = max((i for i, key in enumerate(keys) if key in committed), default=-1)
        count = 0
        for key in keys[last + 1 :]:
            data = await self._in_thread(self.store.get, key)
            body = {"file_key": key, "size": len(data), "batches": commit_entries_of(data)}
            answer = await self.client.call_with_retries("commit", body, attempts=3, timeout_s=10)
            refused = gap_refused_batches(data, body["batches"], answer.get("batches") or [])
            if refused:
                # Their predecessors are acknowledged in a journal not sequenced yet (this
                # agent's own, perhaps): held and journaled again here until they commit.
                log.warning(
                    "journal %s: entry %s: %d batches refused for a sequence gap, held",
                    journal,
                    key,
                    len(refused),
                )
                if self.on_gap is not None:
                    self.on_gap(refused)
            count += 1
            _RECOVERED.inc()
        if count:
            log.warning("journal %s: sequenced %d entries its writer left", journal, count)
        if self._gone(journal, marker_modified):
            await self._in_thread(self.store.delete, journal.marker_key(self.cluster_id))
            log.info("journal %s: all sequenced, its writer gone: marker removed", journal)
        return count

    def _gone(self, journal: JournalName, marker_modified: datetime) -> bool:
        if journal.agent_id == self.agent_id:
            return True  # another boot of this agent: that process is gone
        age = (datetime.now(UTC) - marker_modified).total_seconds()
        return journal.agent_id not in self.live_agents() and age > self.forget_after_s

    async def close(self, *, all_sequenced: bool) -> None:
        """At a clean stop: end the own lease, and remove the own marker when nothing
        journaled is left unsequenced."""
        if not all_sequenced:
            return  # another agent (or this one, restarted) sequences the rest
        try:
            await self._in_thread(self.store.delete, self.journal.marker_key(self.cluster_id))
        except Exception as exc:  # the bucket: a later recovery removes it
            log.warning("journal %s: marker not removed: %s", self.journal, exc)
