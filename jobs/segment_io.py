"""Executor-side I/O: batches read out of segment files, segment files written back.

Reads are coalesced: the batches a task needs from one file are fetched in as few range
requests as possible. On an object store, neighbours less than `REMOTE_MAX_GAP` apart
share a request (another request costs more time and money than reading through the
gap); on local files, where a seek is free, only adjacent batches do.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from core.kafka.records import BatchHeader, batch_crc_ok, iter_batches, patch_base_offset
from core.segment import SegmentBuilder, SegmentCorrupt, run_batches
from core.storage import FileStore, ObjectStore, open_store

REMOTE_MAX_GAP = 1024 * 1024
MAX_SPAN = 64 * 1024 * 1024  # but never fetch more than this in one request

_stores: dict[str, ObjectStore] = {}


def store_for(url: str) -> ObjectStore:
    """The bucket at `url`, opened once per worker process."""
    store = _stores.get(url)
    if store is None:
        if url.lower().startswith("mem://"):
            raise ValueError(
                "Spark executors are separate processes and cannot share a mem:// store; "
                "use file:// or s3://"
            )
        store = _stores[url] = open_store(url)
    return store


class BatchRef(NamedTuple):
    """Where one index row (a partition run) lives: the index's pointer."""

    file_key: str
    position: int
    length: int


def read_batches(store: ObjectStore, refs: Iterable[BatchRef]) -> dict[BatchRef, memoryview]:
    """The bytes of every batch named (views into the spans read), fetched with
    coalesced range reads."""
    by_file: dict[str, list[BatchRef]] = defaultdict(list)
    for ref in refs:
        by_file[ref.file_key].append(ref)
    max_gap = 0 if isinstance(store, FileStore) else REMOTE_MAX_GAP
    found: dict[BatchRef, memoryview] = {}
    for key, wanted in by_file.items():
        ordered = sorted(set(wanted), key=lambda r: r.position)
        for span_start, span_end, members in _spans(ordered, max_gap=max_gap):
            data = memoryview(store.get_range(key, span_start, span_end - span_start))
            if len(data) != span_end - span_start:
                raise SegmentCorrupt(
                    f"{key}: wanted bytes {span_start}..{span_end}, the object ends at "
                    f"{span_start + len(data)}"
                )
            for ref in members:
                offset = ref.position - span_start
                found[ref] = data[offset : offset + ref.length]
    return found


def _spans(refs: list[BatchRef], *, max_gap: int) -> Iterator[tuple[int, int, list[BatchRef]]]:
    start = end = -1
    members: list[BatchRef] = []
    for ref in refs:
        ref_end = ref.position + ref.length
        if members and ref.position - end <= max_gap and max(end, ref_end) - start <= MAX_SPAN:
            end = max(end, ref_end)
            members.append(ref)
            continue
        if members:
            yield start, end, members
        start, end, members = ref.position, ref_end, [ref]
    if members:
        yield start, end, members


class StoredBatch(NamedTuple):
    """One batch of a run, copied out with its baseOffset set to the one it was given."""

    data: bytearray
    header: BatchHeader  # as read back after the offset was set
    base_offset: int


def run_at_offsets(
    data: bytes | memoryview, *, base_offset: int, last_offset: int, rewrite: bool, where: str
) -> list[StoredBatch]:
    """The batches of one index row (a partition run), each copied and checked whole.

    The index and the bytes must agree: every batch's CRC-32C intact and the offsets the
    index gave the run spanning exactly its batches (``core.segment.run_batches``). With
    `rewrite` (level-0 files) each batch's baseOffset is set to its assigned offset.
    """
    out = []
    try:
        for batch in run_batches(
            data, base_offset=base_offset, last_offset=last_offset, rewrite=rewrite
        ):
            copy = bytearray(data[batch.position : batch.position + batch.length])
            if not batch_crc_ok(copy, batch.header):
                raise SegmentCorrupt(f"batch at {batch.position}: CRC-32C mismatch")
            patch_base_offset(copy, 0, batch.base_offset)
            out.append(StoredBatch(copy, header_of(copy), batch.base_offset))
    except SegmentCorrupt as exc:
        raise SegmentCorrupt(f"{where}: {exc}") from None
    return out


def header_of(batch: bytes | bytearray) -> BatchHeader:
    return next(iter_batches(batch))[2]


class OutputFile:
    """One segment file being built by a task; `put()` writes it and says where batches went."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.builder = SegmentBuilder()

    def append(self, *, topic_id: str, partition: int, batch: bytes | bytearray, base_offset: int):
        """Add a batch whose baseOffset is already set; returns its footer entry."""
        return self.builder.append(
            topic_id=uuid.UUID(topic_id),
            partition=partition,
            batch=batch,
            header=header_of(batch),
            base_offset=base_offset,
        )

    def put(self, store: ObjectStore) -> int:
        """Write the file; its size in bytes."""
        data = self.builder.finish()
        store.put(self.key, data)
        return len(data)
