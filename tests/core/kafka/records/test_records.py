"""Kafka v2 record batches: golden bytes, the produce-path checks, and codec round trips."""

from __future__ import annotations

import struct

import crc32c
import pytest

from core.kafka import records
from core.kafka.records import (
    CORRUPT_MESSAGE,
    INVALID_RECORD,
    MESSAGE_TOO_LARGE,
    BatchHeader,
    CorruptRecord,
    Record,
    RecordInput,
    RecordTooLarge,
    decode_records,
    encode_batch,
    iter_batches,
    patch_base_offset,
    validate_batches,
)

T0 = 1_700_000_000_000  # 0x0000018bcfe56800

# Two records, laid out field by field (DefaultRecord), varints zig-zag encoded.
GOLDEN_RECORDS = bytes.fromhex(
    "10"  # length 8
    "00"  # attributes
    "00"  # timestampDelta 0
    "00"  # offsetDelta 0
    "02"
    "6b"  # key length 1, "k"
    "02"
    "76"  # value length 1, "v"
    "00"  # 0 headers
    "1e"  # length 15
    "00"  # attributes
    "0a"  # timestampDelta 5
    "02"  # offsetDelta 1
    "01"  # key length -1: null
    "0a"
    "68656c6c6f"  # value length 5, "hello"
    "02"  # 1 header
    "02"
    "68"  # header key length 1, "h"
    "02"
    "31"  # header value length 1, "1"
)
GOLDEN_AFTER_CRC = (
    bytes.fromhex(
        "0000"  # attributes: no compression, CreateTime, not transactional
        "00000001"  # lastOffsetDelta
        "0000018bcfe56800"  # baseTimestamp
        "0000018bcfe56805"  # maxTimestamp
        "ffffffffffffffff"  # producerId -1
        "ffff"  # producerEpoch -1
        "ffffffff"  # baseSequence -1
        "00000002"  # record count
    )
    + GOLDEN_RECORDS
)
GOLDEN_CRC = 0x9086FB13  # CRC-32C of GOLDEN_AFTER_CRC
GOLDEN_BATCH = (
    bytes.fromhex(
        "0000000000000000"  # baseOffset
        "0000004a"  # batchLength 74 = 49 + 25 bytes of records
        "ffffffff"  # partitionLeaderEpoch -1
        "02"  # magic
    )
    + struct.pack(">I", GOLDEN_CRC)
    + GOLDEN_AFTER_CRC
)
GOLDEN_INPUT = [
    RecordInput(timestamp=T0, key=b"k", value=b"v"),
    RecordInput(timestamp=T0 + 5, value=b"hello", headers=[("h", b"1")]),
]

CODECS = [
    records.COMPRESSION_NONE,
    records.COMPRESSION_GZIP,
    records.COMPRESSION_SNAPPY,
    records.COMPRESSION_LZ4,
    records.COMPRESSION_ZSTD,
]


def test_crc32c_is_castagnoli():
    assert crc32c.crc32c(b"123456789") == 0xE3069283
    assert crc32c.crc32c(GOLDEN_AFTER_CRC) == GOLDEN_CRC


def test_it_encodes_the_golden_batch_byte_for_byte():
    assert encode_batch(GOLDEN_INPUT) == GOLDEN_BATCH


def test_it_decodes_the_golden_batch():
    header, decoded = decode_records(GOLDEN_BATCH)
    assert header == BatchHeader(0, 74, -1, 2, GOLDEN_CRC, 0, 1, T0, T0 + 5, -1, -1, -1, 2)
    assert decoded == [
        Record(0, T0, b"k", b"v", []),
        Record(1, T0 + 5, None, b"hello", [("h", b"1")]),
    ]


def test_header_properties_read_the_attribute_bits():
    batch = encode_batch(
        GOLDEN_INPUT,
        compression=records.COMPRESSION_ZSTD,
        timestamp_type=1,
        is_transactional=True,
        producer_id=9,
        producer_epoch=0,
        base_sequence=0,
        base_offset=100,
    )
    ((_, _, header),) = iter_batches(batch)
    assert header.compression == 4
    assert header.timestamp_type == 1
    assert header.is_transactional
    assert not header.is_control
    assert header.last_offset == 101
    assert header.size == len(batch)
    control = encode_batch(GOLDEN_INPUT, is_control=True)
    assert next(iter_batches(control))[2].is_control


def test_iter_batches_walks_concatenated_batches():
    first = encode_batch(GOLDEN_INPUT)
    second = encode_batch([RecordInput(timestamp=T0, value=b"x" * 300)], base_offset=7)
    found = list(iter_batches(first + second))
    assert [(pos, total) for pos, total, _ in found] == [
        (0, len(first)),
        (len(first), len(second)),
    ]
    assert found[1][2].base_offset == 7
    assert list(iter_batches(b"")) == []


def test_validate_accepts_good_batches_without_copying_them():
    buf = bytearray(encode_batch(GOLDEN_INPUT) + encode_batch(GOLDEN_INPUT))
    result = validate_batches(memoryview(buf), max_batch_bytes=1_000)
    assert [(pos, total) for pos, total, _ in result] == [(0, 86), (86, 86)]
    assert result[0][2].record_count == 2


def test_validate_detects_a_flipped_bit_anywhere_the_crc_covers():
    for position in (21, 30, 61, len(GOLDEN_BATCH) - 1):
        damaged = bytearray(GOLDEN_BATCH)
        damaged[position] ^= 0x04
        with pytest.raises(CorruptRecord) as caught:
            validate_batches(damaged, max_batch_bytes=1_000)
        assert caught.value.error_code == CORRUPT_MESSAGE
        assert "crc" in caught.value.reason


def test_validate_rejects_a_batch_over_the_size_limit():
    with pytest.raises(RecordTooLarge) as caught:
        validate_batches(GOLDEN_BATCH, max_batch_bytes=len(GOLDEN_BATCH) - 1)
    assert caught.value.error_code == MESSAGE_TOO_LARGE
    validate_batches(GOLDEN_BATCH, max_batch_bytes=len(GOLDEN_BATCH))


@pytest.mark.parametrize("cut", [1, 10, 16, 17, 60, 61, 70, len(GOLDEN_BATCH) - 1])
def test_a_truncated_batch_is_corrupt(cut):
    with pytest.raises(CorruptRecord) as caught:
        list(iter_batches(GOLDEN_BATCH[:cut]))
    assert "truncated" in caught.value.reason


def test_a_partial_batch_after_a_whole_one_is_corrupt():
    with pytest.raises(CorruptRecord):
        validate_batches(GOLDEN_BATCH + GOLDEN_BATCH[:70], max_batch_bytes=1_000)


@pytest.mark.parametrize("magic", [0, 1, 3])
def test_a_batch_with_another_magic_is_rejected(magic):
    bad = bytearray(GOLDEN_BATCH)
    bad[16] = magic
    with pytest.raises(CorruptRecord) as caught:
        list(iter_batches(bad))
    assert caught.value.error_code == INVALID_RECORD
    assert f"magic {magic}" in caught.value.reason


def test_a_length_below_the_batch_overhead_is_corrupt():
    bad = bytearray(GOLDEN_BATCH)
    struct.pack_into(">i", bad, 8, 48)
    with pytest.raises(CorruptRecord):
        list(iter_batches(bad))


def rewrite(batch: bytes, **fields) -> bytes:
    """The batch with header fields replaced and its CRC recomputed."""
    header = BatchHeader._make(struct.unpack_from(">qiibIhiqqqhii", batch))._replace(**fields)
    out = bytearray(batch)
    struct.pack_into(">qiibIhiqqqhii", out, 0, *header)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


@pytest.mark.parametrize(
    "fields",
    [
        {"record_count": 3},  # count disagrees with lastOffsetDelta + 1
        {"last_offset_delta": 5},
        {"record_count": 0, "last_offset_delta": -1},  # empty batches come only from compaction
        {"attributes": 0x20},  # control batches come only from the broker
        {"attributes": 0x05},  # no codec 5
        {"producer_id": 42, "producer_epoch": 0, "base_sequence": -1},
    ],
)
def test_validate_applies_kafkas_rules_for_client_batches(fields):
    with pytest.raises(CorruptRecord) as caught:
        validate_batches(rewrite(GOLDEN_BATCH, **fields), max_batch_bytes=1_000)
    assert caught.value.error_code == INVALID_RECORD


def test_patch_base_offset_leaves_the_crc_valid():
    buf = bytearray(GOLDEN_BATCH * 2)
    patch_base_offset(buf, 86, 1_000_000)
    second = validate_batches(buf, max_batch_bytes=1_000)[1][2]
    assert second.base_offset == 1_000_000
    assert [r.offset for r in decode_records(bytes(buf[86:]))[1]] == [1_000_000, 1_000_001]
    patch_base_offset(memoryview(buf), 0, 5)
    assert buf[:8] == struct.pack(">q", 5)


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_round_trips(codec):
    inputs = [
        RecordInput(
            timestamp=T0 + n,
            key=None if n % 5 == 0 else f"key-{n}".encode(),
            value=None if n == 7 else (f"value {n} " * (n % 13)).encode(),
            headers=[("n", str(n).encode()), ("null", None)] if n % 3 == 0 else [],
        )
        for n in range(200)
    ]
    batch = encode_batch(inputs, compression=codec, base_offset=40)
    if codec:
        assert len(batch) < len(encode_batch(inputs))
    (_, _, header), *_ = validate_batches(batch, max_batch_bytes=1 << 20)
    assert header.compression == codec
    header, decoded = decode_records(batch)
    assert decoded == [
        Record(40 + n, r.timestamp, r.key, r.value, list(r.headers)) for n, r in enumerate(inputs)
    ]


def test_snappy_batches_use_xerial_framing_and_raw_snappy_is_read_too():
    import cramjam

    batch = encode_batch(GOLDEN_INPUT, compression=records.COMPRESSION_SNAPPY)
    assert batch[61:69] == b"\x82SNAPPY\x00"
    raw = bytes(cramjam.snappy.compress_raw(GOLDEN_RECORDS))
    rebuilt = rewrite(GOLDEN_BATCH[:61] + raw, attributes=2, batch_length=49 + len(raw))
    assert decode_records(rebuilt)[1] == decode_records(GOLDEN_BATCH)[1]


def test_lz4_batches_use_independent_blocks_as_kafka_requires():
    batch = encode_batch(GOLDEN_INPUT, compression=records.COMPRESSION_LZ4)
    frame = batch[61:]
    assert frame[:4] == bytes.fromhex("04224d18")
    assert frame[4] & 0x20, (
        "FLG B.Indep must be set: Kafka's Lz4BlockInputStream reads blocks alone"
    )


def test_a_big_snappy_batch_spans_several_xerial_blocks():
    inputs = [RecordInput(timestamp=T0, value=bytes(range(256)) * 40) for _ in range(20)]
    batch = encode_batch(inputs, compression=records.COMPRESSION_SNAPPY)
    assert len(decode_records(batch)[1]) == 20


def test_offset_gaps_and_an_explicit_last_offset_delta_are_kept():
    inputs = [
        RecordInput(offset_delta=2, timestamp=T0 + 9, key=b"a", value=b"1"),
        RecordInput(offset_delta=5, timestamp=T0, key=b"b", value=b"2"),
    ]
    batch = encode_batch(inputs, base_offset=100, last_offset_delta=9)
    header, decoded = decode_records(batch)
    assert (header.record_count, header.last_offset_delta) == (2, 9)
    assert (header.base_timestamp, header.max_timestamp) == (T0 + 9, T0 + 9)
    assert [(r.offset, r.timestamp) for r in decoded] == [(102, T0 + 9), (105, T0)]


def test_offset_deltas_default_to_consecutive():
    batch = encode_batch([RecordInput(value=b"a"), RecordInput(value=b"b")], base_offset=3)
    header, decoded = decode_records(batch)
    assert [r.offset for r in decoded] == [3, 4]
    assert header.base_timestamp > 1_600_000_000_000  # now


def test_encoding_rejects_decreasing_offsets_and_bad_options():
    with pytest.raises(ValueError):
        encode_batch([RecordInput(offset_delta=3), RecordInput(offset_delta=3)])
    with pytest.raises(ValueError):
        encode_batch([RecordInput(offset_delta=3)], last_offset_delta=2)
    with pytest.raises(ValueError):
        encode_batch([RecordInput(timestamp=-5)])
    with pytest.raises(ValueError):
        encode_batch(GOLDEN_INPUT, compression=9)


def test_an_empty_batch_encodes_like_kafkas_compacted_empty_batch():
    batch = encode_batch([], base_offset=50, last_offset_delta=4, producer_id=3, base_sequence=10)
    header, decoded = decode_records(batch)
    assert decoded == []
    assert (header.record_count, header.last_offset_delta) == (0, 4)
    assert (header.base_timestamp, header.max_timestamp) == (-1, -1)


def test_log_append_time_batches_give_every_record_the_max_timestamp():
    batch = encode_batch(
        [RecordInput(timestamp=T0 + 50), RecordInput(timestamp=T0 + 50)], timestamp_type=1
    )
    patched = rewrite(batch, max_timestamp=T0 + 999)
    assert [r.timestamp for r in decode_records(patched)[1]] == [T0 + 999, T0 + 999]


def test_large_and_negative_varints_round_trip():
    inputs = [
        RecordInput(offset_delta=0, timestamp=T0 + 10**9, value=b"x" * 70_000),
        RecordInput(offset_delta=2**31 - 1, timestamp=T0, key=b"k" * 300),
    ]
    _, decoded = decode_records(encode_batch(inputs))
    assert decoded[0].timestamp == T0 + 10**9
    assert decoded[1].timestamp == T0  # timestamp delta -10**9
    assert decoded[1].offset == 2**31 - 1
    assert len(decoded[0].value) == 70_000


def test_decode_checks_the_crc_unless_told_not_to():
    damaged = bytearray(GOLDEN_BATCH)
    damaged[-1] ^= 0xFF
    with pytest.raises(CorruptRecord):
        decode_records(bytes(damaged))
    assert decode_records(bytes(damaged), verify_crc=False)[1][1].headers == [("h", b"\xce")]


@pytest.mark.parametrize(
    "records_bytes",
    [
        GOLDEN_RECORDS[:-1],  # last record cut short
        GOLDEN_RECORDS + b"\x00",  # a byte after the last record
        b"\x7e" + GOLDEN_RECORDS[1:],  # first record claims 63 bytes
        GOLDEN_RECORDS[:9] + b"\x1e\x00\x0a\x02\x01\x0a" + b"\xff" * 10,  # varint never ends
        b"\x10\x00\x00\x00\x03" + GOLDEN_RECORDS[5:],  # key length -2
    ],
)
def test_malformed_records_are_corrupt(records_bytes):
    batch = rewrite(GOLDEN_BATCH[:61] + records_bytes, batch_length=49 + len(records_bytes))
    with pytest.raises(CorruptRecord):
        decode_records(batch)


def test_garbage_compressed_payloads_are_corrupt():
    for codec in CODECS[1:]:
        garbage = b"\x00\x01not compressed at all" * 3
        batch = rewrite(GOLDEN_BATCH[:61] + garbage, attributes=codec, batch_length=49 + 63)
        with pytest.raises(CorruptRecord):
            decode_records(batch)


def test_decode_wants_exactly_one_whole_batch():
    with pytest.raises(CorruptRecord):
        decode_records(GOLDEN_BATCH + GOLDEN_BATCH)
    with pytest.raises(CorruptRecord):
        decode_records(b"")


def test_whole_batches_length_drops_a_partial_trailing_batch():
    first = encode_batch(GOLDEN_INPUT)
    second = encode_batch([RecordInput(timestamp=T0, value=b"x" * 300)], base_offset=7)
    both = first + second
    assert records.whole_batches_length(both) == len(both)
    assert records.whole_batches_length(both[:-1]) == len(first)
    assert records.whole_batches_length(both[: len(first) + 5]) == len(first)
    assert records.whole_batches_length(first[:11]) == 0
    assert records.whole_batches_length(b"") == 0
