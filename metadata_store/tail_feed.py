"""The tail feed's notifications (issue 28; docs/ARCHITECTURE.md "The tail feed").

``floe_commit_files`` announces every index run it writes on the ``floe_tail`` channel,
in the commit's own transaction (migration 0014). Every other change of what a fetch plan
says about a partition — its log start moving (retention, DeleteRecords), its runs
rewritten (compaction swaps), a transaction's markers, the topic's deletion — announces
the partitions it changed here, in its transaction too, so that a listener sees the
changes in commit order. An agent drops what its tail index holds of those partitions
and learns them again from their next run.

The payloads, one notification each (PostgreSQL's limit is 8000 bytes):

    r <cluster id>\\nf <file key>\\n<run>\\n<run>…\\nf <file key>\\n<run>…
                      the runs of one commit's files (0014: a run names its partition's
                      row id), one notification a commit unless it would pass 8000 bytes
    x <cluster id>\\n<topic id> <index>\\n…         partitions whose plans changed otherwise
    c <cluster id>\\n<topic id> <first> <end>        partitions first..end-1 created: empty,
                      at offset 0 (a new topic's, or CreatePartitions'), announced in the
                      creating transaction, so before any commit to them
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from django.db import connection

CHANNEL = "floe_tail"
_CHANGED_PER_NOTE = 100  # (topic id, index) lines of ~40 bytes each


def partitions_changed(cluster_id: int | None, partition_ids: Iterable[int]) -> None:
    """Announce, in the caller's transaction, that plans of these partitions (row ids)
    changed other than by a commit. `cluster_id` None: each partition's own cluster."""
    ids = sorted(set(partition_ids))
    if not ids:
        return
    params: list[str | int | list[int]] = [CHANNEL, _CHANGED_PER_NOTE, ids]
    if cluster_id is not None:
        params.append(cluster_id)
    with connection.cursor() as cursor:
        # The partitions' names, grouped by cluster, 100 to a notification.
        cursor.execute(
            "SELECT count(pg_notify(%s, n.note)) FROM ("
            " SELECT 'x ' || t.cluster_id || E'\\n' || string_agg(p.topic_id::text || ' '"
            "   || p.index, E'\\n' ORDER BY p.id) AS note"
            " FROM (SELECT id, topic_id, index, (row_number() OVER (ORDER BY id) - 1) / %s AS chunk"
            "       FROM floe_partition WHERE id = ANY(%s)) p"
            " JOIN floe_topic t ON t.id = p.topic_id"
            + ("" if cluster_id is None else " WHERE t.cluster_id = %s")
            + " GROUP BY t.cluster_id, p.chunk) n",
            params,
        )


def partitions_created(cluster_id: int, topic_id: str, first: int, end: int) -> None:
    """Announce, in the caller's transaction, that the topic's partitions `first` to
    `end` - 1 were created: empty, their log start and high watermark 0. An agent seeds
    its tail index with them, so that consumers waiting on a brand-new topic are planned
    there before its first record (issue 44); PostgreSQL delivers the notification
    before any later transaction's, so before the partitions' first commit."""
    if first >= end:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_notify(%s, %s)", [CHANNEL, f"c {cluster_id}\n{topic_id} {first} {end}"]
        )


@dataclass(frozen=True, slots=True)
class Run:
    """One run a commit wrote, as the feed carries it."""

    partition_id: int  # the partition's row id (the relay names its topic and index)
    base_offset: int
    last_offset: int
    pos: int
    len: int
    batch_count: int
    open_txn_offset: int  # the first offset of the oldest open transaction; -1: none
    log_start_offset: int


@dataclass(frozen=True, slots=True)
class Note:
    """A parsed notification: the runs of a commit's files ((file key, runs) in commit
    order), the partitions (topic id, index) whose plans changed otherwise, or the
    partitions created ((topic id, first index, end index))."""

    cluster_id: int
    files: tuple[tuple[str, tuple[Run, ...]], ...] = ()
    changed: tuple[tuple[str, int], ...] = ()
    created: tuple[tuple[str, int, int], ...] = ()

    @property
    def runs(self) -> Iterator[Run]:
        for _, runs in self.files:
            yield from runs


def parse(payload: str) -> Note:
    """A notification's payload (raises ValueError on one that does not fit)."""
    head, _, body = payload.partition("\n")
    kind, _, rest = head.partition(" ")
    lines = body.split("\n") if body else []
    if kind == "r":
        files: list[tuple[str, list[Run]]] = []
        for line in lines:
            if line.startswith("f "):
                files.append((line[2:], []))
                continue
            numbers = line.split(" ")
            if len(numbers) != 8:
                raise ValueError(f"a run of {len(numbers)} fields: {line!r}")
            if not files:
                raise ValueError(f"a run before its file: {line!r}")
            files[-1][1].append(Run(*map(int, numbers)))
        return Note(int(rest), files=tuple((key, tuple(runs)) for key, runs in files))
    if kind == "x":
        changed = []
        for line in lines:
            topic, index = line.split(" ")
            changed.append((topic, int(index)))
        return Note(int(rest), changed=tuple(changed))
    if kind == "c":
        created = []
        for line in lines:
            topic, first, end = line.split(" ")
            created.append((topic, int(first), int(end)))
        return Note(int(rest), created=tuple(created))
    raise ValueError(f"not a tail-feed notification: {head!r}")
