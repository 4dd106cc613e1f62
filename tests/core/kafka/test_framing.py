"""FrameDecoder: the byte stream is cut into frames however it arrives."""

from __future__ import annotations

import pytest

from core.kafka import FrameDecoder, FrameTooLarge, ProtocolViolation, encode_request
from tests.core.kafka.wire import framed, i32


def _requests(count: int) -> list[bytes]:
    return [
        encode_request(18, 3, n, f"client-{n}", {"client_software_name": "x" * n})
        for n in range(count)
    ]


def test_it_returns_frames_without_their_size_prefix():
    assert FrameDecoder().feed(framed(b"hello")) == [b"hello"]


def test_a_byte_at_a_time_feed_yields_each_frame_once_complete():
    wire = _requests(5)
    decoder = FrameDecoder()
    frames = []
    for byte in b"".join(wire):
        frames += decoder.feed(bytes([byte]))
    assert frames == [w[4:] for w in wire]
    assert decoder.buffered_bytes == 0


def test_several_frames_in_one_feed():
    wire = _requests(4)
    assert FrameDecoder().feed(b"".join(wire)) == [w[4:] for w in wire]


def test_frames_split_across_feeds_at_every_position():
    stream = b"".join(_requests(3))
    for cut in range(len(stream) + 1):
        decoder = FrameDecoder()
        frames = decoder.feed(stream[:cut]) + decoder.feed(memoryview(stream)[cut:])
        assert len(frames) == 3, cut


def test_a_partial_frame_waits_for_the_rest():
    decoder = FrameDecoder()
    assert decoder.feed(i32(10) + b"12345") == []
    assert decoder.buffered_bytes == 9
    assert decoder.feed(b"67890" + i32(1)) == [b"1234567890"]
    assert decoder.feed(b"!") == [b"!"]


def test_an_empty_frame_is_a_frame():
    assert FrameDecoder().feed(i32(0) + framed(b"x")) == [b"", b"x"]


def test_an_oversized_size_prefix_is_refused_before_its_body_arrives():
    decoder = FrameDecoder(max_frame_bytes=1024)
    assert decoder.feed(framed(b"a" * 1024)) == [b"a" * 1024]
    with pytest.raises(FrameTooLarge) as excinfo:
        decoder.feed(i32(1025))
    assert isinstance(excinfo.value, ProtocolViolation)
    assert excinfo.value.header is None


def test_a_negative_size_prefix_is_refused():
    with pytest.raises(FrameTooLarge):
        FrameDecoder().feed(i32(-1))


def test_the_default_limit_is_100_mib():
    decoder = FrameDecoder()
    assert decoder.feed(i32(100 * 1024 * 1024)) == []
    with pytest.raises(FrameTooLarge):
        FrameDecoder().feed(i32(100 * 1024 * 1024 + 1))


def test_bytearray_and_memoryview_input():
    decoder = FrameDecoder()
    assert decoder.feed(bytearray(framed(b"ab"))) == [b"ab"]
    assert decoder.feed(memoryview(framed(b"cd"))) == [b"cd"]
