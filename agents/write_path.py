"""The write path: one open segment for every partition, flushed by size or age, then
PUT to object storage and committed to the control plane — in segment order.

A sealed segment is laid out by partition: each partition's batches sit next to each
other, in the order they arrived, so the metadata store indexes one run per partition
and file instead of one row per batch.

Produce handlers call `SegmentWriter.append` with a whole request's validated batches;
all of them land in the same segment (a request is atomic: one file, one commit). The
answer is a future that resolves, after the commit, to one commit result per batch.

Ordering: PUTs of successive segments may run concurrently, but each commit waits for
the previous segment's commit to finish (succeed or fail). An idempotent producer with
several requests in flight therefore sees its batches committed in the order it sent
them, whichever file's PUT finished first.

Journal segments (lightning topics, and every segment while Ripcord is on): the file's key
names the agent's journal and the segment's position in it (core/journal_keys.py), so the
one PUT is both the data and the journal entry. A lightning request is answered as soon as
its file is in the bucket (base offset -1: not known yet); the commit follows in the same
segment order — the chain of commits *is* the sequencer — retried until it lands, with the
same body every time (a file key committed twice gets its first answer: exactly once).
With Ripcord, a standard topic's request in a journal segment is answered after its commit
as usual, unless the commit has not answered `ripcord_ack_s` after the PUT or the control
plane is known to be away: then it is answered like a lightning one. What is journaled and
not yet sequenced is recovered by another agent if this one dies (agents/journal_recovery.py).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from agents.control_plane import (
    ControlPlaneClient,
    ControlPlaneError,
    ControlPlaneRejected,
    ControlPlaneUnavailable,
)
from agents.journal_sequences import GapHold, SequenceWatch
from agents.metrics import Counter, Gauge, Histogram, error_label, size_histogram
from agents.partition_offsets import PartitionOffsets
from agents.s3_loop_puts import LOOP_PUT_MAX_BYTES
from agents.segment_upload import (
    COMMIT_WAIT_SECONDS,
    ENCODE_SECONDS,
    UploadSlots,
    timed,
)
from core.journal_keys import JournalName
from core.kafka.errors import ErrorCode
from core.kafka.records import BatchHeader, CorruptRecord, iter_batches, uncompressed_size
from core.segment import SegmentBuilder, read_index

log = logging.getLogger(__name__)

_Parsed = TypeVar("_Parsed")
# A commit given up: no results, the Kafka error code its requests get, the outcome's name.
_GivenUp = tuple[None, int, str]

# librdkafka retries both (rdkafka_request.c, rd_kafka_handle_Produce_error): storage
# error as "not persisted", request timed out as "possibly persisted".
KAFKA_STORAGE_ERROR = ErrorCode.KAFKA_STORAGE_ERROR
REQUEST_TIMED_OUT = ErrorCode.REQUEST_TIMED_OUT

_FLUSH_BYTES = size_histogram("floe_segment_flush_bytes", "Size of flushed segments.")
_FLUSH_SECONDS = Histogram(
    "floe_segment_flush_seconds", "From sealing a segment to its commit answer.", ("outcome",)
)
_PUT_SECONDS = Histogram("floe_segment_put_seconds", "Object-store PUT latency.", ("outcome",))
_COMMIT_SECONDS = Histogram("floe_segment_commit_seconds", "Commit call latency.", ("outcome",))
_COMMITTED_TOGETHER = Counter(
    "floe_journal_entries_committed_together_total",
    "Journal entries committed several to a call (commit-files), counted once each.",
)
_SEGMENTS = Counter("floe_segments_total", "Flushed segments, by outcome.", ("outcome",))
_FLUSH_REASON = Counter("floe_segment_flush_reason_total", "Why segments were sealed.", ("reason",))
# Committed batches' sizes with their records decompressed (reported to the control plane
# on every heartbeat for billing; cumulative, so a report seen twice counts once).
WRITTEN_UNCOMPRESSED_BYTES = Counter(
    "floe_written_uncompressed_bytes_total",
    "Committed record-batch bytes with their records decompressed.",
)
_INFLIGHT = Gauge("floe_segment_inflight_bytes", "Bytes of sealed segments not yet committed.")
_EARLY_ACKS = Counter(
    "floe_journal_early_acks_total",
    "Produce requests answered once their journal entry was in the bucket, by why.",
    ("reason",),
)
# The agent's writer (the last one made: one per agent process), read at scrape time.
_BACKLOG_OF: list[SegmentWriter] = []


def _backlog(index: int) -> float:
    return _BACKLOG_OF[-1].journal_backlog()[index] if _BACKLOG_OF else 0.0


_JOURNAL_BYTES = Gauge(
    "floe_journal_unsequenced_bytes",
    "Bytes journaled in the bucket (and acknowledged) whose commit has not answered.",
    callback=lambda: _backlog(0),
)
_JOURNAL_AGE = Gauge(
    "floe_journal_oldest_unsequenced_seconds",
    "Age of the oldest journal entry whose commit has not answered (0: none).",
    callback=lambda: _backlog(1),
)
_SEQUENCE_LOST = Counter(
    "floe_journal_refused_after_ack_total",
    "Batches acknowledged from the journal that the commit then refused, by error.",
    ("error",),
)

# Back-off before each retry. A commit may be retried safely: re-committing a file key
# returns the first answer (docs/AGENT_API.md), so a commit whose outcome is unknown (a
# timeout, a dropped connection) is retried with the same key before the next segment's
# commit goes out. ~21.5 s of back-off rides out a control-plane restart or a database
# down for 15-20 s (so the outcome is learned, not guessed) and stays under a producer's
# request timeout (30 s by default); then the produce requests fail with a retriable
# error and the producer tries again. After the first second a retry goes every second,
# not every three: when the database comes back (a failover's new primary) the commit
# lands within a second, and an attempt that fails fast (a 503) costs the control plane
# next to nothing.
PUT_RETRY_DELAYS_S = (0.05, 0.2)
COMMIT_RETRY_DELAYS_S = (0.1, 0.4, 1.0) + (1.0,) * 20
# One commit attempt is abandoned after this long (the control plane's own statement
# timeout is shorter, so a commit the database is still working on is rare).
COMMIT_TIMEOUT_S = 10.0
# /healthz says "commits stuck" while a commit attempt has run this long, while commits
# are failing, and for this long after the last one failed.
STUCK_AFTER_S = 5.0
# Sealed segments allowed in the pipeline (one committing, one uploading / waiting its
# turn) before the age limit stops sealing and lets the open segment grow.
MAX_SEALED_PENDING = 2
# A segment's age timer fires this fraction of the flush age early at most (its lead:
# `SegmentWriter._learn_lead`).
MAX_SEAL_LEAD = 0.1
# A segment is sealed before it holds more batches than this: the commit call carries an
# entry per batch and the control plane refuses more than twice this many in one.
MAX_SEGMENT_BATCHES = 50_000
# A journal entry's commit is retried until it lands (its requests were answered already):
# these delays, then the last one forever.
JOURNAL_RETRY_DELAYS_S = (0.1, 0.2, 0.4, 0.8, 1.0)
# Ripcord: a standard topic's request in a journal segment is answered from the journal
# when its commit has not answered this long after the PUT (a frozen control-plane
# connection answers nothing; acks stay within the flush age + PUT + this).
RIPCORD_ACK_S = 0.5
# A journal's marker is PUT again, beside an entry's PUT and before the entry is answered,
# when it is older than this: a journal that still gets entries always has a marker
# younger than this.
MARKER_REFRESH_S = 60.0
# A batch answered from the journal and refused for a sequence gap is held, and journaled
# again (with every other held batch of its producer and partition, in sequence order)
# this often, until it commits or nothing of its partition has committed for this long
# while the control plane was up: the missing batch may sit in another agent's journal
# behind that agent's backlog, or in a dead agent's until another takes it over (lease
# 15 s + a scan every 5 s). A producer whose partition moved between agents many times
# during an outage makes a chain of such waits, one retry per move: the retry is short.
GAP_RETRY_S = 0.2
GAP_PATIENCE_S = 60.0
# Journal entries whose PUT is done and whose turn to commit has come together (a backlog
# after an outage: each entry's commit would otherwise be one call, one after another)
# are committed in one `commit-files` call, in order: at most this many files, and this
# many commit entries in all.
MAX_COMMIT_FILES = 32
MAX_COMMIT_FILES_ENTRIES = 20_000
# Early answers: no offset yet (Kafka's -1, as for acks=0-like unknown offsets).
_JOURNALED = {"error_code": 0, "base_offset": -1, "log_start_offset": -1}


@dataclass(frozen=True)
class BatchToWrite:
    """One validated record batch of a produce request."""

    topic_id: uuid.UUID
    partition: int
    data: memoryview  # the batch exactly as the producer sent it
    header: BatchHeader
    lightning: bool = False  # its topic is a lightning topic: answered from the journal


# A request's answer: one commit result dict per batch, in order.
BatchResults = asyncio.Future[list[dict[str, Any]]]


@dataclass(eq=False)  # identity: sealed segments are kept in a set until answered
class _Segment:
    size: int = 0  # bytes of batches appended
    sealed: bool = False
    batches: list[BatchToWrite] = field(default_factory=list)  # in append order
    # (future, index of the request's first batch, number of batches, may be answered
    # from the journal), append order
    waiters: list[tuple[BatchResults, int, int, bool]] = field(default_factory=list)
    lightning: bool = False  # holds a lightning batch: a journal entry, sealed on time
    journal: bool = False  # decided when sealed: its key is a journal entry's
    key: str = ""
    journaled_at: float | None = None  # monotonic, once in the bucket (journal only)
    touched: set[tuple[str, int]] = field(default_factory=set)
    committed: asyncio.Future[None] | None = None
    timer: asyncio.TimerHandle | None = None
    overdue: bool = False  # its age passed while the commit pipeline was full
    written: _Written | None = None  # laid out and in the bucket (its PUT succeeded)
    # Committed in an earlier segment's `commit-files` call: its (results, error code,
    # outcome), taken when its own turn comes.
    grouped: tuple[list[dict[str, Any]] | None, int, str] | None = None
    due: float = 0.0  # perf_counter when its flush age is up
    timed: bool = False  # sealed by its age timer, when it fired (the seal's lead learns)


@dataclass(frozen=True)
class _Written:
    """A sealed segment laid out: the file's bytes, an entry per batch in file order and
    for each the batch's index in append order, and the commit's entries (`entries`:
    batches of a partition side by side that carry no producer id are one entry, of
    `entry_batches` batches)."""

    data: bytes
    commit_batches: list[dict[str, Any]]
    append_index: list[int]
    uncompressed: list[int] = field(default_factory=list)  # per batch, in file order
    entries: list[dict[str, Any]] = field(default_factory=list)
    entry_batches: list[int] = field(default_factory=list)

    def per_batch(self, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The commit's results per entry as results per batch (file order): the batches
        of an entry follow its first one's base offset record by record."""
        if len(self.entries) == len(self.commit_batches):
            return results
        out: list[dict[str, Any]] = []
        batches = iter(self.commit_batches)
        for result, count in zip(results, self.entry_batches, strict=True):
            base = result["base_offset"]
            for _ in range(count):
                out.append({**result, "base_offset": base})
                records = next(batches)["records"]
                if base >= 0:
                    base += records
        return out

    def in_append_order(self, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Commit results (file order) rearranged to the order batches were appended."""
        ordered: list[dict[str, Any]] = [{}] * len(results)
        for result, index in zip(results, self.append_index, strict=True):
            ordered[index] = result
        return ordered


def _lay_out(batches: list[BatchToWrite]) -> _Written:
    """The segment file with each partition's batches side by side (one run per
    partition), partitions in the order they first appeared, batches in arrival order."""
    runs: dict[tuple[uuid.UUID, int], list[int]] = {}
    for index, batch in enumerate(batches):
        runs.setdefault((batch.topic_id, batch.partition), []).append(index)
    builder = SegmentBuilder()
    entries: list[dict[str, Any]] = []
    order: list[int] = []
    uncompressed: list[int] = []
    for (topic_id, partition), indexes in runs.items():
        topic = str(topic_id)
        for index in indexes:
            batch = batches[index]
            header = batch.header
            entry = builder.append(
                topic_id=topic_id, partition=partition, batch=batch.data, header=header
            )
            entries.append(
                {
                    "topic_id": topic,
                    "partition": partition,
                    "pos": entry.position,
                    "len": entry.length,
                    "records": header.record_count,
                    "base_ts": header.base_timestamp,
                    "max_ts": header.max_timestamp,
                    "producer_id": header.producer_id,
                    "producer_epoch": header.producer_epoch,
                    "base_sequence": header.base_sequence,
                }
            )
            if header.is_transactional:
                entries[-1]["transactional"] = True
            order.append(index)
            # Billing's logical bytes; here, on the upload thread, off the request path.
            try:
                uncompressed.append(uncompressed_size(batch.data, header))
            except CorruptRecord:  # valid CRC, undecodable payload: count what was sent
                uncompressed.append(len(batch.data))
    merged, counts = _merged_entries(entries)
    return _Written(builder.finish(), entries, order, uncompressed, merged, counts)


def _merged_entries(entries: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[int]]:
    """The commit's entries (docs/AGENT_API.md "commit"): a partition's batches side by
    side without a producer id become one entry of `batch_count` batches — nothing about
    them tells the control plane more than their total, and a 100-batch segment over 50
    partitions is then 50 entries, not 100. An idempotent or transactional batch is an
    entry of its own (its sequence is checked batch by batch)."""

    def plain(entry: dict[str, Any]) -> bool:
        return entry["producer_id"] < 0 and not entry.get("transactional")

    merged: list[dict[str, Any]] = []
    counts: list[int] = []
    for entry in entries:
        last = merged[-1] if merged else None
        if (
            last is not None
            and plain(entry)
            and plain(last)
            and last["topic_id"] == entry["topic_id"]
            and last["partition"] == entry["partition"]
            and last["pos"] + last["len"] == entry["pos"]
        ):
            last["len"] += entry["len"]
            last["records"] += entry["records"]
            last["max_ts"] = max(last["max_ts"], entry["max_ts"])
            last["batch_count"] = last.get("batch_count", 1) + 1
            counts[-1] += 1
        else:
            merged.append(dict(entry))
            counts.append(1)
    return merged, counts


def _as_kafka_answer(result: dict[str, Any]) -> dict[str, Any]:
    """A commit result as a producer is answered: a batch the store found written before
    (DUPLICATE_SEQUENCE_NUMBER: older than the producer's last five batches, migration
    0024) is OUT_OF_ORDER_SEQUENCE_NUMBER, as Kafka's leader answers it."""
    if result.get("error_code") == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
        return {**result, "error_code": ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER}
    return result


def _batch_ident(batch: BatchToWrite) -> tuple[int, int, str, int, int]:
    header = batch.header
    return (
        header.producer_id,
        header.producer_epoch,
        str(batch.topic_id),
        batch.partition,
        header.base_sequence,
    )


def gap_refused_batches(
    data: bytes, entries: list[dict[str, Any]], results: list[dict[str, Any]]
) -> list[BatchToWrite]:
    """The idempotent batches of a journal entry another agent wrote (`data`, committed
    with `entries`) that the commit refused for a sequence gap, to hold and journal
    again (`SegmentWriter.hold_after_gap`)."""
    refused: list[BatchToWrite] = []
    for entry, result in zip(entries, results, strict=False):
        if (
            entry["producer_id"] < 0
            or result.get("error_code") != ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        ):
            continue
        batch = memoryview(data)[entry["pos"] : entry["pos"] + entry["len"]]
        _, _, header = next(iter_batches(batch))
        topic_id = uuid.UUID(entry["topic_id"])
        refused.append(BatchToWrite(topic_id, entry["partition"], batch, header, lightning=True))
    return refused


def commit_entries_of(data: bytes) -> list[dict[str, Any]]:
    """The commit's entries for a segment file read back from the bucket — a journal
    entry another agent wrote (agents/journal_recovery.py): the same entries its writer
    sends (`_lay_out`), from the file's footer and its batches' attributes."""
    entries: list[dict[str, Any]] = []
    for entry in read_index(data):
        batch = memoryview(data)[entry.position : entry.end]
        _, _, header = next(iter_batches(batch))
        item = {
            "topic_id": str(entry.topic_id),
            "partition": entry.partition,
            "pos": entry.position,
            "len": entry.length,
            "records": entry.record_count,
            "base_ts": entry.base_timestamp,
            "max_ts": entry.max_timestamp,
            "producer_id": entry.producer_id,
            "producer_epoch": entry.producer_epoch,
            "base_sequence": entry.base_sequence,
        }
        if header.is_transactional:
            item["transactional"] = True
        entries.append(item)
    return _merged_entries(entries)[0]


class CommitWatch:
    """Wakes long-polling fetches when this agent commits batches of their partitions.

    Each partition has a commit counter, so a fetch that planned before a commit landed
    (and so missed it) sees the counter moved and re-plans at once instead of sleeping.
    """

    def __init__(self) -> None:
        self._waiters: dict[tuple[str, int], set[asyncio.Future[tuple[str, int]]]] = {}
        self._commits: dict[tuple[str, int], int] = {}

    def snapshot(self, partitions: Iterable[tuple[str, int]]) -> tuple[int, ...]:
        """The commit counters of `partitions`, to pass to `wait(since=...)`."""
        return tuple(self._commits.get(key, 0) for key in partitions)

    def notify(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Record a commit to each partition and wake the fetches waiting on it."""
        for key in partitions:
            self._commits[key] = self._commits.get(key, 0) + 1
            for future in self._waiters.pop(key, ()):
                if not future.done():
                    future.set_result(key)

    async def wait(
        self,
        partitions: list[tuple[str, int]],
        timeout_s: float,
        since: tuple[int, ...] | None = None,
    ) -> bool:
        """True when one of `partitions` (topic id string, index) got a commit after the
        `since` snapshot (or, without one, within `timeout_s`); False on timeout."""
        if since is not None and self.snapshot(partitions) != since:
            return True
        future = asyncio.get_running_loop().create_future()
        for key in partitions:
            self._waiters.setdefault(key, set()).add(future)
        try:
            await asyncio.wait_for(future, timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            for key in partitions:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.discard(future)
                    if not waiters:
                        del self._waiters[key]


class SegmentWriter:
    """Owns the open segment; seals, uploads and commits it."""

    def __init__(
        self,
        *,
        put: Callable[[str, bytes], None],
        put_from_loop: Callable[[str, bytes | bytearray], Awaitable[bool]] | None = None,
        client: ControlPlaneClient,
        cluster_id: str,
        agent_id: str,
        max_bytes: int,
        max_age_ms: int,
        executor: Executor | None = None,
        on_written: Callable[[str, bytes], None] | None = None,
        watch: CommitWatch | None = None,
        offsets: PartitionOffsets | None = None,
        max_inflight_bytes: int | None = None,
        put_retry_delays_s: tuple[float, ...] = PUT_RETRY_DELAYS_S,
        commit_retry_delays_s: tuple[float, ...] = COMMIT_RETRY_DELAYS_S,
        commit_timeout_s: float = COMMIT_TIMEOUT_S,
        ripcord: Callable[[], bool] | None = None,
        journal_retry_delays_s: tuple[float, ...] = JOURNAL_RETRY_DELAYS_S,
        ripcord_ack_s: float = RIPCORD_ACK_S,
        gap_retry_s: float = GAP_RETRY_S,
        gap_patience_s: float = GAP_PATIENCE_S,
    ) -> None:
        self.commit_timeout_s = commit_timeout_s
        self._ripcord = ripcord or (lambda: False)
        self.journal_retry_delays_s = journal_retry_delays_s
        self.ripcord_ack_s = ripcord_ack_s
        # Monotonic start of the journal marker's last successful PUT, and the last PUT.
        self._marker_put_at = float("-inf")
        self._marker_put: asyncio.Future[None] | None = None
        # Journal entries in the bucket whose commit has not answered: segment → size.
        self._journaled: dict[_Segment, int] = {}
        # Idempotent batches answered from the journal that the commit then refused:
        # (producer id, topic id, partition) → error code, answered to the producer's
        # next batch there (agents/handlers/produce.py).
        self.refused_after_ack: dict[tuple[int, str, int], int] = {}
        # Batches refused for a sequence gap after their ack, held and journaled again
        # in order until they commit: the held ones, the keys due to go back, and the
        # batches on their way back (by producer, epoch, topic, partition, sequence).
        self._gap_hold = GapHold(patience_s=gap_patience_s)
        self._gaps_scheduled: set[tuple[int, str, int]] = set()
        self._retrying: dict[tuple[int, int, str, int, int], int] = {}  # → bytes
        self._abandoned = False
        self.gap_retry_s = gap_retry_s
        self.gap_patience_s = gap_patience_s
        self.sequences = SequenceWatch()
        _BACKLOG_OF[:] = [self]
        self._attempt_started: float | None = None  # monotonic, while a commit call is out
        self._failing_since: float | None = None  # first failure since the last success
        self._last_failure = float("-inf")
        self.put_retry_delays_s = put_retry_delays_s
        self.commit_retry_delays_s = commit_retry_delays_s
        self._put = put
        self._put_from_loop = put_from_loop
        self._client = client
        self.cluster_id = cluster_id
        self.agent_id = agent_id
        self.max_bytes = max_bytes
        self.max_age_ms = max_age_ms
        self._seal_lead_s = 0.0  # see `_learn_lead`
        self._executor = executor
        self._on_written = on_written
        self.watch = watch or CommitWatch()
        self.offsets = offsets
        self._open: _Segment | None = None
        self._commit_tail: asyncio.Future[None] | None = None
        self._flushes: set[asyncio.Task[None]] = set()
        self._unanswered: set[_Segment] = set()  # sealed, their waiters not answered yet
        self._chain: list[_Segment] = []  # sealed and not yet through their flush, in order
        self._commit_files = True  # the control plane has `commit-files`
        self._sequence = 0
        self._boot = secrets.token_hex(3)
        self.journal = JournalName(agent_id, f"{int(time.time()):010d}-{self._boot}")
        self._inflight_bytes = 0
        self._sealed_pending = 0  # sealed segments whose commit has not finished
        self._max_inflight = max_inflight_bytes or max(64 * 1024 * 1024, 8 * max_bytes)
        self._room = asyncio.Event()
        self._room.set()
        self._uploads = UploadSlots()
        self._closing = False

    @property
    def closed(self) -> bool:
        """Shutting down: `append` takes nothing more."""
        return self._closing

    def commits_stuck(self) -> str | None:
        """Why commits are not going through right now (for /healthz), or None."""
        now = time.monotonic()
        if self._failing_since is not None:
            return f"commits failing for {now - self._failing_since:.0f}s"
        if self._attempt_started is not None and now - self._attempt_started > STUCK_AFTER_S:
            return f"a commit has been waiting {now - self._attempt_started:.0f}s"
        if now - self._last_failure < STUCK_AFTER_S:
            return "the last commit failed"
        return None

    async def wait_for_room(self) -> None:
        """Backpressure: wait while too many sealed bytes are still being uploaded."""
        while not self._room.is_set():
            await self._room.wait()

    def append(
        self, batches: list[BatchToWrite], *, wait: bool, early: bool = False
    ) -> BatchResults | None:
        """Add a request's batches to the open segment (all to the same one).

        With `wait`, returns a future resolving to one commit result dict per batch
        (`error_code`, `base_offset`, `log_start_offset`), in order; without it
        (acks=0), None. `early`: the request may be answered from the journal (base
        offset -1) — its batches are all lightning ones, or Ripcord may take it.
        """
        if self._closing:
            raise RuntimeError("the segment writer is closed")
        incoming = sum(len(b.data) for b in batches)
        segment = self._open
        if segment is not None and (
            segment.size + incoming > self.max_bytes
            or len(segment.batches) + len(batches) > MAX_SEGMENT_BATCHES
        ):
            self._seal("size")
            segment = None
        if segment is None:
            segment = self._open = _Segment()
            age_s = self.max_age_ms / 1000
            segment.due = time.perf_counter() + age_s
            # Sealed early by the time a seal takes to reach its PUT (see `_learn_lead`),
            # so that the PUT starts when the age is up, not that much after it.
            lead = min(self._seal_lead_s, age_s * MAX_SEAL_LEAD)
            segment.timer = asyncio.get_running_loop().call_later(
                age_s - lead, self._seal_if_open, segment
            )
        first = len(segment.batches)
        segment.batches.extend(batches)
        segment.size += incoming
        for batch in batches:
            segment.touched.add((str(batch.topic_id), batch.partition))
            if batch.lightning:
                segment.lightning = True
        future = None
        if wait:
            early = early or all(b.lightning for b in batches)
            if not early and self._ripcord():
                # A transactional batch's commit may be refused (its transaction's
                # state): never answered before it.
                early = not any(b.header.is_transactional for b in batches)
            future = asyncio.get_running_loop().create_future()
            segment.waiters.append((future, first, len(batches), early))
        if segment.size >= self.max_bytes:
            self._seal("size")
        return future

    def _journaling(self) -> bool:
        """Every segment is a journal entry now (Ripcord is on)."""
        return self._ripcord()

    def _commits_lagging(self) -> bool:
        """The control plane is away, the commit out has not answered in time, or a
        journal backlog is being sequenced (a new entry's commit waits behind it)."""
        started = self._attempt_started
        return (
            not self._client.link.up
            or (started is not None and time.monotonic() - started > self.ripcord_ack_s)
            or self._sequencing_behind()
        )

    def _sequencing_behind(self) -> bool:
        """The oldest journal entry whose commit has not answered was journaled more than
        `ripcord_ack_s` ago: commits are working through a backlog (after an outage), and
        an entry journaled now will not be committed within `ripcord_ack_s`."""
        for oldest in self._journaled:  # insertion order: the first journaled first
            journaled_at = oldest.journaled_at
            return journaled_at is not None and time.monotonic() - journaled_at > self.ripcord_ack_s
        return False

    def _seal_if_open(self, segment: _Segment) -> None:
        if self._open is not segment:
            return
        if self._sealed_pending >= MAX_SEALED_PENDING and (
            segment.lightning or (self._journaling() and self._commits_lagging())
        ):
            # A journal entry is answered when it is in the bucket, not when committed:
            # holding it for the commits ahead would put the control plane back in the
            # produce path.
            self._seal("age")
            return
        if self._sealed_pending >= MAX_SEALED_PENDING and self._journaling():
            # Ripcord: group commit while the control plane keeps up; look again soon,
            # for when it stops answering (a frozen connection does not fail a call).
            segment.overdue = True
            loop = asyncio.get_running_loop()
            segment.timer = loop.call_later(0.05, self._seal_if_open, segment)
            return
        if self._sealed_pending >= MAX_SEALED_PENDING:
            # Group commit: commits are serial, so sealing now would only queue another
            # small file behind the ones waiting. Keep collecting; the segment is sealed
            # the moment a commit finishes. Under load segments grow instead of queueing,
            # so latency stays near commit time instead of growing without bound.
            segment.overdue = True
            return
        self._seal("age")

    def _seal(self, reason: str) -> None:
        segment = self._open
        if segment is None:
            return
        self._open = None
        segment.sealed = True
        segment.timed = reason == "age" and not segment.overdue
        segment.journal = segment.lightning or self._journaling()
        if segment.timer is not None:
            segment.timer.cancel()
        _FLUSH_REASON.inc(1, reason)
        self._sealed_pending += 1
        previous = self._commit_tail
        segment.committed = asyncio.get_running_loop().create_future()
        self._commit_tail = segment.committed
        size = segment.size
        self._inflight_bytes += size
        _INFLIGHT.set(self._inflight_bytes)
        if self._inflight_bytes > self._max_inflight:
            self._room.clear()
        self._unanswered.add(segment)
        self._chain.append(segment)
        task = asyncio.get_running_loop().create_task(self._flush(segment, previous, size))
        self._flushes.add(task)
        task.add_done_callback(self._flushes.discard)

    def _object_key(self, journal: bool = False) -> str:
        now = datetime.now(UTC)
        self._sequence += 1
        if journal:  # the sequence is the entry's position in this boot's journal
            return self.journal.entry_key(self.cluster_id, self._sequence)
        # Leading milliseconds make names sort by time; agent id, boot token and sequence
        # make them unique across agents and restarts.
        name = (
            f"{int(now.timestamp() * 1000):013d}-{self.agent_id}-{self._boot}-{self._sequence:06d}"
        )
        return f"{self.cluster_id}/segments/{now:%Y/%m/%d}/{name}.seg"

    async def _write(self, key: str, segment: _Segment) -> _Written:
        """Lay the sealed segment's file out and PUT it: a small one from the loop when
        the store can take it so (S3: `agents/s3_loop_puts.py` — no hop to a thread and
        back on the acknowledgement path), else, or when the store declines it, from a
        put thread."""
        loop = asyncio.get_running_loop()
        # A larger one goes to the thread whole: laying out megabytes on the loop is
        # copies that would hold it, for a PUT the loop would decline.
        if self._put_from_loop is None or segment.size > LOOP_PUT_MAX_BYTES:
            return await loop.run_in_executor(self._executor, self._finish_and_put, key, segment)
        written = self._lay_out(segment)  # ~0.1 ms at this size
        started = time.perf_counter()
        if await self._put_from_loop(key, written.data):
            _PUT_SECONDS.observe(time.perf_counter() - started, "ok")
        else:
            await loop.run_in_executor(self._executor, self._put_with_retries, key, written.data)
        return written

    def _finish_and_put(self, key: str, segment: _Segment) -> _Written:
        # Runs in a worker thread: the sealed segment is no longer touched by the loop.
        written = self._lay_out(segment)
        self._put_with_retries(key, written.data)
        return written

    def _lay_out(self, segment: _Segment) -> _Written:
        with timed(ENCODE_SECONDS):
            written = _lay_out(segment.batches)
        if segment.timed:
            self._learn_lead(time.perf_counter() - segment.due)
        return written

    def _learn_lead(self, late_s: float) -> None:
        """The seal's lead, from how late (or early) a segment sealed by its age timer
        reached its PUT: the timer fires ~1 ms late (asyncio rounds its wait up to the
        millisecond), the upload thread takes the segment and lays the file out (~1 ms
        for 125 batches) — 2-3 ms a segment at a 250 ms flush age, on every segment's
        first request. Moved a fifth of the way each segment (a step of one of the
        upload threads; one racing another loses a step, nothing more), at most
        `MAX_SEAL_LEAD` of the age."""
        limit = self.max_age_ms / 1000 * MAX_SEAL_LEAD
        late_s = min(max(late_s, -limit), limit)
        self._seal_lead_s = min(max(0.0, self._seal_lead_s + 0.2 * late_s), limit)

    def _journal_marker(self) -> asyncio.Future[None]:
        """The PUT of the journal's marker that a journal entry being written now waits
        for before it is answered: the one under way, or a new one when the last is a
        minute old (or failed). It runs beside the entry's own PUT, not before it: a
        recovering agent needs the marker only for entries that were acknowledged, so the
        marker costs an entry no time of its own (before, the first entry of a journal
        and one a minute took two PUTs one after the other)."""
        marker = self._marker_put
        if marker is not None and not (
            marker.done() and (marker.exception() is not None or self._marker_stale())
        ):
            return marker
        started = time.monotonic()
        marker = self._marker_put = asyncio.get_running_loop().run_in_executor(
            self._executor,
            self._put_with_retries,
            self.journal.marker_key(self.cluster_id),
            b"journal\n",
        )

        def done(future: asyncio.Future[None]) -> None:
            if not future.cancelled() and future.exception() is None:
                self._marker_put_at = started

        marker.add_done_callback(done)
        return marker

    def _marker_stale(self) -> bool:
        return time.monotonic() - self._marker_put_at > MARKER_REFRESH_S

    def _put_with_retries(self, key: str, data: bytes) -> None:
        for delay in (*self.put_retry_delays_s, None):
            started = time.perf_counter()
            try:
                self._put(key, data)
                _PUT_SECONDS.observe(time.perf_counter() - started, "ok")
                return
            except Exception as exc:  # any backend failure; retried, then reported
                _PUT_SECONDS.observe(time.perf_counter() - started, "error")
                if delay is None:
                    raise
                log.warning("PUT %s failed (%s); retrying in %.2fs", key, exc, delay)
                time.sleep(delay)
        raise AssertionError("unreachable")

    async def _flush(
        self, segment: _Segment, previous: asyncio.Future[None] | None, size: int
    ) -> None:
        started = time.perf_counter()
        key = segment.key = self._object_key(segment.journal)
        outcome = "ok"
        results: list[dict[str, Any]] | None = None
        error_code = 0
        written: _Written | None = None
        try:
            try:
                async with self._uploads.slot():
                    marker = self._journal_marker() if segment.journal else None
                    written = await self._write(key, segment)
                    if marker is not None:
                        # A recovering agent finds journals by their marker.
                        await asyncio.shield(marker)
            except Exception as exc:
                log.error("segment %s: PUT failed, failing its requests: %s", key, exc)
                error_code, outcome = KAFKA_STORAGE_ERROR, "put_failed"
            if written is not None and self._on_written is not None:
                # In the read path's cache from its PUT on, not its commit: readers learn
                # of the file from the tail feed, which can be answered before this
                # agent's commit call is (commit-files: up to 32 at once) — had every
                # woken Fetch found it missing, each would have read it and built its own
                # answer — and a journal entry written in an outage is read back right
                # after the return. A file whose commit fails is never planned; its
                # chunks just age out.
                self._on_written(key, written.data)
            if segment.journal and written is not None:
                segment.written = written
                self._journaled_now(segment, size)
            if previous is not None:
                with timed(COMMIT_WAIT_SECONDS):
                    await asyncio.shield(previous)  # commits go out in segment order
            if not error_code and written is not None:
                if segment.grouped is not None:  # committed with an earlier segment
                    results, error_code, outcome = segment.grouped
                elif followers := self._ready_to_commit_after(segment):
                    answers = await self._commit_together([segment, *followers])
                    results, error_code, outcome = answers[0]
                    for follower, answer in zip(followers, answers[1:], strict=True):
                        follower.grouped = answer
                else:
                    results, error_code, outcome = await self._commit(
                        key, written, journal=segment.journal
                    )
        except Exception:  # our bug: never leave producers hanging
            log.exception("segment %s: flush failed", key)
            results, error_code, outcome = None, KAFKA_STORAGE_ERROR, "error"
        finally:
            self._journaled.pop(segment, None)
            self._chain.remove(segment)
            self._inflight_bytes -= size
            _INFLIGHT.set(self._inflight_bytes)
            if self._inflight_bytes <= self._max_inflight:
                self._room.set()
            assert segment.committed is not None
            segment.committed.set_result(None)
            self._sealed_pending -= 1
            if self._open is not None and self._open.overdue:
                self._seal("age")
        _SEGMENTS.inc(1, outcome)
        _FLUSH_SECONDS.observe(time.perf_counter() - started, outcome)
        if results is not None and written is not None:
            _FLUSH_BYTES.observe(len(written.data))
            WRITTEN_UNCOMPRESSED_BYTES.inc(
                sum(
                    size
                    for size, result in zip(written.uncompressed, results, strict=True)
                    # A resent duplicate was counted where it was first committed.
                    if not result["error_code"] and not result.get("duplicate")
                )
            )
            self.watch.notify(segment.touched)
            if self.offsets is not None:
                for entry, result in zip(written.commit_batches, results, strict=True):
                    if not result["error_code"]:
                        self.offsets.committed(
                            entry["topic_id"],
                            entry["partition"],
                            end=result["base_offset"] + entry["records"],
                            log_start=result["log_start_offset"],
                        )
            results = written.in_append_order(results)
            if segment.journal:
                self._note_refused_after_ack(segment, results)
            results = [_as_kafka_answer(r) for r in results]
        elif self._retrying:
            self._hold_again(segment)
        self._answer(segment, results, error_code)

    def _hold_again(self, segment: _Segment) -> None:
        """The segment failed before its commit answered (its PUT): batches in it that
        were journaled again after a sequence gap are held again."""
        for batch in segment.batches:
            if self._retrying.pop(_batch_ident(batch), None) is not None:
                key = (batch.header.producer_id, str(batch.topic_id), batch.partition)
                self._gap_hold.hold(key, batch.header, batch)
                self._schedule_again(key)

    def _answer(
        self, segment: _Segment, results: list[dict[str, Any]] | None, error_code: int
    ) -> None:
        self._unanswered.discard(segment)
        for future, first, count, _ in segment.waiters:
            if future.done():  # the client went away
                continue
            if results is not None:
                future.set_result(results[first : first + count])
            else:
                failed = {"error_code": error_code, "base_offset": -1, "log_start_offset": -1}
                future.set_result([failed] * count)

    def _journaled_now(self, segment: _Segment, size: int) -> None:
        """The journal entry is in the bucket: answer what may be answered from it."""
        segment.journaled_at = time.monotonic()
        self._journaled[segment] = size
        lightning = [w for w in segment.waiters if w[3] and self._all_lightning(segment, w)]
        if lightning:
            self._answer_early(segment, lightning, "lightning")
        if any(w[3] for w in segment.waiters if w not in lightning):
            # Ripcord: standard topics' requests wait for the commit a little, no longer.
            # While a backlog is sequenced (after an outage), this entry's commit waits
            # behind it: answered now, as during the outage, not `ripcord_ack_s` later.
            lagging = not self._client.link.up or self._sequencing_behind()
            delay = 0.0 if lagging else self.ripcord_ack_s
            asyncio.get_running_loop().call_later(delay, self._ripcord_due, segment)

    @staticmethod
    def _all_lightning(segment: _Segment, waiter: tuple[BatchResults, int, int, bool]) -> bool:
        _, first, count, _ = waiter
        return all(b.lightning for b in segment.batches[first : first + count])

    def _ripcord_due(self, segment: _Segment) -> None:
        if segment in self._journaled:  # still not committed
            waiters = [w for w in segment.waiters if w[3]]
            self._answer_early(segment, waiters, "ripcord")

    @staticmethod
    def _answer_early(
        segment: _Segment, waiters: list[tuple[BatchResults, int, int, bool]], reason: str
    ) -> None:
        for future, _, count, _ in waiters:
            if not future.done():
                future.set_result([_JOURNALED] * count)
                _EARLY_ACKS.inc(1, reason)

    def _note_refused_after_ack(self, segment: _Segment, results: list[dict[str, Any]]) -> None:
        """Batches answered from the journal (or that may be) that the commit refused.

        A sequence gap means the producer's earlier batch to the partition is
        acknowledged in a journal not sequenced yet (another agent's, or a dead one's
        until it is taken over): the batch is held and journaled again, with every other
        held batch of that producer and partition, in sequence order (`GapHold`), until
        it commits. A request not answered yet whose refusals are all gaps and that may
        be answered from the journal is answered now, as the others were: the refusal is
        this path's to resolve, not the producer's (librdkafka ends an idempotent
        producer on it). Any other refusal (a fenced epoch), or a gap that outlasts the
        patience: the producer was told the batch was written, so its next batch to the
        partition gets the error instead (agents/handlers/produce.py)."""
        gap = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        written_before = ErrorCode.DUPLICATE_SEQUENCE_NUMBER
        early: set[int] = set()
        for waiter in segment.waiters:
            future, first, count, may_early = waiter
            span = range(first, first + count)
            if not future.done() and may_early:
                refused = [results[i].get("error_code", 0) for i in span]
                if gap in refused and all(c in (0, gap, written_before) for c in refused):
                    self._answer_early(segment, [waiter], "gap")
            if future.done():
                early.update(span)
        link = self._client.link
        up_for = link.since_outage_s if link.up else 0.0
        for index, (batch, result) in enumerate(zip(segment.batches, results, strict=True)):
            code = result.get("error_code", 0)
            ident = _batch_ident(batch)
            retried = self._retrying.pop(ident, None) is not None
            header = batch.header
            key = (header.producer_id, str(batch.topic_id), batch.partition)
            if not code or code == written_before:
                # (Written before: a resend older than the producer's last five batches,
                # the copy another agent's journal held too — nothing is missing.)
                if header.producer_id >= 0:
                    self._gap_hold.committed(key)
                    if retried or code:
                        self._gap_hold.settled(key)
                continue
            if index not in early and not retried:
                continue
            log.warning(
                "journal entry %s: batch of producer %s (epoch %s) to %s-%s, sequences"
                " %s+%s, refused at sequencing (error %s)%s",
                segment.key,
                header.producer_id,
                header.producer_epoch,
                batch.topic_id,
                batch.partition,
                header.base_sequence,
                header.record_count,
                code,
                " again" if retried else "",
            )
            lost = [batch]
            if code == gap and header.producer_id >= 0:
                self._gap_hold.hold(key, header, batch)
                if not self._gap_hold.out_of_patience(key, up_for):
                    self._schedule_again(key)
                    continue
                lost = self._gap_hold.give_up(key)
            elif header.producer_id >= 0:
                self._gap_hold.settled(key)
            for gone in lost:
                _SEQUENCE_LOST.inc(1, error_label(code))
                log.error(
                    "journal entry %s: batch of producer %s to %s-%s (sequence %s) refused"
                    " after it was acknowledged (error %s): its records are not written",
                    segment.key,
                    gone.header.producer_id,
                    gone.topic_id,
                    gone.partition,
                    gone.header.base_sequence,
                    code,
                )
            if header.producer_id >= 0:
                self.refused_after_ack[key] = code

    def hold_after_gap(self, batches: list[BatchToWrite]) -> None:
        """Batches of another agent's journal, acknowledged there, that this agent's
        recovery found refused for a sequence gap (agents/journal_recovery.py): held and
        journaled again here like this writer's own."""
        for batch in batches:
            key = (batch.header.producer_id, str(batch.topic_id), batch.partition)
            self._gap_hold.hold(key, batch.header, batch)
            self._schedule_again(key)

    def _schedule_again(self, key: tuple[int, str, int]) -> None:
        if key in self._gaps_scheduled:
            return
        self._gaps_scheduled.add(key)
        asyncio.get_running_loop().call_later(self.gap_retry_s, self._journal_again, key)

    def _journal_again(self, key: tuple[int, str, int]) -> None:
        self._gaps_scheduled.discard(key)
        batches = self._gap_hold.take(key)
        if self._abandoned or not batches:
            return
        log.warning(
            "journal: %d batches of producer %s to %s-%s held after a sequence gap journaled again",
            len(batches),
            *key,
        )
        self._retrying.update((_batch_ident(b), len(b.data)) for b in batches)
        closing, self._closing = self._closing, False  # close() waits for these
        try:
            self.append(batches, wait=False)
        finally:
            self._closing = closing

    @property
    def journal_started(self) -> bool:
        """This writer has PUT its journal's marker (it journals)."""
        return self._marker_put_at > float("-inf")

    def journal_backlog(self) -> tuple[int, float]:
        """Bytes journaled and not yet sequenced, and the oldest such entry's age (s):
        entries whose commit has not answered, and batches held after a sequence gap
        (while one is journaled again and its commit is out, it counts twice)."""
        held, held_at = self._gap_hold.backlog()
        retrying = sum(self._retrying.values())
        if not self._journaled and not held and not retrying:
            return 0, 0.0
        now = time.monotonic()
        oldest = min((s.journaled_at or now for s in self._journaled), default=now)
        if held_at is not None:
            oldest = min(oldest, held_at)
        return sum(self._journaled.values()) + held + retrying, now - oldest

    async def _commit(
        self, key: str, written: _Written, *, journal: bool = False
    ) -> tuple[list[dict[str, Any]] | None, int, str]:
        """The commit answer, one result per batch in file order (the body's order)."""
        body = {"file_key": key, "size": len(written.data), "batches": written.entries}
        try:
            results, code, outcome = await self._commit_attempts(
                key, body, len(written.entries), journal=journal
            )
            if results is not None:
                results = written.per_batch(results)
        finally:
            self._attempt_started = None
        if outcome == "commit_failed":
            self._last_failure = time.monotonic()
        self._failing_since = None
        return results, code, outcome

    def _ready_to_commit_after(self, segment: _Segment) -> list[_Segment]:
        """The journal segments right after `segment` (its turn to commit has come) whose
        PUT is done: committed with it in one `commit-files` call, in order."""
        if not (segment.journal and self._commit_files and segment.written is not None):
            return []
        place = self._chain.index(segment)
        followers: list[_Segment] = []
        entries = len(segment.written.entries)
        for follower in self._chain[place + 1 : place + MAX_COMMIT_FILES]:
            written = follower.written
            if not follower.journal or written is None or follower.grouped is not None:
                break
            entries += len(written.entries)
            if entries > MAX_COMMIT_FILES_ENTRIES:
                break
            followers.append(follower)
        return followers

    async def _commit_together(
        self, segments: list[_Segment]
    ) -> list[tuple[list[dict[str, Any]] | None, int, str]]:
        """Journal entries committed in one `commit-files` call (docs/AGENT_API.md), in
        order, retried until it answers: each one's (results per batch in file order,
        error code, outcome), as `_commit` gives one's. A control plane without the call
        (or refusing it) gets them one by one instead."""
        written = [s.written for s in segments]
        assert all(w is not None for w in written)
        files = [w for w in written if w is not None]
        body = {
            "files": [
                {"file_key": s.key, "size": len(w.data), "batches": w.entries}
                for s, w in zip(segments, files, strict=True)
            ]
        }

        def answers_of(answer: Any) -> list[tuple[list[dict[str, Any]] | None, int, str]]:
            answered = answer["files"]
            if len(answered) != len(files):
                raise ValueError(f"commit-files answered {len(answered)} files for {len(files)}")
            out: list[tuple[list[dict[str, Any]] | None, int, str]] = []
            for segment, w, one in zip(segments, files, answered, strict=True):
                if "batches" in one:
                    if len(one["batches"]) != len(w.entries):
                        raise ValueError(f"commit answered {len(one['batches'])} batches")
                    out.append((w.per_batch(one["batches"]), 0, "ok"))
                elif int(one.get("status", 500)) >= 500:
                    raise ControlPlaneUnavailable(
                        f"commit-files: {segment.key}: {one.get('error')}", outcome_unknown=False
                    )
                else:
                    log.error(
                        "segment %s: commit rejected, failing its requests: %s",
                        segment.key,
                        one.get("error"),
                    )
                    out.append((None, KAFKA_STORAGE_ERROR, "commit_rejected"))
            return out

        try:
            answers = await self._call_until_answered(
                "commit-files", segments[0].key, body, answers_of, journal=True
            )
        except ControlPlaneRejected as exc:
            if "HTTP 404" in str(exc):
                self._commit_files = False
            log.warning("commit-files refused (%s): committing one by one", exc)
            answers = None
        finally:
            self._attempt_started = None
        if answers is None:
            return [
                await self._commit(s.key, w, journal=True)
                for s, w in zip(segments, files, strict=True)
            ]
        if isinstance(answers, tuple):  # an answer that does not fit: every file fails
            answers = [answers] * len(segments)
        self._failing_since = None
        if any(outcome == "commit_failed" for _, _, outcome in answers):
            self._last_failure = time.monotonic()
        _COMMITTED_TOGETHER.inc(len(segments))
        return answers

    def _retry_delays(self, journal: bool) -> Iterable[float | None]:
        if not journal:
            yield from (*self.commit_retry_delays_s, None)
            return
        # A journal entry was (or may be) acknowledged: its commit never gives up.
        yield from self.journal_retry_delays_s
        while True:
            yield self.journal_retry_delays_s[-1]

    async def _commit_attempts(
        self, key: str, body: dict[str, Any], count: int, *, journal: bool = False
    ) -> tuple[list[dict[str, Any]] | None, int, str]:
        def results_of(answer: Any) -> tuple[list[dict[str, Any]] | None, int, str]:
            results = answer["batches"]
            if len(results) != count:
                raise ValueError(f"commit answered {len(results)} batches for {count}")
            return results, 0, "ok"

        try:
            return await self._call_until_answered("commit", key, body, results_of, journal=journal)
        except ControlPlaneRejected as exc:
            log.error("segment %s: commit rejected, failing its requests: %s", key, exc)
            return None, KAFKA_STORAGE_ERROR, "commit_rejected"

    async def _call_until_answered(
        self,
        name: str,
        key: str,
        body: dict[str, Any],
        parse: Callable[[dict[str, Any]], _Parsed],
        *,
        journal: bool = False,
    ) -> _Parsed | _GivenUp:
        """`parse` of the call's answer, the call retried while the control plane is
        unavailable (a journal entry's: until it answers); ControlPlaneRejected raised
        as is; a failure given up as (None, error code, outcome) — per file for
        `commit-files`."""
        unknown = False  # did any attempt end without an answer (it may have landed)?
        for delay in self._retry_delays(journal):
            started = time.perf_counter()
            self._attempt_started = time.monotonic()
            try:
                answer = await self._client.call(name, body, timeout_s=self.commit_timeout_s)
                parsed = parse(answer)
                _COMMIT_SECONDS.observe(time.perf_counter() - started, "ok")
                return parsed
            except ControlPlaneUnavailable as exc:
                _COMMIT_SECONDS.observe(time.perf_counter() - started, "unavailable")
                self._attempt_started = None
                if self._failing_since is None:
                    self._failing_since = time.monotonic()
                unknown = unknown or exc.outcome_unknown
                if delay is None:
                    log.error("segment %s: commit failed, failing its requests: %s", key, exc)
                    # An attempt without an answer may have landed: "possibly persisted"
                    # (even if the last attempt was a clean 5xx); else not persisted.
                    code = REQUEST_TIMED_OUT if unknown else KAFKA_STORAGE_ERROR
                    return None, code, "commit_failed"
                log.warning("segment %s: %s failed (%s); retrying in %.1fs", key, name, exc, delay)
                if journal and not self._client.link.up:
                    # The link's probe finds the control plane back within a quarter of a
                    # second: retry then rather than at the end of the back-off.
                    await self._client.link.wait_up(delay)
                else:
                    await asyncio.sleep(delay)
            except ControlPlaneRejected:
                _COMMIT_SECONDS.observe(time.perf_counter() - started, "rejected")
                raise
            except (ControlPlaneError, ValueError, KeyError, TypeError) as exc:
                _COMMIT_SECONDS.observe(time.perf_counter() - started, "rejected")
                log.error(
                    "segment %s: %s answer unusable, failing its requests: %s", key, name, exc
                )
                return None, KAFKA_STORAGE_ERROR, "commit_rejected"
        raise AssertionError("unreachable")

    def flush_now(self) -> None:
        """Seal the open segment now (e.g. at shutdown)."""
        self._seal("shutdown")

    async def close(self) -> None:
        """Seal the open segment and wait until every sealed segment is answered (and
        every batch journaled again after a sequence gap is committed or given up)."""
        self.flush_now()
        self._closing = True
        while self._flushes or self._gaps_scheduled:
            if self._flushes:
                await asyncio.wait(list(self._flushes))
            else:
                await asyncio.sleep(self.gap_retry_s)
            self.flush_now()

    def abandon(self) -> None:
        """Give up on what is not committed yet (shutdown ran out of time): its requests
        fail with REQUEST_TIMED_OUT, "possibly persisted", which producers retry."""
        self._closing = self._abandoned = True
        for task in list(self._flushes):
            task.cancel()
        for segment in list(self._unanswered):
            self._answer(segment, None, REQUEST_TIMED_OUT)
        # The open segment is never sealed: sealed later, its commit would go out after
        # its predecessors' were cancelled, and a journal's recovery takes every entry
        # before a committed one for committed.
        opened, self._open = self._open, None
        if opened is not None:
            if opened.timer is not None:
                opened.timer.cancel()
            self._answer(opened, None, REQUEST_TIMED_OUT)


def file_stats() -> tuple[int, int, dict[str, int]]:
    """Segment files committed since the agent started, their bytes, and why segments
    were sealed (``age``, ``size``…: the flush reasons) — the Diagnostics page's
    small-files numbers (`agents.client_stats`)."""
    reasons = {labels[0]: int(value) for labels, value in _FLUSH_REASON.items()}
    return _FLUSH_BYTES.total_count(), int(_FLUSH_BYTES.total_sum()), reasons
