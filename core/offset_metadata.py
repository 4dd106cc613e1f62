"""A committed offset's metadata across the agent API. Kafka's offset metadata is any
string — librdkafka sends its C strings with their NUL terminator, and its tests put a
NUL inside — while the agent API's JSON strings may hold no NUL (PostgreSQL's text
cannot). So a metadata string travels as `metadata` when it has no NUL, else as
`metadata_b64` (its UTF-8 bytes, base64); the metadata store keeps the bytes."""

from __future__ import annotations

import base64
import binascii
from typing import Any

NUL = "\x00"


def metadata_fields(text: str | None) -> dict[str, str]:
    """The agent-API fields that carry `text` (None: Kafka's null, stored as empty)."""
    if text and NUL in text:
        return {"metadata_b64": base64.b64encode(text.encode()).decode("ascii")}
    return {"metadata": text or ""}


def metadata_bytes(entry: dict[str, Any]) -> bytes:
    """The bytes an entry's fields carry (`metadata_b64` wins; it must be valid base64)."""
    encoded = entry.get("metadata_b64")
    if encoded is not None:
        try:
            return base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"metadata_b64 is not base64: {exc}") from None
    return str(entry.get("metadata") or "").encode()


def metadata_text(entry: dict[str, Any]) -> str:
    """The metadata string an answer's entry carries (bytes not UTF-8 come back with
    U+FFFD: Kafka's metadata is a UTF-8 string, and only such ever went in)."""
    return metadata_bytes(entry).decode("utf-8", "replace")


def stored_fields(stored: bytes | memoryview) -> dict[str, str]:
    """The answer's fields for metadata the store holds as bytes."""
    return metadata_fields(bytes(stored).decode("utf-8", "replace"))
