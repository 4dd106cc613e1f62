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

    Each frame is copied once: frames whole in what was fed are sliced out of it, and a
    frame spread over several feeds (a produce request of a MiB arrives in many socket
    reads) is held as its pieces — views of the bytes fed, which never change — and
    joined when its last piece arrives, never gathered into a buffer and copied out again.
    """

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._head = bytearray()  # the first bytes of a size prefix (fewer than 4)
        self._parts: list[bytes | memoryview] = []  # the frame under way, as received
        self._have = 0  # its bytes received
        self._size = -1  # its size (-1: none under way)

    @property
    def buffered_bytes(self) -> int:
        """Bytes received but not yet returned as a frame (for backpressure decisions)."""
        return len(self._head) + (4 + self._have if self._size >= 0 else 0)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        view = memoryview(data)
        if view.ndim != 1 or view.itemsize != 1:
            view = view.cast("B")
        # Only immutable bytes may be held as views; the caller may reuse anything else.
        immutable = isinstance(data, bytes)
        frames: list[bytes] = []
        pos, end = 0, len(view)
        while pos < end:
            if self._size >= 0:  # a frame under way: what this data holds of it
                take = min(self._size - self._have, end - pos)
                piece = view[pos : pos + take]
                self._parts.append(piece if immutable else piece.tobytes())
                self._have += take
                pos += take
                if self._have == self._size:
                    frames.append(b"".join(self._parts))
                    self._parts = []
                    self._size = -1
                continue
            if self._head or end - pos < 4:  # a size prefix split between feeds
                take = min(4 - len(self._head), end - pos)
                self._head += view[pos : pos + take]
                pos += take
                if len(self._head) < 4:
                    break
                (size,) = _SIZE.unpack(self._head)
                self._head.clear()
                self._start(size, frames)
                continue
            (size,) = _SIZE.unpack_from(view, pos)
            if 0 <= size <= end - pos - 4:  # whole here: one copy out of the caller's bytes
                frames.append(view[pos + 4 : pos + 4 + size].tobytes())
                pos += 4 + size
                continue
            pos += 4
            self._start(size, frames)
        return frames

    def _start(self, size: int, frames: list[bytes]) -> None:
        if size < 0 or size > self.max_frame_bytes:
            raise FrameTooLarge(f"frame size {size} outside 0..{self.max_frame_bytes} bytes")
        if size == 0:
            frames.append(b"")
            return
        self._size = size
        self._have = 0
