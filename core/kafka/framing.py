"""Splitting a TCP byte stream into Kafka frames (sans-IO, like h11).

Every Kafka request and response is an int32 big-endian size followed by
that many bytes (https://kafka.apache.org/protocol#protocol_common).
"""

from __future__ import annotations

import struct

from .errors import FrameTooLarge

_SIZE = struct.Struct(">i")

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes


class FrameDecoder:
    """Feed it bytes as they arrive; get back complete frames without their size prefix.

    >>> decoder = FrameDecoder()
    >>> decoder.feed(b"\\x00\\x00\\x00\\x02hi\\x00\\x00")
    [b'hi']
    >>> decoder.feed(b"\\x00\\x01!")
    [b'!']

    A negative size, or one above ``max_frame_bytes``, raises FrameTooLarge as
    soon as its prefix arrives; the connection is then unusable.
    """

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._pending = bytearray()

    @property
    def buffered_bytes(self) -> int:
        """Bytes received but not yet returned as a frame (for backpressure decisions)."""
        return len(self._pending)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        if not self._pending:
            # Common case: frames straight out of the caller's buffer, one copy each.
            frames, consumed = self._split(data)
            if consumed < len(data):
                with memoryview(data) as view:
                    self._pending += view[consumed:]
            return frames
        self._pending += data
        frames, consumed = self._split(self._pending)
        del self._pending[:consumed]
        return frames

    def _split(self, data: bytes | bytearray | memoryview) -> tuple[list[bytes], int]:
        frames = []
        pos = 0
        with memoryview(data) as view:
            end_of_data = len(view)
            while end_of_data - pos >= 4:
                (size,) = _SIZE.unpack_from(view, pos)
                if size < 0 or size > self.max_frame_bytes:
                    raise FrameTooLarge(
                        f"frame size {size} outside 0..{self.max_frame_bytes} bytes"
                    )
                end = pos + 4 + size
                if end > end_of_data:
                    break
                frames.append(view[pos + 4 : end].tobytes())
                pos = end
        return frames, pos
