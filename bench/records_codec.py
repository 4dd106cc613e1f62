"""How fast the record-batch codec and the segment builder are, on this machine.

    .venv/bin/python -m bench.records_codec

Prints the produce hot path (validate_batches + SegmentBuilder.append for an 8 MiB
segment) and decode/encode rates per codec.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from core.kafka.records import (
    COMPRESSION_NAMES,
    RecordInput,
    decode_records,
    encode_batch,
    validate_batches,
)
from core.segment import SegmentBuilder, read_index

SEGMENT_BYTES = 8 * 1024 * 1024


def timed(label: str, work: Callable[[], object], *, repeat: int, unit_bytes: int) -> None:
    work()  # warm up
    start = time.perf_counter()
    for _ in range(repeat):
        work()
    elapsed = (time.perf_counter() - start) / repeat
    rate = unit_bytes / elapsed / 1e6
    print(f"{label:<52} {elapsed * 1e3:9.3f} ms  {rate:9.1f} MB/s")


def sample_records(count: int, value_size: int) -> list[RecordInput]:
    return [
        RecordInput(
            timestamp=1_700_000_000_000 + n,
            key=f"user-{n % 97}".encode(),
            value=(f'{{"n": {n}, "pad": "' + "x" * value_size + '"}').encode(),
            headers=[("trace", b"0123456789abcdef")],
        )
        for n in range(count)
    ]


def main() -> None:
    batch = encode_batch(sample_records(100, 150))  # ~20 KiB, a typical linger batch
    per_segment = SEGMENT_BYTES // len(batch)
    request = batch * 50  # a produce request carrying 50 partitions' batches
    topic_id = uuid.uuid4()

    def produce_path() -> bytes:
        builder = SegmentBuilder()
        view = memoryview(request)
        for _ in range(per_segment // 50):
            for pos, total, header in validate_batches(view, max_batch_bytes=1 << 20):
                builder.append(
                    topic_id=topic_id, partition=0, batch=view[pos : pos + total], header=header
                )
        return builder.finish()

    print(f"batch of 100 records: {len(batch)} bytes; {per_segment} batches per 8 MiB segment")
    timed(
        "validate + append + finish, one 8 MiB segment",
        produce_path,
        repeat=5,
        unit_bytes=SEGMENT_BYTES,
    )
    segment = produce_path()
    timed(
        "read_index of that segment",
        lambda: read_index(segment),
        repeat=20,
        unit_bytes=len(segment),
    )

    records = sample_records(1000, 150)
    for codec, name in COMPRESSION_NAMES.items():
        encoded = encode_batch(records, compression=codec)
        raw_size = len(encode_batch(records))
        timed(
            f"encode 1000 records, {name} ({len(encoded)} bytes)",
            lambda codec=codec: encode_batch(records, compression=codec),
            repeat=10,
            unit_bytes=raw_size,
        )
        timed(
            f"decode 1000 records, {name}",
            lambda encoded=encoded: decode_records(encoded),
            repeat=10,
            unit_bytes=raw_size,
        )


if __name__ == "__main__":
    main()
