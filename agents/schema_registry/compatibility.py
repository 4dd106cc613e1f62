"""Confluent's compatibility levels over each type's "can the reader read the writer's
data" rule: BACKWARD — the new schema reads data written with the old; FORWARD — the
old reads the new's; FULL — both; the `_TRANSITIVE` levels against every earlier
version, the others against the latest only; NONE — no check."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agents.schema_registry import avro_compat, json_compat, protobuf_compat
from core.schemas.formats import ParsedSchema

_RULES: dict[str, Callable[[ParsedSchema, ParsedSchema], list[str]]] = {
    "AVRO": avro_compat.can_read,
    "JSON": json_compat.can_read,
    "PROTOBUF": protobuf_compat.can_read,
}


def incompatibilities(level: str, new: ParsedSchema, existing: Sequence[ParsedSchema]) -> list[str]:
    """What makes `new` break `level` against `existing` (oldest first). Empty:
    compatible."""
    level = level.upper()
    if level == "NONE" or not existing:
        return []
    against = list(existing) if level.endswith("_TRANSITIVE") else [existing[-1]]
    base = level.removesuffix("_TRANSITIVE")
    problems: list[str] = []
    for old in against:
        if old.schema_type != new.schema_type:
            problems.append(f"the schema type changed from {old.schema_type}")
            continue
        can_read = _RULES.get(new.schema_type)
        if can_read is None:
            problems.append(
                f"compatibility rules for {new.schema_type} are not implemented yet: set the "
                "subject's compatibility to NONE to register another version"
            )
            continue
        if base in ("BACKWARD", "FULL"):
            problems += [f"BACKWARD: {p}" for p in can_read(new, old)]
        if base in ("FORWARD", "FULL"):
            problems += [f"FORWARD: {p}" for p in can_read(old, new)]
    return problems
