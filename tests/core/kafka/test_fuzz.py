"""Whatever bytes arrive, decoding either succeeds or raises a ProtocolViolation
(UnsupportedVersion included): never IndexError, struct.error, MemoryError..."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.kafka import (
    SUPPORTED_VERSIONS,
    FrameDecoder,
    ProtocolViolation,
    decode_request,
    encode_request,
)
from core.kafka.messages import APIS
from tests.core.kafka.samples import sample_body

# One valid frame per API and version (values and nulls), to mutate.
VALID_FRAMES = [
    encode_request(
        api_key, version, 7, "fuzz", sample_body(APIS[api_key].request, version, nulls=nulls)
    )[4:]
    for api_key, (lo, hi) in SUPPORTED_VERSIONS.items()
    for version in range(lo, hi + 1)
    for nulls in (False, True)
]

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _decode_or_violation(frame: bytes) -> None:
    try:
        header, body = decode_request(frame)
    except ProtocolViolation:
        return
    assert isinstance(body, dict)
    assert header.api_key in SUPPORTED_VERSIONS


@FUZZ
@given(st.binary(max_size=512))
def test_random_bytes(frame):
    _decode_or_violation(frame)


@FUZZ
@given(st.binary(max_size=64), st.sampled_from(list(SUPPORTED_VERSIONS)), st.integers(-2, 20))
def test_random_bodies_behind_a_plausible_header(body, api_key, version):
    header = api_key.to_bytes(2, "big") + version.to_bytes(2, "big", signed=True)
    _decode_or_violation(header + b"\x00\x00\x00\x01\x00\x01c" + body)


@st.composite
def mutated_frames(draw):
    frame = bytearray(draw(st.sampled_from(VALID_FRAMES)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "cut", "insert", "delete"]))
        pos = draw(st.integers(0, max(len(frame) - 1, 0)))
        if kind == "flip" and frame:
            frame[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and frame:
            frame[pos] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]))
        elif kind == "cut":
            del frame[pos:]
        elif kind == "insert":
            frame[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del frame[pos : pos + draw(st.integers(1, 8))]
    return bytes(frame)


@FUZZ
@given(mutated_frames())
def test_mutated_valid_frames(frame):
    _decode_or_violation(frame)


@FUZZ
@given(st.lists(st.integers(1, 64), max_size=20), st.binary(max_size=1024))
def test_frame_decoder_is_indifferent_to_chunking(chunks, noise):
    stream = b"".join(len(f).to_bytes(4, "big") + f for f in VALID_FRAMES[:5]) + noise[:3]
    decoder = FrameDecoder()
    frames = []
    pos = 0
    for size in [*chunks, len(stream)]:
        frames += decoder.feed(stream[pos : pos + size])
        pos += size
    assert frames == VALID_FRAMES[:5]
