"""Schema validation at produce (Confluent's `confluent.value.schema.validation` and
`confluent.key.schema.validation` topic configs): every record's value (key) must be in
Confluent's wire format — magic byte 0, then a 4-byte schema id — naming a schema
registered under the subject the topic's subject-name strategy gives.

Which subjects use an id is cached per id (for the registry's `id_ttl_s`, a minute by
default, when the subject is among them; a second when not, so a schema registered a
moment ago is seen at once), so validation costs no control-plane call per batch in the
steady state.
"""

from __future__ import annotations

import time
from typing import Any

from agents.schema_registry.registry import RestError, SchemaRegistry
from core.kafka.records import CorruptRecord, distinct_prefixes

_STRATEGY = "io.confluent.kafka.serializers.subject."
_MISSING_TTL_S = 1.0
_CACHE_ENTRIES = 10_000


def validated_fields(configs: dict[str, Any]) -> tuple[str, ...]:
    """Which of "key" and "value" a topic's configs ask to validate."""
    return tuple(
        part
        for part in ("key", "value")
        if str(configs.get(f"confluent.{part}.schema.validation", "false")).lower() == "true"
    )


class ValidationUnavailable(Exception):
    """The registry could not be asked (the control plane away): try again later."""


class SchemaValidator:
    """Checks produced batches against a cluster's registry."""

    def __init__(self, registry: SchemaRegistry) -> None:
        self._registry = registry
        self._subjects: dict[int, tuple[float, frozenset[str]]] = {}
        # (topic, part, strategy, framing) → until when it passes: a batch whose framing
        # passed a moment ago is checked without an await.
        self._passes: dict[tuple[str, str, str, bytes], float] = {}

    async def _subject_for(self, topic: str, part: str, schema_id: int, strategy: str) -> str:
        if strategy.removeprefix(_STRATEGY) == "TopicNameStrategy":
            return f"{topic}-{part}"
        _, schema = await self._registry.by_id(schema_id)
        parsed = schema.parsed
        name = (
            str(parsed.get("name") or parsed.get("title") or "") if isinstance(parsed, dict) else ""
        )
        if strategy.removeprefix(_STRATEGY) == "TopicRecordNameStrategy":
            return f"{topic}-{name}"
        return name

    async def _registered(self, schema_id: int, subject: str) -> bool:
        cached = self._subjects.get(schema_id)
        if cached is None or cached[0] < time.monotonic():
            try:
                answer = await self._registry.call("schema_uses", {"id": schema_id})
                subjects = frozenset(u["subject"] for u in answer["uses"])
            except RestError as exc:
                if exc.error_code != 40403:
                    raise ValidationUnavailable(str(exc)) from None
                subjects = frozenset()
            ttl = self._registry.id_ttl_s if subject in subjects else _MISSING_TTL_S
            if len(self._subjects) > _CACHE_ENTRIES:
                self._subjects.clear()
            cached = self._subjects[schema_id] = (time.monotonic() + ttl, subjects)
        return subject in cached[1]

    async def problem(
        self, topic: str, configs: dict[str, Any], parts: tuple[str, ...], batches: list[memoryview]
    ) -> tuple[int, str] | None:
        """(index of the first refused record in its batch, why), or None: all pass.

        Each batch is read once per part for its distinct framings (`distinct_prefixes`:
        a serializer's batch has one); a framing that passed passes again without a
        question for as long as its id's subjects are cached."""
        strategies = {
            part: str(configs.get(f"confluent.{part}.subject.name.strategy") or "TopicNameStrategy")
            for part in parts
        }
        now = time.monotonic()
        for batch in batches:
            refused: list[tuple[int, str]] = []
            for part in parts:
                try:
                    framings = distinct_prefixes(batch, size=5, key=part == "key")
                except CorruptRecord as exc:
                    return 0, str(exc)
                for framing, index in framings.items():
                    known = (topic, part, strategies[part], framing or b"")
                    if self._passes.get(known, 0.0) > now:
                        continue
                    why = await self._check(topic, part, framing, strategies[part])
                    if why is not None:
                        refused.append((index, why))
                        continue
                    if len(self._passes) > _CACHE_ENTRIES:
                        self._passes.clear()
                    # As long as the id's subjects are cached: a deletion is seen as soon.
                    assert framing is not None  # it passed: it is framed
                    self._passes[known] = self._subjects[int.from_bytes(framing[1:5], "big")][0]
            if refused:
                return min(refused)
        return None

    async def _check(self, topic: str, part: str, data: bytes | None, strategy: str) -> str | None:
        if data is None or len(data) < 5 or data[0] != 0:
            return (
                f"the record's {part} is not in the schema registry's wire format "
                "(magic byte 0 and a schema id)"
            )
        schema_id = int.from_bytes(data[1:5], "big")
        try:
            subject = await self._subject_for(topic, part, schema_id, strategy)
        except RestError as exc:
            if exc.error_code != 40403:
                raise ValidationUnavailable(str(exc)) from None
            return f"the record's {part} names schema id {schema_id}, which is not registered"
        if not await self._registered(schema_id, subject):
            return (
                f"the record's {part} names schema id {schema_id}, which is not registered "
                f"under subject {subject!r}"
            )
        return None
