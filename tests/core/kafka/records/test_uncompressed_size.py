"""`uncompressed_size`: a batch's bytes with its records decompressed, to the byte, for
every codec — read from the frame where the format declares it, else measured."""

from __future__ import annotations

import cramjam
import pytest

from core.kafka.records import (
    COMPRESSION_NAMES,
    RECORD_BATCH_OVERHEAD,
    RecordInput,
    _declared_size,
    encode_batch,
    iter_batches,
    uncompressed_size,
)

RECORDS = [RecordInput(key=b"k%d" % i, value=b"value %d " % i * (i + 1)) for i in range(40)]
PLAIN = encode_batch(RECORDS)


@pytest.mark.parametrize("codec", sorted(COMPRESSION_NAMES))
def test_every_codec_measures_the_same_logical_bytes_as_the_uncompressed_batch(codec):
    batch = encode_batch(RECORDS, compression=codec)
    header = next(iter_batches(batch))[2]
    assert uncompressed_size(batch, header) == len(PLAIN)


def test_a_zstd_frame_with_its_content_size_is_read_without_decompressing():
    body = PLAIN[RECORD_BATCH_OVERHEAD:]
    frame = memoryview(bytes(cramjam.zstd.compress(body)))
    assert _declared_size(4, frame) == len(body)
    assert _declared_size(4, frame[:-1]) is None  # not exactly one frame: measure instead


def test_an_lz4_frame_without_a_content_size_is_measured():
    frame = memoryview(bytes(cramjam.lz4.compress(PLAIN[RECORD_BATCH_OVERHEAD:])))
    assert _declared_size(3, frame) is None


def test_a_payload_larger_than_the_scratch_buffer_is_measured_and_the_buffer_grows():
    from core.kafka import records

    body = bytes(range(256)) * (12 * 1024)  # 3 MiB: more than the 2 MiB scratch buffer
    frame = memoryview(bytes(cramjam.lz4.compress(body)))  # no content size, as librdkafka
    assert records._measured_size(3, frame) == len(body)
    assert len(records._SCRATCH.buffer) == len(body)
    assert records._measured_size(3, frame) == len(body)  # now into the grown buffer


def test_a_corrupt_payload_is_still_named_corrupt():
    from core.kafka import records

    with pytest.raises(records.CorruptRecord, match="lz4"):
        records._measured_size(3, memoryview(b"\x04\x22\x4d\x18 not lz4 at all"))
