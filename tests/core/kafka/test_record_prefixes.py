"""`record_prefixes`: the first bytes of each record's key and value (what schema
validation at produce reads), against `decode_records` on the same batches."""

from __future__ import annotations

import pytest

from core.kafka.records import (
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    CorruptRecord,
    RecordInput,
    decode_records,
    encode_batch,
    record_prefixes,
)


@pytest.mark.parametrize("compression", [COMPRESSION_NONE, COMPRESSION_LZ4])
def test_it_reads_the_same_keys_and_values_as_a_full_decode(compression):
    records = [
        RecordInput(key=None, value=b"\x00\x00\x00\x00\x07payload", timestamp=5),
        RecordInput(key=b"k", value=None, timestamp=6, headers=[("h", b"v")]),
        RecordInput(key=b"\x00\x00\x00\x01\x02long key", value=b"", timestamp=7),
        RecordInput(key=b"", value=b"v" * 300, timestamp=8),  # a two-byte length varint
    ]
    batch = encode_batch(records, compression=compression)
    _, decoded = decode_records(batch)
    expected = [
        (i, None if r.key is None else r.key[:5], None if r.value is None else r.value[:5])
        for i, r in enumerate(decoded)
    ]
    assert record_prefixes(batch, size=5) == expected


def test_a_record_running_past_its_end_is_corrupt():
    batch = bytearray(encode_batch([RecordInput(value=b"abcdef", timestamp=1)]))
    batch[-8] = 0x7E  # the value's length varint: 63 bytes, more than the record holds
    with pytest.raises(CorruptRecord):
        record_prefixes(bytes(batch), size=5)
