"""Segment files written and read the way agents do, without an agent.

`SegmentWriter.commit` builds a segment with the real `SegmentBuilder`, PUTs it and
commits it through `metadata.file_commit`; `read_partition` walks `metadata.fetch_plan`
from the log start, reads the byte ranges from the bucket, sets each batch's baseOffset
from the index (as the agent's read path does) and decodes the records.
"""

from __future__ import annotations

import itertools
import time
import uuid

from core.kafka.records import (
    COMPRESSION_NONE,
    Record,
    RecordInput,
    decode_records,
    encode_batch,
    iter_batches,
    patch_base_offset,
)
from core.segment import SegmentBuilder, run_batches
from core.storage import open_store
from metadata_store import store as metadata
from metadata_store.agent_api.schemas import commit_batches
from metadata_store.models import Partition, Topic
from metadata_store.topics import topic_create

_names = itertools.count()


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def batch(
    records: list[tuple[bytes | None, bytes | None]],
    *,
    compression: int = COMPRESSION_NONE,
    timestamp: int | None = None,
) -> bytes:
    """A producer's batch (baseOffset 0) of (key, value) records."""
    ts = now_ms() if timestamp is None else timestamp
    return encode_batch(
        [RecordInput(key=k, value=v, timestamp=ts) for k, v in records], compression=compression
    )


class SegmentWriter:
    def __init__(self, cluster, bucket_url: str) -> None:
        self.cluster = cluster
        self.store = open_store(bucket_url)

    def topic(self, name: str, partitions: int = 1, **configs: str) -> Topic:
        """A topic; configs are given with underscores (retention_ms="1000")."""
        return topic_create(
            cluster=self.cluster,
            name=name,
            num_partitions=partitions,
            configs={k.replace("_", "."): v for k, v in configs.items()},
        )

    def commit(self, batches: list[tuple[Topic, int, bytes]]) -> list[int]:
        """One segment file holding these (topic, partition, batch); their base offsets."""
        builder = SegmentBuilder()
        entries = []
        for topic, partition, data in batches:
            header = next(iter_batches(data))[2]
            entries.append(
                (
                    topic,
                    builder.append(
                        topic_id=topic.id, partition=partition, batch=data, header=header
                    ),
                    header.is_transactional,
                )
            )
        data = builder.finish()
        key = f"{self.cluster.public_id}/segments/t/{next(_names):06d}-{uuid.uuid4().hex[:8]}.seg"
        self.store.put(key, data)
        answer = metadata.file_commit(
            cluster_id=self.cluster.id,
            file_key=key,
            size=len(data),
            batches=commit_batches(
                [
                    {
                        "topic_id": str(topic.id),
                        "partition": e.partition,
                        "pos": e.position,
                        "len": e.length,
                        "records": e.record_count,
                        "max_ts": e.max_timestamp,
                        "producer_id": e.producer_id,
                        "producer_epoch": e.producer_epoch,
                        "base_sequence": e.base_sequence,
                        "transactional": transactional,
                    }
                    for topic, e, transactional in entries
                ]
            ),
        )
        assert all(b["error_code"] == 0 for b in answer), answer
        return [b["base_offset"] for b in answer]


def read_partition(writer: SegmentWriter, topic: Topic, partition: int = 0) -> list[Record]:
    """Every record of the partition from its log start to its high watermark."""
    records: list[Record] = []
    offset = Partition.objects.get(topic=topic, index=partition).log_start_offset
    while True:
        (answer,) = metadata.fetch_plan(
            cluster_id=writer.cluster.id,
            partitions=[{"topic_id": str(topic.id), "partition": partition, "offset": offset}],
            max_bytes=64 * 1024 * 1024,
        )
        assert answer["error_code"] == 0, answer
        if not answer["batches"]:
            assert offset == answer["high_watermark"], (offset, answer)
            return records
        for pointer in answer["batches"]:
            if "marker" in pointer:  # a transaction marker: no record data
                offset = pointer["last_offset"] + 1
                continue
            data = writer.store.get_range(pointer["file_key"], pointer["pos"], pointer["len"])
            for stored in run_batches(
                data,
                base_offset=pointer["base_offset"],
                last_offset=pointer["last_offset"],
                rewrite=pointer["rewrite"],
            ):
                batch = bytearray(data[stored.position : stored.position + stored.length])
                patch_base_offset(batch, 0, stored.base_offset)
                header, decoded = decode_records(batch)
                assert header.base_offset == stored.base_offset
                records.extend(r for r in decoded if r.offset >= offset)
            offset = pointer["last_offset"] + 1


def values(records: list[Record]) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for r in records]
