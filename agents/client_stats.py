"""What the agent sees of its clients and its own files, for the cluster's Diagnostics
page (reported in the heartbeat's ``stats``, small and bounded): produce requests,
batches and records per client id — records per batch tell a producer that sends each
record alone (``linger.ms`` 0) — and the segment files it committed, with why each was
sealed (age or size), since it started.

Client ids are the clients' to choose: the first `MAX_CLIENTS` are counted (each cut to
`MAX_CLIENT_ID` characters), the rest together under "" — a client cannot grow the
report.
"""

from __future__ import annotations

import threading
import time
from typing import Any

MAX_CLIENTS = 32
MAX_CLIENT_ID = 255
OTHERS = ""


class ProducerStats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, list[int]] = {}  # client id → [requests, batches, records]

    def count(self, client_id: str | None, batches: int, records: int) -> None:
        name = (client_id or "")[:MAX_CLIENT_ID]
        with self._lock:
            counts = self._counts.get(name)
            if counts is None:
                if len(self._counts) >= MAX_CLIENTS:
                    name = OTHERS
                counts = self._counts.setdefault(name, [0, 0, 0])
            counts[0] += 1
            counts[1] += batches
            counts[2] += records

    def report(self) -> dict[str, list[int]]:
        with self._lock:
            return {name: list(counts) for name, counts in self._counts.items()}


PRODUCERS = ProducerStats()
STARTED = time.monotonic()


def diagnostics_stats(files: int, file_bytes: int, flush_reasons: dict[str, int]) -> dict[str, Any]:
    """The heartbeat stats the Diagnostics page reads (docs/AGENT_API.md)."""
    return {
        "uptime_s": int(time.monotonic() - STARTED),
        "files_committed": files,
        "file_bytes_committed": file_bytes,
        "flush_reasons": dict(sorted(flush_reasons.items())[:8]),
        "producers": PRODUCERS.report(),
    }
