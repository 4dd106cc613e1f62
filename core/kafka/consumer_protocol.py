"""The consumer protocol carried inside group membership messages.

To the group coordinator, JoinGroup protocol metadata and SyncGroup assignments are
opaque bytes it passes between members. When the group's protocol type is
``"consumer"`` they follow Kafka's ``ConsumerProtocolSubscription`` and
``ConsumerProtocolAssignment`` (``clients/src/main/resources/common/message/``), never
flexible, with a leading int16 version. Floe reads only two facts from them: the topics
a member subscribes to (OffsetDelete refuses subscribed topics, KIP-496) and the
partitions each member was given (shown by the console and the REST API).

Newer versions only append fields, so reading the leading fields works for all of them.
"""

from __future__ import annotations

import struct

PROTOCOL_TYPE = "consumer"

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class MalformedConsumerProtocol(ValueError):
    """The bytes are not a consumer-protocol subscription or assignment."""


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, data: bytes) -> None:
        self.buf = memoryview(data)
        self.pos = 0

    def int16(self) -> int:
        value: int = _INT16.unpack_from(self.buf, self.pos)[0]
        self.pos += 2
        return value

    def int32(self) -> int:
        value: int = _INT32.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        return value

    def string(self) -> str:
        length = self.int16()
        if length < 0 or self.pos + length > len(self.buf):
            raise MalformedConsumerProtocol(f"string length {length}")
        value = str(self.buf[self.pos : self.pos + length], "utf-8")
        self.pos += length
        return value

    def count(self) -> int:
        n = self.int32()
        if n < -1 or n > len(self.buf):  # -1: a null array, read as empty
            raise MalformedConsumerProtocol(f"array length {n}")
        return max(n, 0)


def subscription_topics(metadata: bytes) -> list[str]:
    """The topics of a ``ConsumerProtocolSubscription`` (version, topics, user data, …)."""
    reader = _Reader(metadata)
    try:
        reader.int16()  # version
        return [reader.string() for _ in range(reader.count())]
    except (struct.error, UnicodeDecodeError) as exc:
        raise MalformedConsumerProtocol(str(exc)) from None


def assignment_partitions(assignment: bytes) -> dict[str, list[int]]:
    """Topic → partitions of a ``ConsumerProtocolAssignment``; empty bytes mean nothing."""
    if not assignment:
        return {}
    reader = _Reader(assignment)
    try:
        reader.int16()  # version
        assigned: dict[str, list[int]] = {}
        for _ in range(reader.count()):
            topic = reader.string()
            partitions = [reader.int32() for _ in range(reader.count())]
            assigned.setdefault(topic, []).extend(partitions)
        return assigned
    except (struct.error, UnicodeDecodeError) as exc:
        raise MalformedConsumerProtocol(str(exc)) from None
