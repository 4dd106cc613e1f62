"""What flows through a pipeline: the records it reads, what it emits, a record's error,
and where Avro schemas come from."""

from __future__ import annotations

from typing import NamedTuple, Protocol

# The records are named tuples, not frozen dataclasses: as immutable, and built four times
# faster (a frozen dataclass sets each field through object.__setattr__) — one of each is
# made per record.


class InRecord(NamedTuple):
    """A record read from the input (a topic's record, or one POSTed over HTTP)."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


class Emit(NamedTuple):
    """A record for the output named `output` (`config.DEAD_LETTER` for the dead-letter
    topic)."""

    output: str
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp_ms: int


class RecordError(Exception):
    """A record that a processor could not handle: `processor` is its index in the
    configuration's `processors` (-1: after them, writing the value out)."""

    def __init__(self, message: str, processor: int) -> None:
        super().__init__(message)
        self.message = message
        self.processor = processor

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RecordError) and (self.message, self.processor) == (
            other.message,
            other.processor,
        )

    def __hash__(self) -> int:
        return hash((self.message, self.processor))

    def __reduce__(self) -> tuple[type[RecordError], tuple[str, int]]:
        return (RecordError, (self.message, self.processor))  # pickles whole

    def __repr__(self) -> str:
        return f"RecordError({self.message!r}, processor={self.processor})"


class SchemaSource(Protocol):
    """The cluster's Schema Registry as the Avro processors need it."""

    def schema_by_id(self, id: int) -> str:
        """The schema text (Avro JSON) registered under `id`; raises when unknown."""
        ...

    def latest(self, subject: str) -> tuple[int, str]:
        """The id and text of the subject's latest version; raises when unknown."""
        ...
