"""The cluster's Schema Registry as a pipeline's Avro processors need it
(`core.pipelines.SchemaSource`), asked from the pipeline's own thread: each question is
handed to the agent's event loop (where its registry client and cache live) and waited
for, at most `SCHEMA_TIMEOUT_S`."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from agents.schema_registry.registry import SchemaRegistry

SCHEMA_TIMEOUT_S = 10.0
_T = TypeVar("_T")


class RegistrySchemas:
    """`schema_by_id(id)` and `latest(subject)`, blocking, for threads other than the loop's."""

    def __init__(self, registry: SchemaRegistry, loop: asyncio.AbstractEventLoop) -> None:
        self.registry = registry
        self.loop = loop

    def _run(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(SCHEMA_TIMEOUT_S)

    def schema_by_id(self, id: int) -> str:
        _, parsed = self._run(self.registry.by_id(id))
        return parsed.text

    def latest(self, subject: str) -> tuple[int, str]:
        entry = self._run(self.registry.version(subject, None))
        schema_id = int(entry["id"])
        return schema_id, self.schema_by_id(schema_id)
