"""A pipeline's outputs other than topics: JSON-lines files in the cluster's bucket and
an HTTP endpoint. Both run in the pipeline's own thread (blocking I/O, bounded).

Bucket files: each input partition's records collect in a buffer until `max_records` or
`max_age_seconds`, then one PUT; the input offsets are committed only after it. The
object's name is fixed by the pipeline, the input partition and the buffer's FIRST input
offset (zero-padded, so names sort by offset): a replay after a crash starts at that
offset (the committed one) and PUTs the same name, overwriting instead of doubling. The
last offset is inside the file, not in its name — where a buffer ends depends on the
clock (`max_age_seconds`), and a replay cut at another record would otherwise leave
two objects holding the same records.

HTTP: one POST per record, `Floe-Source: topic/partition/offset` so the receiver can
drop a replayed record, each attempt bounded by the output's `timeout_seconds`, retried
with a growing pause; a record that still fails fails its batch (nothing committed, the
batch is read again).
"""

from __future__ import annotations

import base64
import http.client
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from core.storage import ObjectStore

HTTP_ATTEMPTS = 5
HTTP_FIRST_PAUSE_S = 0.2
HTTP_MAX_PAUSE_S = 5.0


class OutputError(Exception):
    """An output did not accept a record; its batch is not committed."""


def _text_or_base64(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def json_line(
    *,
    topic: str,
    partition: int,
    offset: int,
    timestamp_ms: int,
    key: bytes | None,
    value: bytes | None,
    headers: tuple[tuple[str, bytes], ...],
) -> bytes:
    """One record as a JSON-lines line: its source, timestamp, key, headers and value —
    the value as JSON when its bytes are a JSON document (what `encode_json` makes),
    else as text, else base64 (`{"base64": …}`)."""
    decoded: Any
    try:
        decoded = json.loads(value) if value is not None else None
    except ValueError:
        decoded = _text_or_base64(value)
    line = {
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "timestamp": timestamp_ms,
        "key": _text_or_base64(key),
        "headers": {k: _text_or_base64(v) for k, v in headers},
        "value": decoded,
    }
    return json.dumps(line, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"


@dataclass
class _Buffer:
    first_offset: int
    started: float
    lines: list[bytes] = field(default_factory=list)
    last_offset: int = -1


class BucketFiles:
    """The buffers of one bucket output, by input partition."""

    def __init__(
        self,
        store: ObjectStore,
        *,
        prefix: str,
        pipeline: str,
        max_records: int,
        max_age_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.prefix = prefix
        self.pipeline = pipeline
        self.max_records = max(1, max_records)
        self.max_age_s = max(0.0, max_age_s)
        self.clock = clock
        self.buffers: dict[tuple[str, int], _Buffer] = {}
        self.objects_written = 0

    def object_key(self, topic: str, partition: int, first_offset: int) -> str:
        """The object a buffer starting at `first_offset` becomes (and a replay of it)."""
        return f"{self.prefix}{self.pipeline}/{topic}/{partition}/{first_offset:020d}.jsonl"

    def add(self, topic: str, partition: int, offset: int, line: bytes) -> None:
        """Buffer one line of input record (topic, partition, offset); PUT when full."""
        buffer = self.buffers.get((topic, partition))
        if buffer is None:
            buffer = self.buffers[(topic, partition)] = _Buffer(offset, self.clock())
        buffer.lines.append(line)
        buffer.last_offset = offset
        if len(buffer.lines) >= self.max_records:
            self.flush(topic, partition)

    def pending_from(self, topic: str, partition: int) -> int | None:
        """The first input offset not yet in the bucket (None: nothing buffered)."""
        buffer = self.buffers.get((topic, partition))
        return buffer.first_offset if buffer is not None else None

    def flush(self, topic: str, partition: int) -> None:
        buffer = self.buffers.pop((topic, partition), None)
        if buffer is None or not buffer.lines:
            return
        try:
            self.store.put(
                self.object_key(topic, partition, buffer.first_offset), b"".join(buffer.lines)
            )
        except Exception as exc:
            self.buffers[(topic, partition)] = buffer  # kept: the next flush tries again
            raise OutputError(f"bucket PUT failed: {exc}") from exc
        self.objects_written += 1

    def flush_due(self) -> bool:
        """PUT every buffer older than `max_age_seconds`; whether any was."""
        now = self.clock()
        due = [tp for tp, b in self.buffers.items() if now - b.started >= self.max_age_s]
        for topic, partition in due:
            self.flush(topic, partition)
        return bool(due)

    def flush_all(self) -> None:
        for topic, partition in list(self.buffers):
            self.flush(topic, partition)

    def drop(self, topic: str, partition: int) -> None:
        """Forget a partition's buffer (it was revoked: its offsets were not committed
        past it, so its next owner writes the same object)."""
        self.buffers.pop((topic, partition), None)


class HttpPoster:
    """POSTs records to one URL over a kept-alive connection (one thread uses it)."""

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float,
        stopping: threading.Event | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise OutputError(f"not an http(s) URL: {url!r}")
        self.url = url
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port
        self.path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self.timeout_s = timeout_s
        self.stopping = stopping or threading.Event()
        self.sleep = sleep
        self._conn: http.client.HTTPConnection | None = None

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            kind = (
                http.client.HTTPSConnection
                if self.scheme == "https"
                else http.client.HTTPConnection
            )
            self._conn = kind(self.host, self.port, timeout=self.timeout_s)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def post(self, body: bytes, headers: dict[str, str]) -> None:
        """POST until a 2xx (a 4xx other than 408/429 is final), `HTTP_ATTEMPTS` times."""
        pause = HTTP_FIRST_PAUSE_S
        problem = ""
        for attempt in range(HTTP_ATTEMPTS):
            try:
                conn = self._connection()
                conn.request("POST", self.path, body=body, headers=headers)
                response = conn.getresponse()
                response.read()
                if 200 <= response.status < 300:
                    return
                problem = f"HTTP {response.status} from {self.url}"
                if 400 <= response.status < 500 and response.status not in (408, 429):
                    break
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                problem = f"POST {self.url}: {type(exc).__name__}: {exc}"
            if attempt < HTTP_ATTEMPTS - 1:
                if self.stopping.is_set():
                    break
                self.sleep(pause)
                pause = min(pause * 2, HTTP_MAX_PAUSE_S)
        raise OutputError(problem)
