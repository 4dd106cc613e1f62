"""Where an agent's journal lives in the cluster's bucket (docs/ARCHITECTURE.md
"Lightning topics").

A journal entry is an ordinary segment file, written once: its object key names the
journal (the agent and the boot that wrote it) and the entry's position in it, so the
file is both the data and the journal entry — one PUT per flush.

    <cluster>/journal/<agent id>/<boot>/<position, 12 digits>.seg   an entry
    <cluster>/journals/<agent id>/<boot>                          the journal's marker

Positions grow within a boot; zero-padded, a listing returns a journal's entries in
journal order. The marker (a few bytes) says the journal may hold entries not yet
sequenced: recovering agents list the markers, not every entry ever written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

JOURNAL_FOLDER = "journal"
MARKER_FOLDER = "journals"
_ENTRY = re.compile(
    r"^(?P<cluster>[^/]+)/journal/(?P<agent>[^/]+)/(?P<boot>[^/]+)/(?P<position>[0-9]{12})\.seg$"
)
_MARKER = re.compile(r"^(?P<cluster>[^/]+)/journals/(?P<agent>[^/]+)/(?P<boot>[^/]+)$")


@dataclass(frozen=True, order=True)
class JournalName:
    """One journal: the agent and the boot (process start) that wrote it."""

    agent_id: str
    boot: str

    def __str__(self) -> str:
        return f"{self.agent_id}/{self.boot}"

    def entries_prefix(self, cluster_id: str) -> str:
        """The folder holding this journal's entries (list it for journal order)."""
        return f"{cluster_id}/{JOURNAL_FOLDER}/{self.agent_id}/{self.boot}/"

    def entry_key(self, cluster_id: str, position: int) -> str:
        """The object key of the entry at `position`."""
        return f"{self.entries_prefix(cluster_id)}{position:012d}.seg"

    def marker_key(self, cluster_id: str) -> str:
        """The object key of this journal's marker."""
        return f"{cluster_id}/{MARKER_FOLDER}/{self.agent_id}/{self.boot}"

    @property
    def lease_subject(self) -> str:
        """The lease (metadata_store/leases.py) of whoever sequences this journal."""
        return f"journal {self}"


def markers_prefix(cluster_id: str) -> str:
    """The folder of every journal marker of a cluster."""
    return f"{cluster_id}/{MARKER_FOLDER}/"


def parse_entry_key(key: str) -> tuple[JournalName, int] | None:
    """The journal and position an entry key names; None for any other key."""
    match = _ENTRY.match(key)
    if match is None:
        return None
    return JournalName(match["agent"], match["boot"]), int(match["position"])


def parse_marker_key(key: str) -> JournalName | None:
    """The journal a marker key names; None for any other key."""
    match = _MARKER.match(key)
    return None if match is None else JournalName(match["agent"], match["boot"])
