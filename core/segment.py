"""The segment file: record batches from many partitions, an index footer, a fixed trailer.

    [batch][batch]...[batch] | footer: one 74-byte entry per batch | trailer: 22 bytes

Batches are stored exactly as producers sent them (ingestion files) or with their
baseOffset already set to the assigned offset (compacted files). The footer and trailer
let anyone read and check a file with no metadata at hand. Big-endian throughout.

Footer entry: topic_id 16 raw UUID bytes, partition int32, position int64 (of the batch
in the file), length int32, record_count int32, base_timestamp int64, max_timestamp
int64, producer_id int64, producer_epoch int16, base_sequence int32, base_offset int64
(-1 in ingestion files).

Trailer: footer_length uint32, entry_count uint32, footer CRC-32C uint32, format
version uint16 (1), magic b"FLOESEG1".
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

from crc32c import crc32c

from core.kafka.records import (
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    CorruptRecord,
    batch_crc_ok,
    iter_batches,
)
from core.storage import ObjectStore

FORMAT_VERSION = 1
SEGMENT_MAGIC = b"FLOESEG1"

_ENTRY = struct.Struct(">16siqiiqqqhiq")
_TRAILER = struct.Struct(">IIIH8s")
ENTRY_SIZE = _ENTRY.size  # 74
TRAILER_SIZE = _TRAILER.size  # 22

# read_index_from_store reads this much more than the trailer in its first request, so
# the footer of a typical segment (a few hundred batches) arrives in the same round trip.
DEFAULT_TAIL_PREFETCH = 64 * 1024


class SegmentCorrupt(Exception):
    """The file is not a readable segment: bad magic, version, footer CRC, or index."""


@dataclass(frozen=True, slots=True)
class SegmentEntry:
    """Where one batch lives in a segment, and what the metadata store needs to know of it."""

    topic_id: uuid.UUID
    partition: int
    position: int
    length: int
    record_count: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    base_offset: int = -1

    @property
    def end(self) -> int:
        return self.position + self.length


class SegmentBuilder:
    """Collects batches for one segment file; `finish()` returns the file's bytes.

    `append` keeps a reference to the batch (no copy) and packs its footer entry, so it
    costs the same whatever the segment's size. The batch must not change until
    `finish()` has returned.
    """

    def __init__(self) -> None:
        self._batches: list[bytes | bytearray | memoryview] = []
        self._footer: list[bytes] = []
        self._entries: list[SegmentEntry] = []
        self._size = 0

    def append(
        self,
        *,
        topic_id: uuid.UUID,
        partition: int,
        batch: bytes | bytearray | memoryview,
        header: BatchHeader,
        base_offset: int = -1,
    ) -> SegmentEntry:
        """Add one batch (whole, as validated); return its footer entry."""
        length = memoryview(batch).nbytes
        if length != header.size:
            raise ValueError(f"batch is {length} bytes but its header declares {header.size}")
        entry = SegmentEntry(
            topic_id=topic_id,
            partition=partition,
            position=self._size,
            length=length,
            record_count=header.record_count,
            base_timestamp=header.base_timestamp,
            max_timestamp=header.max_timestamp,
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            base_offset=base_offset,
        )
        try:
            packed = _pack_entry(entry)
        except (struct.error, AttributeError) as exc:
            raise ValueError(f"cannot index batch for partition {partition}: {exc}") from exc
        self._batches.append(batch)
        self._footer.append(packed)
        self._entries.append(entry)
        self._size += length
        return entry

    @property
    def size(self) -> int:
        """Bytes of batches so far (the file will add the footer and trailer)."""
        return self._size

    @property
    def entries(self) -> list[SegmentEntry]:
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def finish(self) -> bytes:
        """The whole file: batches, footer, trailer."""
        footer = b"".join(self._footer)
        trailer = _TRAILER.pack(
            len(footer), len(self._footer), crc32c(footer), FORMAT_VERSION, SEGMENT_MAGIC
        )
        return b"".join([*self._batches, footer, trailer])


def _pack_entry(entry: SegmentEntry) -> bytes:
    return _ENTRY.pack(
        entry.topic_id.bytes,
        entry.partition,
        entry.position,
        entry.length,
        entry.record_count,
        entry.base_timestamp,
        entry.max_timestamp,
        entry.producer_id,
        entry.producer_epoch,
        entry.base_sequence,
        entry.base_offset,
    )


def read_index(data: bytes | memoryview) -> list[SegmentEntry]:
    """The index of a whole segment file held in memory; SegmentCorrupt if it does not check out."""
    view = memoryview(data)
    file_size = view.nbytes
    if file_size < TRAILER_SIZE:
        raise SegmentCorrupt(f"file of {file_size} bytes is shorter than a segment trailer")
    footer_length, count, crc = _read_trailer(view[file_size - TRAILER_SIZE :], file_size)
    body_size = file_size - TRAILER_SIZE - footer_length
    return _read_footer(view[body_size : file_size - TRAILER_SIZE], count, crc, body_size)


def read_index_from_store(
    store: ObjectStore, key: str, *, prefetch: int = DEFAULT_TAIL_PREFETCH
) -> list[SegmentEntry]:
    """The index of a segment in object storage, without reading its batches.

    One suffix read fetches the trailer, the object's size and, usually, the footer;
    a second range read fetches a footer larger than `prefetch`.
    """
    tail, file_size = store.get_tail(key, TRAILER_SIZE + prefetch)
    if file_size < TRAILER_SIZE or len(tail) < TRAILER_SIZE:
        raise SegmentCorrupt(f"{key}: {file_size} bytes is shorter than a segment trailer")
    try:
        footer_length, count, crc = _read_trailer(memoryview(tail)[-TRAILER_SIZE:], file_size)
    except SegmentCorrupt as exc:
        raise SegmentCorrupt(f"{key}: {exc}") from None
    body_size = file_size - TRAILER_SIZE - footer_length
    needed = footer_length + TRAILER_SIZE
    if needed <= len(tail):
        footer = memoryview(tail)[len(tail) - needed : len(tail) - TRAILER_SIZE]
    else:
        footer = memoryview(store.get_range(key, body_size, footer_length))
        if footer.nbytes != footer_length:
            raise SegmentCorrupt(f"{key}: footer read returned {footer.nbytes} bytes")
    try:
        return _read_footer(footer, count, crc, body_size)
    except SegmentCorrupt as exc:
        raise SegmentCorrupt(f"{key}: {exc}") from None


def _read_trailer(trailer: memoryview, file_size: int) -> tuple[int, int, int]:
    footer_length, count, crc, version, magic = _TRAILER.unpack(trailer)
    if magic != SEGMENT_MAGIC:
        raise SegmentCorrupt(f"not a segment file: trailer magic is {magic!r}")
    if version != FORMAT_VERSION:
        raise SegmentCorrupt(f"unsupported segment format version {version}")
    if footer_length != count * ENTRY_SIZE:
        raise SegmentCorrupt(
            f"footer of {footer_length} bytes cannot hold {count} entries of {ENTRY_SIZE} bytes"
        )
    if footer_length + TRAILER_SIZE > file_size:
        raise SegmentCorrupt(
            f"footer of {footer_length} bytes does not fit a {file_size}-byte file"
        )
    return footer_length, count, crc


def _read_footer(footer: memoryview, count: int, crc: int, body_size: int) -> list[SegmentEntry]:
    computed = crc32c(footer)
    if computed != crc:
        raise SegmentCorrupt(f"footer CRC mismatch (stored {crc}, computed {computed})")
    entries: list[SegmentEntry] = []
    expected_position = 0
    for fields in _ENTRY.iter_unpack(footer):
        entry = SegmentEntry(uuid.UUID(bytes=fields[0]), *fields[1:])
        # Batches are concatenated in footer order with nothing in between.
        if entry.position != expected_position or entry.length < RECORD_BATCH_OVERHEAD:
            raise SegmentCorrupt(
                f"entry {len(entries)} places a {entry.length}-byte batch at {entry.position}, "
                f"expected one of at least {RECORD_BATCH_OVERHEAD} bytes at {expected_position}"
            )
        expected_position = entry.end
        entries.append(entry)
    if expected_position != body_size:
        raise SegmentCorrupt(
            f"index covers {expected_position} bytes of batches but the file holds {body_size}"
        )
    return entries


def verify_segment(data: bytes | memoryview) -> list[SegmentEntry]:
    """Read the index, then check every batch: its framing, its CRC-32C and its index entry."""
    view = memoryview(data)
    entries = read_index(view)
    for number, entry in enumerate(entries):
        batch = view[entry.position : entry.end]
        try:
            batches = list(iter_batches(batch))
        except CorruptRecord as exc:
            raise SegmentCorrupt(f"batch {number} at {entry.position}: {exc.reason}") from None
        if len(batches) != 1:
            raise SegmentCorrupt(
                f"batch {number} at {entry.position}: holds {len(batches)} batches"
            )
        _, _, header = batches[0]
        if not batch_crc_ok(batch, header):
            raise SegmentCorrupt(f"batch {number} at {entry.position}: CRC-32C mismatch")
        mismatched = _mismatched_fields(entry, header)
        if mismatched:
            raise SegmentCorrupt(
                f"batch {number} at {entry.position}: index disagrees with the batch on "
                + ", ".join(mismatched)
            )
    return entries


def _mismatched_fields(entry: SegmentEntry, header: BatchHeader) -> list[str]:
    pairs = {
        "record_count": header.record_count,
        "base_timestamp": header.base_timestamp,
        "max_timestamp": header.max_timestamp,
        "producer_id": header.producer_id,
        "producer_epoch": header.producer_epoch,
        "base_sequence": header.base_sequence,
    }
    if entry.base_offset != -1:  # compacted files: the batch carries its assigned offset
        pairs["base_offset"] = header.base_offset
    return [name for name, value in pairs.items() if getattr(entry, name) != value]


@dataclass(frozen=True, slots=True)
class RunBatch:
    """One batch of a partition run, with the offsets the metadata store gave it."""

    position: int  # within the run's bytes
    length: int
    base_offset: int
    header: BatchHeader

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.header.last_offset_delta


def run_batches(
    data: bytes | bytearray | memoryview, *, base_offset: int, last_offset: int, rewrite: bool
) -> Iterator[RunBatch]:
    """Walk the batches of one partition run (an index row: consecutive batches of one
    partition in one file) and give each its assigned base offset.

    With `rewrite` (level-0 files, batches as producers sent them) offsets are dense from
    the run's `base_offset`, each batch taking lastOffsetDelta + 1 of them; otherwise the
    batches already carry theirs (compacted files; key compaction leaves gaps). Raises
    `SegmentCorrupt` when the bytes disagree with the index: a partial batch, offsets
    outside the run, or — walked to the end — a dense run not ending at `last_offset`.
    """
    cursor = base_offset
    try:
        for position, length, header in iter_batches(data):
            base = cursor if rewrite else header.base_offset
            batch = RunBatch(position, length, base, header)
            if base < cursor or batch.last_offset > last_offset:
                raise SegmentCorrupt(
                    f"batch at {position} has offsets {base}..{batch.last_offset}, outside "
                    f"the run's {cursor}..{last_offset}"
                )
            yield batch
            cursor = batch.last_offset + 1
    except CorruptRecord as exc:
        raise SegmentCorrupt(f"run at offset {base_offset}: {exc.reason}") from None
    if rewrite and cursor != last_offset + 1:
        raise SegmentCorrupt(
            f"run {base_offset}..{last_offset} holds batches for {base_offset}..{cursor - 1}"
        )
