"""Reads for operators' tools (`floe diagnose-record`, `floe file-scrubber`): which run of
which file holds an offset, and which objects of the bucket the store knows."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db.models import QuerySet

from metadata_store.models import Batch, Partition, SegmentFile
from virtualclusters.jobs.selectors import protected_output_roots
from virtualclusters.models import VirtualCluster


class OffsetNotStored(Exception):
    """No committed run holds the offset (below the log start, at or past the high
    watermark, or a transaction marker's offset)."""


@dataclass(frozen=True)
class RecordLocation:
    partition: Partition
    run: Batch
    file: SegmentFile


def record_locate(
    cluster: VirtualCluster, *, topic: str, partition: int, offset: int
) -> RecordLocation:
    """The committed run (index row) of the cluster's `topic`/`partition` whose offsets
    cover `offset`, with its file. Partition.DoesNotExist for an unknown topic or
    partition; OffsetNotStored when no run covers the offset."""
    part = Partition.objects.select_related("topic").get(
        topic__cluster=cluster, topic__name=topic, index=partition
    )
    if not part.log_start_offset <= offset < part.high_watermark:
        raise OffsetNotStored(
            f"offset {offset} is out of range: {topic}[{partition}] holds offsets "
            f"{part.log_start_offset}..{part.high_watermark - 1}"
            if part.high_watermark > part.log_start_offset
            else f"offset {offset} is out of range: {topic}[{partition}] is empty "
            f"(log start {part.log_start_offset})"
        )
    # (partition, last_offset) is the primary key: the first run ending at or after the
    # offset is the only one that can hold it.
    run = (
        Batch.objects.filter(partition=part, last_offset__gte=offset)
        .order_by("last_offset")
        .first()
    )
    if run is None or run.base_offset > offset:
        raise OffsetNotStored(
            f"offset {offset} of {topic}[{partition}] is in no file (a transaction marker, "
            "or removed by retention or compaction)"
        )
    file = SegmentFile.objects.get(pk=run.file_id)
    return RecordLocation(part, run, file)


def known_files_page(cluster: VirtualCluster, *, after: str, limit: int) -> QuerySet[SegmentFile]:
    """The cluster's files the store knows (live, or replaced and awaiting deletion), by
    key after `after`: keyset pages over the (cluster, key) unique index, so a listing
    of 100k files costs the same per page at its end as at its start."""
    return (
        SegmentFile.objects.filter(cluster=cluster, key__gt=after)
        .exclude(state=SegmentFile.State.DELETED)
        .order_by("key")
        .only("key", "state", "size", "level", "created_at")[:limit]
    )


def unknown_objects_spared(cluster: VirtualCluster) -> list[str]:
    """Prefixes whose objects are no orphans although no file row names them: the
    agents' journals and outputs of jobs in progress (the orphan cleaner's own rule)."""
    return protected_output_roots(cluster)


def orphan_grace_s() -> int:
    """How long the orphan cleaner leaves an unknown object alone."""
    return int(settings.FLOE_FILE_DELETE_GRACE_S)
