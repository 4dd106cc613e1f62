"""Fetch requests decoded once for every consumer that sends the same bytes (issue 44).

Consumers of many groups tailing a topic send the same Fetch — the same partitions at the
same offsets, byte for byte but for the correlation id (and librdkafka's rotating
partition order, a handful of variants) —, each after every commit. Decoding one is a
walk of every topic and partition through the schema; here the decoded body is kept under
the request's bytes without its correlation id, and an identical request takes it with a
header of its own. The body is shared by every request that decoded to it: the Fetch path
(`handlers/fetch.py`, `read_path.py`, the ACL check) only reads it.
"""

from __future__ import annotations

import struct
from typing import Any

from core.kafka import ApiKey, RequestHeader, decode_request

MAX_ENTRIES = 1024
_FETCH = ApiKey.FETCH.to_bytes(2, "big")  # a request frame starts with its api key
_CORRELATION = struct.Struct(">i")  # after the api key and version


class FetchRequests:
    """`decode(frame)`: `decode_request`, from memory for a Fetch seen before."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self._decoded: dict[bytes, tuple[RequestHeader, dict[str, Any]]] = {}

    def __len__(self) -> int:
        return len(self._decoded)

    def decode(self, frame: bytes) -> tuple[RequestHeader, dict[str, Any]]:
        """The frame's header and body; raises as `decode_request` does."""
        if frame[:2] != _FETCH or len(frame) < 8:
            return decode_request(frame)
        key = frame[:4] + frame[8:]
        known = self._decoded.get(key)
        if known is not None:
            header, body = known
            (correlation_id,) = _CORRELATION.unpack_from(frame, 4)
            return (
                RequestHeader(header.api_key, header.api_version, correlation_id, header.client_id),
                body,
            )
        header, body = decode_request(frame)
        if len(self._decoded) >= self.max_entries:  # the oldest out
            del self._decoded[next(iter(self._decoded))]
        self._decoded[key] = header, body
        return header, body
