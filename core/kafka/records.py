"""Kafka record batches, magic v2 (KIP-98): checked on the produce path, decoded and built elsewhere.

Batch layout (big-endian; DefaultRecordBatch.java)::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 (= 2)
    | crc uint32 | attributes int16 | lastOffsetDelta int32 | baseTimestamp int64
    | maxTimestamp int64 | producerId int64 | producerEpoch int16 | baseSequence int32
    | recordCount int32 | records (compressed as one block when attributes say so)

`batchLength` counts the bytes after itself; the CRC-32C covers attributes to the end,
so the broker may rewrite baseOffset and partitionLeaderEpoch without recomputing it.

Record layout (DefaultRecord.java), lengths as zig-zag varints::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint
    | keyLength varint (-1 = null) | key | valueLength varint (-1 = null) | value
    | headerCount varint | [keyLength varint | key utf-8 | valueLength varint (-1 = null) | value]

The produce hot path (`iter_batches`, `validate_batches`) reads only the 61-byte headers
and runs the C CRC over a memoryview: records are never decoded or copied there.
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Iterator, Sequence
from itertools import islice
from operator import attrgetter, itemgetter
from typing import NamedTuple

import cramjam
from crc32c import crc32c

try:  # aiokafka's record reader, compiled: see `distinct_prefixes`
    from aiokafka.errors import (
        CorruptRecordException as _CompiledCorrupt,
    )
    from aiokafka.record._crecords.default_records import (
        DefaultRecordBatch as _COMPILED_BATCH,
    )
except ImportError:  # pragma: no cover - aiokafka publishes compiled wheels for CPython
    _COMPILED_BATCH = None
    _CompiledCorrupt = ValueError  # never raised then

# Kafka error codes the exceptions below map to.
CORRUPT_MESSAGE = 2
MESSAGE_TOO_LARGE = 10
INVALID_RECORD = 87

MAGIC = 2
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes batchLength does not count
RECORD_BATCH_OVERHEAD = 61  # a batch with no records
_RECORD_COUNT_OFFSET = 57
# See `distinct_prefixes`: a record (attributes 0, deltas 0, this key, a null value, no
# headers), then zeros.
_SENTINEL_KEY = b"\xfffloe: the end of the records"
_SENTINEL_RECORD = (
    bytes([2 * (6 + len(_SENTINEL_KEY)), 0, 0, 0, 2 * len(_SENTINEL_KEY)])
    + _SENTINEL_KEY
    + bytes([1, 0])
)
_READER_TAIL = _SENTINEL_RECORD + bytes(16)  # the sentinel, then zeros for overreads
_MAGIC_OFFSET = 16
_CRC_OFFSET = 17
_ATTRIBUTES_OFFSET = 21  # the CRC covers from here to the end of the batch

COMPRESSION_NONE = 0
COMPRESSION_GZIP = 1
COMPRESSION_SNAPPY = 2
COMPRESSION_LZ4 = 3
COMPRESSION_ZSTD = 4
COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_MASK = 0x08  # 0 = CreateTime, 1 = LogAppendTime
_TRANSACTIONAL_MASK = 0x10
_CONTROL_MASK = 0x20

TIMESTAMP_CREATE_TIME = 0
TIMESTAMP_LOG_APPEND_TIME = 1
NO_TIMESTAMP = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength
_BASE_OFFSET = struct.Struct(">q")
_CRC = struct.Struct(">I")
_INT32 = struct.Struct(">i")
assert _HEADER.size == RECORD_BATCH_OVERHEAD

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


class CorruptRecord(Exception):
    """A batch that cannot be accepted.

    `error_code` is CORRUPT_MESSAGE (2) for bytes that fail their CRC or cannot be
    parsed, INVALID_RECORD (87) for a well-formed batch that breaks a rule.
    """

    def __init__(self, reason: str, *, error_code: int = CORRUPT_MESSAGE) -> None:
        super().__init__(reason)
        self.reason = reason
        self.error_code = error_code


class RecordTooLarge(Exception):
    """A batch is bigger than the size limit; Kafka's MESSAGE_TOO_LARGE (10)."""

    error_code = MESSAGE_TOO_LARGE

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"record batch of {size} bytes exceeds the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class BatchHeader(NamedTuple):
    """The fixed 61 bytes that open every v2 batch."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """The whole batch in bytes, including the 12-byte baseOffset + batchLength prefix."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression(self) -> int:
        return self.attributes & _COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return (self.attributes & _TIMESTAMP_TYPE_MASK) >> 3

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_MASK)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta


class Record(NamedTuple):
    """A decoded record: absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class RecordInput(NamedTuple):
    """A record to encode.

    `offset_delta` is relative to the batch's base offset; None means "one after the
    previous record" (0 for the first), so plain producers can leave it out while key
    compaction passes each kept record's original delta, gaps and all.
    `timestamp` None means the time of encoding.
    """

    offset_delta: int | None = None
    timestamp: int | None = None
    key: bytes | None = None
    value: bytes | None = None
    headers: Sequence[tuple[str, bytes | None]] = ()


BufferLike = bytes | bytearray | memoryview


# --- the produce hot path: headers only -----------------------------------------------


def iter_batches(buf: BufferLike) -> Iterator[tuple[int, int, BatchHeader]]:
    """Walk the batches of a records field: (position, total length incl. 12-byte prefix, header).

    Raises CorruptRecord on a truncated or partial trailing batch, a length below the
    v2 minimum, or a magic other than 2. Does not check CRCs.
    """
    end = len(buf)
    pos = 0
    while pos < end:
        if end - pos < _MAGIC_OFFSET + 1:
            raise CorruptRecord(
                f"truncated record batch at byte {pos}: {end - pos} bytes, too few for a header"
            )
        _, batch_length = _PREFIX.unpack_from(buf, pos)
        # The magic byte says how to read the rest, so it is checked first.
        magic = buf[pos + _MAGIC_OFFSET]
        if magic != MAGIC:
            raise CorruptRecord(
                f"record batch at byte {pos} has magic {magic}; only magic 2 is supported",
                error_code=INVALID_RECORD,
            )
        total = batch_length + LOG_OVERHEAD
        if total < RECORD_BATCH_OVERHEAD:
            raise CorruptRecord(
                f"record batch at byte {pos} declares {batch_length} bytes, less than the "
                f"minimum {RECORD_BATCH_OVERHEAD - LOG_OVERHEAD}"
            )
        if pos + total > end:
            raise CorruptRecord(
                f"truncated record batch at byte {pos}: declares {total} bytes, {end - pos} remain"
            )
        yield pos, total, BatchHeader._make(_HEADER.unpack_from(buf, pos))
        pos += total


def whole_batches_length(buf: BufferLike) -> int:
    """The bytes of `buf` up to the end of its last whole batch: a Fetch response's records
    may end with a partial batch (KIP-74 cuts at the size limit), which a consumer drops."""
    end = len(buf)
    pos = 0
    while end - pos >= LOG_OVERHEAD:
        _, batch_length = _PREFIX.unpack_from(buf, pos)
        total = batch_length + LOG_OVERHEAD
        if total < RECORD_BATCH_OVERHEAD or pos + total > end:
            break
        pos += total
    return pos


def validate_batches(
    buf: BufferLike, *, max_batch_bytes: int
) -> list[tuple[int, int, BatchHeader]]:
    """Check a produce request's records field the way Kafka's broker does for client writes.

    Each batch: magic 2, size within `max_batch_bytes` (RecordTooLarge), CRC-32C, a known
    codec, and the header rules of Kafka's LogValidator for client-origin batches
    (record count > 0 and equal to lastOffsetDelta + 1; no control batches; a producer id
    needs a sequence number). Records are not decoded and the payload is not copied.
    """
    view = memoryview(buf)
    batches = []
    for pos, total, header in iter_batches(view):
        if total > max_batch_bytes:
            raise RecordTooLarge(total, max_batch_bytes)
        computed = crc32c(view[pos + _ATTRIBUTES_OFFSET : pos + total])
        if computed != header.crc:
            raise CorruptRecord(
                f"record batch at byte {pos} is corrupt "
                f"(stored crc = {header.crc}, computed crc = {computed})"
            )
        _check_client_rules(pos, header)
        batches.append((pos, total, header))
    return batches


def _check_client_rules(pos: int, header: BatchHeader) -> None:
    # LogValidator.validateBatch, origin CLIENT. One cheap test for the usual good batch;
    # the messages are built only when something is wrong.
    attributes, count = header.attributes, header.record_count
    if (
        (attributes & _COMPRESSION_MASK) <= COMPRESSION_ZSTD
        and count > 0
        and count == header.last_offset_delta + 1
        and not attributes & _CONTROL_MASK
        and (header.producer_id < 0 or header.base_sequence >= 0)
    ):
        return
    where = f"record batch at byte {pos}"
    if header.compression not in COMPRESSION_NAMES:
        raise CorruptRecord(
            f"{where} uses unknown compression codec {header.compression}",
            error_code=INVALID_RECORD,
        )
    if header.record_count <= 0 or header.last_offset_delta < 0:
        raise CorruptRecord(
            f"{where} has an invalid record count {header.record_count} "
            f"or last offset delta {header.last_offset_delta}",
            error_code=INVALID_RECORD,
        )
    if header.record_count != header.last_offset_delta + 1:
        raise CorruptRecord(
            f"{where} has {header.record_count} records but last offset delta "
            f"{header.last_offset_delta}",
            error_code=INVALID_RECORD,
        )
    if header.is_control:
        raise CorruptRecord(
            f"{where}: clients are not allowed to write control records",
            error_code=INVALID_RECORD,
        )
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise CorruptRecord(
            f"{where} has producer id {header.producer_id} but sequence {header.base_sequence}",
            error_code=INVALID_RECORD,
        )


def patch_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Set the baseOffset of the batch at `pos`; the CRC does not cover it (KIP-98)."""
    _BASE_OFFSET.pack_into(buf, pos, base_offset)


def batch_crc_ok(batch: BufferLike, header: BatchHeader) -> bool:
    """Whether a single batch's stored CRC matches its bytes."""
    view = memoryview(batch)
    return crc32c(view[_ATTRIBUTES_OFFSET : header.size]) == header.crc


# --- decoding records ------------------------------------------------------------------


def decode_records(
    batch: BufferLike, *, verify_crc: bool = True
) -> tuple[BatchHeader, list[Record]]:
    """Decode one whole batch: its header and its records, decompressed.

    Offsets are absolute (baseOffset + offsetDelta). Timestamps are absolute; in a
    LogAppendTime batch every record carries the batch's maxTimestamp, as in Kafka.
    """
    header, data = _batch_records_bytes(batch, verify_crc=verify_crc)
    return header, _decode_record_list(data, header)


def _batch_records_bytes(batch: BufferLike, *, verify_crc: bool) -> tuple[BatchHeader, bytes]:
    """One whole batch's header and its records' bytes, decompressed."""
    view = memoryview(batch)
    _, total, header = _only_batch(view)
    if verify_crc and not batch_crc_ok(view, header):
        raise CorruptRecord(f"record batch is corrupt (stored crc = {header.crc})")
    if header.record_count < 0:
        raise CorruptRecord(f"record batch has a negative record count {header.record_count}")
    payload = view[RECORD_BATCH_OVERHEAD:total]
    codec = header.compression
    data = bytes(payload) if codec == COMPRESSION_NONE else _decompress(codec, payload)
    return header, data


def _record_start(data: bytes, pos: int, end: int, index: int) -> tuple[int, int]:
    """(where record `index`'s fields start, where it ends) from its length at `pos`."""
    length, pos = _read_varint(data, pos, end)
    record_end = pos + length
    if length < 0 or record_end > end:
        raise CorruptRecord(f"record {index} declares {length} bytes, {end - pos} remain")
    return pos, record_end


def distinct_prefixes(batch: BufferLike, *, size: int, key: bool) -> dict[bytes | None, int]:
    """Each distinct first `size` bytes of the records' keys (`key`) or values in one
    whole batch (None for a null one, fewer bytes for a shorter one), with the index of
    the first record that has it: what schema validation at produce reads (the framing).
    The batch's CRC is the caller's to check; records that run past the batch's end,
    or leave bytes after the last one, are corrupt.

    The hot loop of validated produce, so the records are walked by aiokafka's compiled
    record reader where it is installed (several times faster than `_python_prefixes`).
    It is handed the records uncompressed, then a sentinel record of ours and zero
    bytes: its varint reads may run up to ten bytes past a record's end before its
    bounds checks (they stay in our zeros), and it reads the sentinel whole only if the
    records before it end exactly where they should."""
    if _COMPILED_BATCH is None:
        return _python_prefixes(batch, size=size, key=key)
    view = memoryview(batch)
    _, total, header = _only_batch(view)
    count = header.record_count
    if count < 0:
        raise CorruptRecord(f"record batch has a negative record count {count}")
    head = bytearray(view[:RECORD_BATCH_OVERHEAD])
    head[_ATTRIBUTES_OFFSET + 1] &= ~_COMPRESSION_MASK & 0xFF  # handed uncompressed
    _INT32.pack_into(head, _RECORD_COUNT_OFFSET, count + 1)  # and the sentinel
    buffer = _reader_input(head, header.compression, view[RECORD_BATCH_OVERHEAD:total])
    found: dict[bytes | None, int]
    try:
        reader = _COMPILED_BATCH(buffer)
        fields = map(attrgetter("key" if key else "value"), islice(reader, count))
        try:  # the common case in C: no null field, one framing (the first record's)
            found = dict.fromkeys(map(itemgetter(slice(0, size)), fields), 0)
        except TypeError:  # a null field
            found = {}
        if len(found) != 1:
            found = {}
            reader = _COMPILED_BATCH(buffer)
            for index, record in enumerate(islice(reader, count)):
                data = record.key if key else record.value
                found.setdefault(None if data is None else data[:size], index)
        sentinel = next(reader)
    except (_CompiledCorrupt, UnicodeDecodeError) as exc:
        raise CorruptRecord(f"a record is corrupt: {exc}") from None
    if sentinel.key != _SENTINEL_KEY or sentinel.value is not None:
        raise CorruptRecord("the records do not end where the batch does")
    return found


def _reader_input(head: bytearray, codec: int, payload: memoryview) -> bytes | memoryview:
    """What `distinct_prefixes` hands aiokafka's reader: `head`, the records uncompressed,
    then the sentinel record and the padding. Compressed records are decompressed straight
    into this thread's scratch buffer, after room for the head, where the codec can: no
    allocation and no copy of the records (8-15 % of the cost of a gzip, LZ4 or zstd
    batch of 1 KiB records)."""
    if codec == COMPRESSION_NONE:
        return b"".join((head, payload, _READER_TAIL))
    into = _DECOMPRESS_INTO.get(codec)
    if into is not None:
        scratch = _scratch()
        try:
            size = into(payload, memoryview(scratch)[RECORD_BATCH_OVERHEAD:])
        except cramjam.DecompressionError:
            pass  # larger than the buffer, or corrupt: `_decompress` tells which
        else:
            end = RECORD_BATCH_OVERHEAD + size + len(_READER_TAIL)
            if end <= len(scratch):
                scratch[:RECORD_BATCH_OVERHEAD] = head
                scratch[end - len(_READER_TAIL) : end] = _READER_TAIL
                return memoryview(scratch)[:end]
    records = _decompress(codec, payload)
    _scratch(RECORD_BATCH_OVERHEAD + len(records) + len(_READER_TAIL))  # fits next time
    return b"".join((head, records, _READER_TAIL))


def _python_prefixes(batch: BufferLike, *, size: int, key: bool) -> dict[bytes | None, int]:
    """`distinct_prefixes` in Python, where aiokafka's compiled reader is missing: the
    deltas skipped unread, no allocation for a record whose prefix repeats the last."""
    header, data = _batch_records_bytes(batch, verify_crc=False)
    found: dict[bytes | None, int] = {}
    prefix: bytes | None
    last = None  # the last full-size prefix found
    pos, end = 0, len(data)
    index = 0
    try:
        for index in range(header.record_count):
            pos, record_end = _record_start(data, pos, end, index)
            at = pos + 1  # attributes: unused in v2
            while data[at] > 0x7F:  # the timestamp delta: skipped
                at += 1
            at += 1
            while data[at] > 0x7F:  # the offset delta: skipped
                at += 1
            key_length, key_at = _read_varint(data, at + 1, record_end)
            length, at = _read_varint(data, key_at + max(key_length, 0), record_end)  # value's
            if min(key_length, length) < -1 or at + max(length, 0) > record_end:
                raise CorruptRecord(
                    f"record {index}'s key or value length is invalid or runs past its end"
                )
            if key:
                length, at = key_length, key_at
            pos = record_end
            if length >= size:
                if last is not None and data.startswith(last, at):
                    continue
                last = prefix = data[at : at + size]
            else:
                prefix = None if length < 0 else data[at : at + length]
            if prefix not in found:
                found[prefix] = index
    except IndexError:
        raise CorruptRecord(f"record {index} is truncated") from None
    if pos != end:
        raise CorruptRecord("the records do not end where the batch does")
    return found


def uncompressed_size(batch: BufferLike, header: BatchHeader) -> int:
    """The batch's size with its records decompressed (the batch's own size when it is
    not compressed): the logical bytes a producer wrote, as billing counts them.

    Where the compressed format states its content size (a single LZ4 or zstd frame with
    its content-size field, raw or xerial snappy blocks), that is read without
    decompressing; otherwise the records are decompressed and measured."""
    if header.compression == COMPRESSION_NONE:
        return header.size
    payload = memoryview(batch)[RECORD_BATCH_OVERHEAD : header.size]
    try:
        declared = _declared_size(header.compression, payload)
    except (IndexError, ValueError, struct.error):
        declared = None
    if declared is None:
        declared = _measured_size(header.compression, payload)
    return RECORD_BATCH_OVERHEAD + declared


# Decompressing into one reused buffer (per thread), to measure or to hand the records to
# `distinct_prefixes`' reader: no allocation and no copy per batch — 30 % faster than
# `_decompress` for librdkafka's LZ4 frames, which declare no content size. A larger
# output falls back to `_decompress` (which also names a corrupt payload), and the
# buffer grows to fit it, up to a bound.
_SCRATCH = threading.local()
_SCRATCH_BYTES = 2 << 20  # a producer batch is 1 MiB by default (librdkafka, Java)
_SCRATCH_MAX_BYTES = 16 << 20
_DECOMPRESS_INTO = {
    COMPRESSION_GZIP: cramjam.gzip.decompress_into,
    COMPRESSION_LZ4: cramjam.lz4.decompress_into,
    COMPRESSION_ZSTD: cramjam.zstd.decompress_into,
}


def _scratch(size: int = 0) -> bytearray:
    """This thread's reused buffer, first grown to `size` bytes (up to a bound) if smaller."""
    scratch = getattr(_SCRATCH, "buffer", None)
    if scratch is None or len(scratch) < size <= _SCRATCH_MAX_BYTES:
        scratch = _SCRATCH.buffer = bytearray(max(size, _SCRATCH_BYTES))
    return scratch


def _measured_size(codec: int, payload: memoryview) -> int:
    into = _DECOMPRESS_INTO.get(codec)
    if into is None:  # snappy: its own framing, decompressed as it is read
        return len(_decompress(codec, payload))
    try:
        return into(payload, _scratch())
    except cramjam.DecompressionError:
        pass  # larger than the buffer, or corrupt: `_decompress` tells which
    size = len(_decompress(codec, payload))
    _scratch(size)
    return size


def _declared_size(codec: int, payload: memoryview) -> int | None:
    """The content size the compressed format declares, when it declares it for the
    whole payload; None when only decompressing can tell."""
    if codec == COMPRESSION_LZ4:
        return _lz4_frame_size(payload)
    if codec == COMPRESSION_ZSTD:
        return _zstd_frame_size(payload)
    if codec == COMPRESSION_SNAPPY:
        if bytes(payload[:8]) != _XERIAL_MAGIC or len(payload) < len(_XERIAL_HEADER):
            return _varint_u(payload, 0)
        total, pos, end = 0, len(_XERIAL_HEADER), len(payload)
        while pos < end:
            (length,) = _INT32.unpack_from(payload, pos)
            if length <= 0 or pos + 4 + length > end:
                return None
            total += _varint_u(payload, pos + 4)
            pos += 4 + length
        return total
    return None  # gzip's trailer holds only its last member's size: decompress


def _varint_u(data: memoryview, pos: int) -> int:
    """An unsigned LEB128 varint (snappy's preamble)."""
    value = shift = 0
    while True:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value
        pos, shift = pos + 1, shift + 7
        if shift > 35:
            raise ValueError("varint too long")


def _lz4_frame_size(payload: memoryview) -> int | None:
    """LZ4 frame format: the frame's content size, if it carries one and the payload is
    exactly that one frame (walked block by block)."""
    if len(payload) < 7 or bytes(payload[:4]) != b"\x04\x22\x4d\x18":
        return None
    flg = payload[4]
    if not flg & 0x08:  # no content size
        return None
    (content_size,) = struct.unpack_from("<Q", payload, 6)
    pos = 6 + 8 + (4 if flg & 0x01 else 0) + 1  # content size, dictionary id, header crc
    block_checksum = bool(flg & 0x10)
    while True:
        (size,) = struct.unpack_from("<I", payload, pos)
        pos += 4
        if size == 0:  # EndMark
            break
        pos += (size & 0x7FFFFFFF) + (4 if block_checksum else 0)
    pos += 4 if flg & 0x04 else 0  # content checksum
    return content_size if pos == len(payload) else None


def _zstd_frame_size(payload: memoryview) -> int | None:
    """Zstandard: the frame's Frame_Content_Size, if present and the payload is exactly
    that one frame (walked block by block)."""
    if len(payload) < 6 or bytes(payload[:4]) != b"\x28\xb5\x2f\xfd":
        return None
    fhd = payload[4]
    fcs_flag, single_segment = fhd >> 6, bool(fhd & 0x20)
    dict_id_size = (0, 1, 2, 4)[fhd & 0x03]
    fcs_size = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    if fcs_size == 0:
        return None
    pos = 5 + (0 if single_segment else 1) + dict_id_size
    content_size = int.from_bytes(payload[pos : pos + fcs_size], "little")
    if fcs_size == 2:
        content_size += 256
    pos += fcs_size
    while True:
        block = int.from_bytes(payload[pos : pos + 3], "little")
        if pos + 3 > len(payload):
            return None
        pos += 3
        kind, size = (block >> 1) & 0x03, block >> 3
        if kind == 3:
            return None  # reserved
        pos += 1 if kind == 1 else size  # an RLE block is one byte on the wire
        if block & 1:
            break
    pos += 4 if fhd & 0x04 else 0  # content checksum
    return content_size if pos == len(payload) else None


def _only_batch(view: memoryview) -> tuple[int, int, BatchHeader]:
    first = next(iter_batches(view), None)
    if first is None:
        raise CorruptRecord("empty buffer: no record batch")
    if first[1] != len(view):
        raise CorruptRecord(f"buffer holds {len(view)} bytes but the batch declares {first[1]}")
    return first


def _decode_record_list(data: bytes, header: BatchHeader) -> list[Record]:
    log_append = header.timestamp_type == TIMESTAMP_LOG_APPEND_TIME
    base_offset, base_timestamp = header.base_offset, header.base_timestamp
    records = []
    pos, end = 0, len(data)
    for index in range(header.record_count):
        pos, record_end = _record_start(data, pos, end, index)
        length = record_end - pos
        pos += 1  # attributes: unused in v2
        timestamp_delta, pos = _read_varint(data, pos, record_end)
        offset_delta, pos = _read_varint(data, pos, record_end)
        key, pos = _read_bytes(data, pos, record_end)
        value, pos = _read_bytes(data, pos, record_end)
        header_count, pos = _read_varint(data, pos, record_end)
        if header_count < 0:
            raise CorruptRecord(f"record {index} has a negative header count {header_count}")
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(header_count):
            header_key, pos = _read_bytes(data, pos, record_end)
            if header_key is None:
                raise CorruptRecord(f"record {index} has a header with a null key")
            header_value, pos = _read_bytes(data, pos, record_end)
            try:
                headers.append((header_key.decode("utf-8"), header_value))
            except UnicodeDecodeError:
                raise CorruptRecord(f"record {index} has a header key that is not UTF-8") from None
        if pos != record_end:
            raise CorruptRecord(
                f"record {index} declares {length} bytes but its fields end "
                f"{pos - record_end:+d} bytes away"
            )
        timestamp = header.max_timestamp if log_append else base_timestamp + timestamp_delta
        records.append(Record(base_offset + offset_delta, timestamp, key, value, headers))
    if pos != end:
        raise CorruptRecord(f"{end - pos} bytes remain after the batch's {len(records)} records")
    return records


def _read_varint(data: bytes, pos: int, limit: int) -> tuple[int, int]:
    """A zig-zag varint (or varlong, up to 10 bytes) at `pos`; (value, next position)."""
    if pos < limit:
        byte = data[pos]
        if byte < 0x80:  # one byte: the common case for lengths and deltas
            return (byte >> 1) ^ -(byte & 1), pos + 1
    raw = shift = 0
    while True:
        if pos >= limit:
            raise CorruptRecord("record truncated inside a varint")
        byte = data[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift >= 70:
            raise CorruptRecord("varint longer than 10 bytes")


def _read_bytes(data: bytes, pos: int, limit: int) -> tuple[bytes | None, int]:
    length, pos = _read_varint(data, pos, limit)
    if length < 0:
        if length != -1:
            raise CorruptRecord(f"invalid field length {length}")
        return None, pos
    end = pos + length
    if end > limit:
        raise CorruptRecord(f"field of {length} bytes runs past the end of its record")
    return data[pos:end], end


# --- compression -------------------------------------------------------------------

# Java's snappy-java SnappyOutputStream frames raw snappy blocks ("xerial" framing);
# librdkafka and others may send plain raw snappy. We read both, write xerial.
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, min compatible 1
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size


def _decompress(codec: int, payload: memoryview) -> bytes:
    try:
        if codec == COMPRESSION_GZIP:
            return bytes(cramjam.gzip.decompress(payload))
        if codec == COMPRESSION_SNAPPY:
            return _snappy_decompress(payload)
        if codec == COMPRESSION_LZ4:
            # Magic v2 batches use the standard LZ4 frame format (KIP-57 fixed the
            # header checksum that v0/v1 got wrong).
            return bytes(cramjam.lz4.decompress(payload))
        if codec == COMPRESSION_ZSTD:
            return bytes(cramjam.zstd.decompress(payload))
    except cramjam.DecompressionError as exc:
        name = COMPRESSION_NAMES[codec]
        raise CorruptRecord(f"cannot decompress {name} records: {exc}") from exc
    raise CorruptRecord(f"unknown compression codec {codec}", error_code=INVALID_RECORD)


def _snappy_decompress(payload: memoryview) -> bytes:
    if bytes(payload[:8]) != _XERIAL_MAGIC or len(payload) < len(_XERIAL_HEADER):
        return bytes(cramjam.snappy.decompress_raw(payload))
    chunks = []
    pos, end = len(_XERIAL_HEADER), len(payload)
    while pos < end:
        if end - pos < 4:
            raise CorruptRecord("truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(payload, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise CorruptRecord(f"xerial snappy block of {length} bytes runs past the end")
        chunks.append(bytes(cramjam.snappy.decompress_raw(payload[pos : pos + length])))
        pos += length
    return b"".join(chunks)


def _compress(codec: int, data: bytes) -> bytes:
    if codec == COMPRESSION_GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == COMPRESSION_SNAPPY:
        parts = [_XERIAL_HEADER]
        for start in range(0, len(data), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
            parts += (_INT32.pack(len(block)), block)
        return b"".join(parts)
    if codec == COMPRESSION_LZ4:
        # Kafka's Lz4BlockInputStream decompresses each block on its own, so blocks must
        # be independent; cramjam's one-shot lz4.compress links them.
        compressor = cramjam.lz4.Compressor(block_linked=False, content_checksum=True)
        compressor.compress(data)
        return bytes(compressor.finish())
    if codec == COMPRESSION_ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(f"unknown compression codec {codec} (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)")


# --- encoding ----------------------------------------------------------------------


def encode_batch(
    records: Sequence[RecordInput],
    *,
    base_offset: int = 0,
    compression: int = COMPRESSION_NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = -1,
    timestamp_type: int = TIMESTAMP_CREATE_TIME,
    last_offset_delta: int | None = None,
) -> bytes:
    """Build one v2 batch with its CRC-32C, compressing the records with `compression`.

    Offset deltas must increase; gaps are kept (compaction keeps original offsets).
    `last_offset_delta` defaults to the last record's delta; compaction may pass the
    original batch's, which Kafka keeps so producer sequence state survives cleaning.
    An empty `records` gives an empty batch (base and max timestamp -1).
    """
    if compression not in COMPRESSION_NAMES:
        raise ValueError(f"unknown compression codec {compression}")
    if timestamp_type not in (TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME):
        raise ValueError("timestamp_type must be 0 (CreateTime) or 1 (LogAppendTime)")
    now_ms = time.time_ns() // 1_000_000
    body = bytearray()
    base_timestamp = max_timestamp = NO_TIMESTAMP
    previous_delta = -1
    for index, record in enumerate(records):
        offset_delta = previous_delta + 1 if record.offset_delta is None else record.offset_delta
        if not previous_delta < offset_delta <= _INT32_MAX:
            raise ValueError(
                f"record {index}: offset delta {offset_delta} must be above {previous_delta}"
            )
        previous_delta = offset_delta
        timestamp = now_ms if record.timestamp is None else record.timestamp
        if timestamp < NO_TIMESTAMP:
            raise ValueError(f"record {index}: invalid negative timestamp {timestamp}")
        if index == 0:
            base_timestamp = timestamp
        max_timestamp = max(max_timestamp, timestamp)
        _encode_record(body, offset_delta, timestamp - base_timestamp, record)
    if last_offset_delta is None:
        last_offset_delta = max(previous_delta, 0)
    elif last_offset_delta < previous_delta:
        raise ValueError(
            f"last_offset_delta {last_offset_delta} is below the last record's {previous_delta}"
        )
    payload = bytes(body)
    if compression != COMPRESSION_NONE:
        payload = _compress(compression, payload)

    attributes = (
        compression
        | (timestamp_type << 3)
        | (_TRANSACTIONAL_MASK if is_transactional else 0)
        | (_CONTROL_MASK if is_control else 0)
    )
    out = bytearray(RECORD_BATCH_OVERHEAD + len(payload))
    _HEADER.pack_into(
        out,
        0,
        base_offset,
        len(out) - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC,
        0,  # CRC, filled in below
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    out[RECORD_BATCH_OVERHEAD:] = payload
    _CRC.pack_into(out, _CRC_OFFSET, crc32c(memoryview(out)[_ATTRIBUTES_OFFSET:]))
    return bytes(out)


def _encode_record(
    out: bytearray, offset_delta: int, timestamp_delta: int, record: RecordInput
) -> None:
    body = bytearray(b"\x00")  # attributes
    _write_varint(body, timestamp_delta)
    _write_varint(body, offset_delta)
    _write_bytes(body, record.key)
    _write_bytes(body, record.value)
    _write_varint(body, len(record.headers))
    for header_key, header_value in record.headers:
        _write_bytes(
            body, header_key.encode("utf-8") if isinstance(header_key, str) else header_key
        )
        _write_bytes(body, header_value)
    _write_varint(out, len(body))
    out += body


def _write_varint(out: bytearray, value: int) -> None:
    """Append `value` as a zig-zag varint (varlong for 64-bit values)."""
    raw = (value << 1) ^ (value >> 63)
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def _write_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        _write_varint(out, -1)
        return
    _write_varint(out, len(value))
    out += value
