"""`distinct_prefixes`: each distinct first bytes of the records' keys or values with
the first record that has it (what schema validation at produce reads), against
`decode_records` on the same batches — through aiokafka's compiled record reader and
through the Python walker that stands in where it is missing."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.kafka import records as records_module
from core.kafka.records import (
    COMPRESSION_LZ4,
    COMPRESSION_NONE,
    CorruptRecord,
    RecordInput,
    decode_records,
    distinct_prefixes,
    encode_batch,
)


def expected(batch: bytes, *, key: bool) -> dict[bytes | None, int]:
    _, decoded = decode_records(batch)
    found: dict[bytes | None, int] = {}
    for index, record in enumerate(decoded):
        data = record.key if key else record.value
        found.setdefault(None if data is None else data[:5], index)
    return found


FRAMED = b"\x00\x00\x00\x00\x07"


@pytest.fixture(autouse=True, params=["compiled", "python"])
def reader(request, monkeypatch):
    """Every test runs on both walks of the records."""
    if request.param == "python":
        monkeypatch.setattr(records_module, "_COMPILED_BATCH", None)
    else:
        assert records_module._COMPILED_BATCH is not None, "aiokafka's compiled reader"
    return request.param


@pytest.mark.parametrize("compression", [COMPRESSION_NONE, COMPRESSION_LZ4])
def test_it_reads_the_same_keys_and_values_as_a_full_decode(compression):
    records = [
        RecordInput(key=None, value=FRAMED + b"payload", timestamp=5),
        RecordInput(key=b"k", value=None, timestamp=6, headers=[("h", b"v")]),
        RecordInput(key=b"\x00\x00\x00\x01\x02long key", value=b"", timestamp=7),
        RecordInput(key=b"", value=b"v" * 300, timestamp=8),  # a two-byte length varint
        RecordInput(key=b"k" * 20_000, value=b"v" * 20_000, timestamp=9),  # three bytes
        RecordInput(key=None, value=FRAMED + b"again", timestamp=10**12),  # a long delta
        RecordInput(key=None, value=b"\x00\x00", timestamp=11),  # shorter than a framing
    ]
    batch = encode_batch(records, compression=compression)
    assert distinct_prefixes(batch, size=5, key=False) == {
        FRAMED: 0,
        None: 1,
        b"": 2,
        b"vvvvv": 3,
        b"\x00\x00": 6,
    }
    assert distinct_prefixes(batch, size=5, key=True) == expected(batch, key=True)


def test_a_serializers_batch_has_one_framing_named_by_its_first_record():
    records = [RecordInput(value=FRAMED + bytes([n]) * 1019, timestamp=n) for n in range(200)]
    batch = encode_batch(records)
    assert distinct_prefixes(batch, size=5, key=False) == {FRAMED: 0}


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(
            st.none() | st.binary(max_size=300),
            st.none() | st.binary(max_size=300) | st.sampled_from([FRAMED, FRAMED + b"x"]),
            st.integers(0, 2**40),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_it_agrees_with_a_full_decode_on_any_batch(rows):
    batch = encode_batch([RecordInput(key=k, value=v, timestamp=t) for k, v, t in rows])
    assert distinct_prefixes(batch, size=5, key=False) == expected(batch, key=False)
    assert distinct_prefixes(batch, size=5, key=True) == expected(batch, key=True)


def test_a_record_running_past_its_end_is_corrupt():
    batch = bytearray(encode_batch([RecordInput(value=b"abcdef", timestamp=1)]))
    batch[-8] = 0x7E  # the value's length varint: 63 bytes, more than the record holds
    with pytest.raises(CorruptRecord):
        distinct_prefixes(bytes(batch), size=5, key=False)


@pytest.mark.parametrize("cut", [1, 3, 6, 9])
def test_a_batch_cut_short_is_corrupt_not_an_index_error(cut):
    batch = bytearray(encode_batch([RecordInput(value=b"abcdef", timestamp=1)] * 2))
    del batch[-cut:]
    batch[8:12] = (len(batch) - 12).to_bytes(4, "big")  # batchLength, as if sent so
    with pytest.raises(CorruptRecord):
        distinct_prefixes(bytes(batch), size=5, key=False)


def test_bytes_after_the_last_record_are_corrupt():
    batch = bytearray(encode_batch([RecordInput(value=FRAMED, timestamp=1)]))
    batch += b"\x00\x00"
    batch[8:12] = (len(batch) - 12).to_bytes(4, "big")
    with pytest.raises(CorruptRecord):
        distinct_prefixes(bytes(batch), size=5, key=False)


def test_a_record_with_the_sentinels_key_is_still_counted():
    sentinel = records_module._SENTINEL_KEY
    batch = encode_batch([RecordInput(key=sentinel, value=None, timestamp=1)] * 2)
    assert distinct_prefixes(batch, size=5, key=True) == {sentinel[:5]: 0}
    assert distinct_prefixes(batch, size=5, key=False) == {None: 0}


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.data())
def test_damaged_records_are_corrupt_or_read_never_anything_else(data):
    rows = [RecordInput(key=b"k" * n, value=FRAMED * n, timestamp=n) for n in range(1, 6)]
    batch = bytearray(encode_batch(rows, compression=data.draw(st.sampled_from([0, 3]))))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(61, len(batch) - 1))
        batch[at] = data.draw(st.integers(0, 255))
    try:
        distinct_prefixes(bytes(batch), size=5, key=data.draw(st.booleans()))
    except CorruptRecord:
        pass


CLIENT_FIXTURES = Path(__file__).parent / "records" / "fixtures"


@pytest.mark.parametrize("name", sorted(p.stem for p in CLIENT_FIXTURES.glob("*.bin")))
def test_it_reads_what_real_clients_wrote_compressed_or_not(name):
    batch = (CLIENT_FIXTURES / f"{name}.bin").read_bytes()
    for key in (True, False):
        assert distinct_prefixes(batch, size=5, key=key) == expected(batch, key=key)
    assert distinct_prefixes(batch, size=5, key=True)[None] == 6  # the one null key


def test_a_control_batch_is_read_like_any_other():
    # A transaction marker: key = version 0, type 1 (commit); value = version, epoch.
    marker = RecordInput(key=b"\x00\x00\x00\x01", value=b"\x00\x00\x00\x00\x00\x05", timestamp=1)
    batch = encode_batch([marker], is_control=True, is_transactional=True, producer_id=3)
    assert distinct_prefixes(batch, size=5, key=True) == {b"\x00\x00\x00\x01": 0}
    assert distinct_prefixes(batch, size=5, key=False) == {b"\x00\x00\x00\x00\x00": 0}


def test_null_empty_and_short_values_are_told_apart():
    batch = encode_batch(
        [RecordInput(value=v, timestamp=1) for v in (None, b"", b"\x00", b"\x00\x00\x00\x00")]
        + [RecordInput(value=None, timestamp=1)]
    )
    assert distinct_prefixes(batch, size=5, key=False) == {
        None: 0,
        b"": 1,
        b"\x00": 2,
        b"\x00\x00\x00\x00": 3,
    }


def _with_records(records: bytes, count: int) -> bytes:
    """A batch whose records are exactly these bytes (its CRC left stale: not ours to check)."""
    head = bytearray(encode_batch([RecordInput(value=b"x", timestamp=1)])[:61])
    head[8:12] = (61 - 12 + len(records)).to_bytes(4, "big")
    head[57:61] = count.to_bytes(4, "big", signed=True)
    return bytes(head) + records


@pytest.mark.parametrize(
    "records",
    [
        b"\xff" * 11 + b"\x01",  # a record length of more than ten varint bytes
        b"\x03",  # a negative record length (-2)
        bytes([2 * 7, 0, 0, 0, 1, 5, 0, 0]),  # a value length of -3
        bytes([2 * 7, 0, 0, 0, 1, 2 * 9, 0, 0]),  # a value longer than its record
        bytes([2 * 7, 0, 0x80, 0x80, 0x80]),  # a record ending inside a varint
        b"\x80",  # the batch ending inside the first record's length
    ],
)
@pytest.mark.parametrize("key", [True, False])
def test_garbled_records_are_corrupt(records, key):
    with pytest.raises(CorruptRecord):
        distinct_prefixes(_with_records(records, 1), size=5, key=key)


@pytest.mark.parametrize("count", [0, 2, -1])
def test_a_record_count_the_records_do_not_fill_is_corrupt(count):
    good = encode_batch([RecordInput(value=FRAMED, timestamp=1)])
    with pytest.raises(CorruptRecord):
        distinct_prefixes(_with_records(good[61:], count), size=5, key=False)


@pytest.mark.parametrize("cut", [1, 20, 60])
def test_a_header_cut_short_is_corrupt(cut):
    batch = encode_batch([RecordInput(value=FRAMED, timestamp=1)])
    with pytest.raises(CorruptRecord):
        distinct_prefixes(batch[: 61 - cut], size=5, key=False)


def test_compressed_records_that_do_not_decompress_are_corrupt():
    batch = bytearray(encode_batch([RecordInput(value=FRAMED * 50, timestamp=1)], compression=3))
    batch[70:80] = bytes(10)
    with pytest.raises(CorruptRecord, match="cannot decompress lz4"):
        distinct_prefixes(bytes(batch), size=5, key=False)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_batches_read_one_after_another_through_the_reused_buffer(codec):
    # Decompressed into one reused buffer: a batch larger than it (3 MiB) makes it grow,
    # and a smaller one after it is not read past its own records.
    big = [RecordInput(value=FRAMED + b"b" * 3000, timestamp=n) for n in range(1000)]
    small = [RecordInput(value=b"plain", timestamp=1), RecordInput(value=None, timestamp=2)]
    for records in (big, small, big, small):
        batch = encode_batch(records, compression=codec)
        assert distinct_prefixes(batch, size=5, key=False) == expected(batch, key=False)
