"""The agent's side of the registry: schema texts in the bucket, everything else through
the control plane's `registry/…` calls, and the compatibility check between them.

Texts are content-addressed (``<cluster>/_schemas/<fingerprint>.json``), so a text is
written before its id exists and never changes: parsed texts are cached without expiry.
An id names one schema for as long as it exists, but a permanent delete ends it (40403
from then on, and IMPORT mode may give the number to another schema): an id is trusted
for `id_ttl_s` (`--schema-cache`, 60 s), and forgotten at once by the agent that
deleted. Compatibility is checked here (the control plane never reads a
text), against the subject's versions as the control plane last answered; the
registration names the latest version it checked, and is checked again if another
registration got in first.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, TypeVar, TypeVarTuple

from agents.control_plane import ControlPlaneClient, ControlPlaneError
from agents.schema_registry import compatibility
from core.schemas.formats import InvalidSchema, ParsedSchema, parse, sent_as_descriptor
from core.storage import ObjectNotFound, ObjectStore

log = logging.getLogger(__name__)
_T = TypeVar("_T")
_Args = TypeVarTuple("_Args")

MAX_REFERENCE_DEPTH = 10
REGISTER_ATTEMPTS = 8
_CACHE_ENTRIES = 10_000
MAX_VERSION = 2**31 - 1


class RestError(Exception):
    """An answer to the REST client: Confluent's `error_code`, and the HTTP status it
    implies (its first three digits)."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code

    @property
    def status(self) -> int:
        code = self.error_code
        return code if code < 1000 else int(str(code)[:3])  # 42901 → 429


def parse_version(text: str) -> int | None:
    """A version in a URL: a number, or "latest" / -1 (None)."""
    if text in ("latest", "-1"):
        return None
    try:
        number = int(text)
    except ValueError:
        number = 0
    if not 1 <= number <= MAX_VERSION:
        raise RestError(
            42202,
            f"The specified version '{text}' is not a valid version id. Allowed values are "
            f'between [1, {MAX_VERSION}] and the string "latest"',
        )
    return number


class SchemaRegistry:
    """One cluster's registry as this agent serves it."""

    def __init__(
        self,
        client: ControlPlaneClient,
        store: ObjectStore,
        *,
        cluster_id: str,
        executor: Executor | None = None,
        id_ttl_s: float = 60.0,
    ) -> None:
        self._client = client
        self._store = store
        self._prefix = f"{cluster_id}/_schemas/"
        self._executor = executor
        self.id_ttl_s = id_ttl_s
        self._parsed: dict[str, ParsedSchema] = {}  # fingerprint → schema
        # id → (until when it is trusted, the control plane's answer)
        self._ids: dict[int, tuple[float, dict[str, Any]]] = {}

    # --- the control plane and the bucket ------------------------------------------------

    async def call(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            answer = await self._client.call_with_retries(f"registry/{name}", body, timeout_s=10)
        except ControlPlaneError as exc:
            log.warning("schema registry: registry/%s failed: %s", name, exc)
            raise RestError(50001, f"Error in the backend data store: {exc}") from None
        if "error_code" in answer:
            raise RestError(int(answer["error_code"]), str(answer.get("message") or ""))
        return answer

    async def _blocking(self, function: Callable[[*_Args], _T], *args: *_Args) -> _T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, function, *args)

    async def _put_text(self, schema: ParsedSchema) -> None:
        """Store the schema's document under its fingerprint (and cache it parsed). A
        Protobuf schema sent as a descriptor does not replace the same schema stored as
        `.proto` text: the text a person wrote is what the registry answers and the
        console shows."""
        key = f"{self._prefix}{schema.fingerprint}.json"
        if sent_as_descriptor(schema):
            try:
                await self.document(schema.fingerprint)
                return  # stored already, in either form: the schema is the same
            except RestError:
                pass  # not stored yet
        body = json.dumps(schema.document(), separators=(",", ":")).encode()
        await self._blocking(self._store.put, key, body)
        self._remember(schema)

    async def schema_for(self, fingerprint: str, depth: int = 0) -> ParsedSchema:
        """The parsed schema of a fingerprint, from the bucket (cached)."""
        cached = self._parsed.get(fingerprint)
        if cached is not None:
            return cached
        document = await self.document(fingerprint)
        references = _references(document.get("references") or [])
        # In the executor: a Protobuf text is compiled by protoc in a child process.
        parsed = await self._blocking(
            parse,
            document["schema"],
            document.get("schemaType", "AVRO"),
            references,
            await self._referenced(references, depth + 1),
        )
        self._remember(parsed)
        return parsed

    async def document(self, fingerprint: str) -> dict[str, Any]:
        """The stored document of a fingerprint (``schema``, ``schemaType``,
        ``references``), read from the bucket: what the console's Schemas page shows."""
        try:
            raw = await self._blocking(self._store.get, f"{self._prefix}{fingerprint}.json")
        except ObjectNotFound:
            raise RestError(
                50001, f"schema text {fingerprint} is missing from the bucket"
            ) from None
        document = json.loads(raw)
        if not isinstance(document, dict):
            raise RestError(50001, f"schema text {fingerprint} in the bucket is not an object")
        return document

    def _remember(self, schema: ParsedSchema) -> None:
        if len(self._parsed) > _CACHE_ENTRIES:
            self._parsed.clear()
        self._parsed[schema.fingerprint] = schema

    async def _referenced(
        self, references: tuple[tuple[str, str, int], ...], depth: int
    ) -> list[ParsedSchema]:
        if depth > MAX_REFERENCE_DEPTH:
            raise RestError(
                42201, f"Invalid schema: references nested over {MAX_REFERENCE_DEPTH} deep"
            )
        found = []
        for name, subject, version in references:
            try:
                entry = await self.version(subject, version, deleted=True)
            except RestError as exc:
                if exc.error_code in (40401, 40402):
                    raise RestError(
                        42201,
                        f"Invalid schema: reference {name!r} ({subject} v{version}) not found",
                    ) from None
                raise
            found.append(await self.schema_for(entry["fingerprint"], depth))
        return found

    # --- reads ---------------------------------------------------------------------------

    async def by_id(self, schema_id: int) -> tuple[dict[str, Any], ParsedSchema]:
        cached = self._ids.get(schema_id)
        if cached is None or cached[0] < time.monotonic():
            entry = await self.call("schema", {"id": schema_id})
            if len(self._ids) > _CACHE_ENTRIES:
                self._ids.clear()
            cached = self._ids[schema_id] = (time.monotonic() + self.id_ttl_s, entry)
        return cached[1], await self.schema_for(cached[1]["fingerprint"])

    def forget_ids(self) -> None:
        """A permanent delete went through here: ids it ended answer 40403 at once."""
        self._ids.clear()

    async def versions(self, subject: str, *, deleted: bool = False) -> dict[str, Any]:
        return await self.call("versions", {"subject": subject, "deleted": deleted})

    async def version(
        self, subject: str, version: int | None, *, deleted: bool = False
    ) -> dict[str, Any]:
        """A subject's version (None: the latest live one)."""
        versions = await self.versions(subject, deleted=deleted or version is not None)
        listed: list[dict[str, Any]] = versions["versions"]
        if version is None:
            live = [v for v in listed if not v["deleted"]]
            if not live:
                raise RestError(40401, f"Subject '{subject}' not found.")
            return live[-1]
        for entry in listed:
            if entry["version"] == version and (deleted or not entry["deleted"]):
                return entry
        raise RestError(40402, f"Version {version} not found.")

    # --- writes --------------------------------------------------------------------------

    async def parse_request(self, body: Any) -> ParsedSchema:
        """The schema a register, lookup or compatibility request carries."""
        if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
            raise RestError(42201, "Invalid schema: the body needs a 'schema' string")
        references = _references(body.get("references") or [])
        try:
            schema = await self._blocking(
                parse,
                body["schema"],
                str(body.get("schemaType") or "AVRO"),
                references,
                await self._referenced(references, 1),
            )
        except InvalidSchema as exc:
            raise RestError(42201, str(exc)) from None
        return schema

    async def _live(self, subject: str) -> tuple[list[dict[str, Any]], str, str]:
        """A subject's live versions (none for a new subject) and the compatibility level
        and mode in force for it, in one call."""
        answer = await self.call("versions", {"subject": subject, "missing_ok": True})
        return answer["versions"], answer["compatibility"], answer.get("mode", "READWRITE")

    async def problems(
        self, schema: ParsedSchema, level: str, existing: list[dict[str, Any]]
    ) -> list[str]:
        """Why `schema` breaks `level` against `existing` versions (empty: it does not)."""
        if level == "NONE" or not existing:
            return []
        transitive = level.endswith("_TRANSITIVE")
        olds = [
            await self.schema_for(v["fingerprint"])
            for v in (existing if transitive else existing[-1:])
        ]
        return compatibility.incompatibilities(level, schema, olds)

    async def register(
        self,
        subject: str,
        schema: ParsedSchema,
        *,
        schema_id: int | None = None,
        version: int | None = None,
    ) -> dict[str, Any]:
        """Register `schema` under `subject` → {"id", "version"}; 409 when incompatible.
        With `schema_id` or `version` (IMPORT mode) nothing is checked against the
        subject's versions; the control plane refuses what the mode in force does not
        allow (42205), before any compatibility check as in Confluent's registry."""
        await self._put_text(schema)  # before any id names it
        importing = schema_id is not None or version is not None
        for _ in range(REGISTER_ATTEMPTS):
            live, level, mode = await self._live(subject)
            same = next((v for v in live if v["fingerprint"] == schema.fingerprint), None)
            if same is not None and not importing:
                return {"id": same["id"], "version": same["version"]}
            if not importing and mode == "READWRITE":
                problems = await self.problems(schema, level, live)
                if problems:
                    raise RestError(
                        409,
                        f"Schema being registered is incompatible with an earlier schema for "
                        f'subject "{subject}", details: {problems}',
                    )
            answer = await self.call(
                "register",
                {
                    "subject": subject,
                    "fingerprint": schema.fingerprint,
                    "schema_type": schema.schema_type,
                    "references": schema.document()["references"],
                    "checked_latest": live[-1]["version"] if live else 0,
                    "schema_id": schema_id,
                    "version": version,
                },
            )
            if not answer.get("stale"):
                return {"id": answer["id"], "version": answer["version"]}
        raise RestError(50002, "Register operation timed out: the subject kept changing")

    async def lookup(self, subject: str, schema: ParsedSchema, *, deleted: bool) -> dict[str, Any]:
        listed: list[dict[str, Any]] = (await self.versions(subject, deleted=deleted))["versions"]
        for entry in listed[::-1]:  # the newest first
            if entry["fingerprint"] == schema.fingerprint:
                return entry
        raise RestError(40403, "Schema not found")


def _references(items: Any) -> tuple[tuple[str, str, int], ...]:
    if not isinstance(items, list) or len(items) > 100:
        raise RestError(42201, "Invalid schema: references must be a list of at most 100")
    found = []
    for item in items:
        try:
            name, subject, version = str(item["name"]), str(item["subject"]), int(item["version"])
        except (TypeError, KeyError, ValueError):
            raise RestError(
                42201, "Invalid schema: a reference needs name, subject and version"
            ) from None
        if not name or not subject or not 1 <= version <= MAX_VERSION:
            raise RestError(42201, f"Invalid schema: bad reference {item!r}")
        found.append((name, subject, version))
    return tuple(found)
