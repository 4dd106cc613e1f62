"""Schema linking (issue 38; WarpStream's Schema Linking; docs/ARCHITECTURE.md
"Migration"): a migration's copier also copies the subjects of a source Schema Registry
(Confluent's REST API) into its cluster's registry, with the same ids and versions, and
keeps them in sync until the schemas are cut over — so a record framed with a source
schema id deserializes unchanged against Floe's registry.

The source registry is in the customer's network, as the source Kafka is: this agent
reads it (aiohttp, basic auth, every request bounded) and writes Floe's registry the way
its own REST API does — the text into the bucket, the id and version through the agent
API's ``registry/…`` calls in Confluent's IMPORT mode, which each linked subject is put
in (normal registrations to it are refused while linked; registering a schema it
already has still answers its id). The control plane never connects out.

Each look (every `poll_s`, 2 s) lists the source's subjects (soft-deleted ones too) and
each linked subject's versions; a version not copied yet is read and imported (the
versions its references name first, whatever their subject). Every `FULL_EVERY` looks
(about 6 s) it also compares the live versions and the compatibility levels (the
global one and each subject's). A version the source deleted (soft or permanently) is
soft-deleted on Floe, never permanently: records on the mirror may still carry its id,
which Floe's registry goes on answering (``/schemas/ids/{id}``), as Confluent answers
soft-deleted schemas.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import aiohttp
from yarl import URL

from agents.schema_registry.registry import RestError, SchemaRegistry
from core.ecma_regex import ecma_compile

log = logging.getLogger(__name__)

POLL_S = 2.0
FULL_EVERY = 3  # looks: the live versions and levels are compared every 3rd (~6 s)
SOURCE_TIMEOUT_S = 10.0
MAX_REFERENCE_DEPTH = 10
MAX_SUBJECT_CHARS = 255  # Floe's registry's bound on a subject's name
_NOT_FOUND = (40401, 40402, 40408)  # subject, version, subject-level config not found


class SourceRegistryError(Exception):
    """The source registry answered an error (its `error_code`), or could not be read."""

    def __init__(self, message: str, error_code: int = 0) -> None:
        super().__init__(message)
        self.error_code = error_code


class SourceRegistry:
    """GETs against a Confluent-compatible registry; answers decoded from JSON."""

    def __init__(self, url: str, username: str = "", password: str = "") -> None:
        self.url = url.rstrip("/")
        self._headers = {"Accept": "application/vnd.schemaregistry.v1+json"}
        if username:  # HTTP basic auth (RFC 7617)
            token = base64.b64encode(f"{username}:{password}".encode()).decode()
            self._headers["Authorization"] = f"Basic {token}"
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def get(self, *segments: str, **query: str) -> Any:
        """GET the path of `segments` (each quoted whole: a subject may hold a '/')."""
        if self._session is None:
            self._session = aiohttp.ClientSession(
                headers=self._headers, timeout=aiohttp.ClientTimeout(total=SOURCE_TIMEOUT_S)
            )
        path = "/".join(quote(s, safe="") for s in segments)
        url = URL(f"{self.url}/{path}", encoded=True)
        if query:
            url = url.with_query(query)
        try:
            async with self._session.get(url) as answer:
                body = await answer.read()
                status = answer.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SourceRegistryError(
                f"the source registry {self.url}: {type(exc).__name__}: {exc}"
            ) from None
        try:
            decoded = json.loads(body or b"null")
        except ValueError:
            raise SourceRegistryError(
                f"the source registry {self.url}/{path}: HTTP {status}, not JSON"
            ) from None
        if status != 200:
            code = decoded.get("error_code", status) if isinstance(decoded, dict) else status
            message = decoded.get("message", "") if isinstance(decoded, dict) else ""
            raise SourceRegistryError(
                f"the source registry {self.url}/{path}: HTTP {status}: {message}", int(code)
            )
        return decoded


class LinkEnded(Exception):
    """The migration's schema link ended (cut over, or stopped): the linker stops."""


class SchemaLinker:
    """`await linker.run_forever()`: keep the linked subjects in sync until `active` is
    cleared (the schemas were cut over) or the task is cancelled (the lease was lost)."""

    def __init__(
        self,
        registry: SchemaRegistry,
        source: SourceRegistry,
        *,
        subjects: str,
        link_subject: Callable[[str], Awaitable[bool]],
        poll_s: float = POLL_S,
    ) -> None:
        self.registry = registry
        self._link_subject = link_subject
        self.source = source
        self.subjects = ecma_compile(subjects or ".*")
        self.poll_s = poll_s
        self.active = True
        # subject → {version: (schema id, deleted)} as Floe holds them
        self._floe: dict[str, dict[int, tuple[int, bool]]] = {}
        self._imported: set[str] = set()  # subjects put in IMPORT mode by this linker
        self._levels: dict[str | None, str | None] = {}  # the levels set on Floe
        self._looks = 0
        self.errors: dict[str, str] = {}
        self.error = ""
        self.last_sync: str | None = None
        self.source_subjects: set[str] = set()

    def state(self) -> dict[str, Any]:
        """What `migrations/report` carries as `schema_link`."""
        copied = [s for s in self.source_subjects if s not in self.errors and self._floe.get(s)]
        return {
            "subjects": sorted(self._imported),
            "subjects_copied": len(copied),
            "versions_copied": sum(len(v) for v in self._floe.values()),
            "last_sync": self.last_sync,
            "error": self.error[:1000],
            "errors": {s: e[:1000] for s, e in sorted(self.errors.items())[:50]},
        }

    async def run_forever(self) -> None:
        try:
            while self.active:
                try:
                    await self.sync_once()
                    self.error = ""
                except (SourceRegistryError, RestError) as exc:
                    self.error = str(exc)
                    log.warning("schema link: %s", exc)
                except LinkEnded as exc:
                    log.info("schema link: %s", exc)
                    self.active = False
                    return
                except Exception as exc:  # an answer not as Confluent's API gives it
                    self.error = f"{type(exc).__name__}: {exc}"
                    log.exception("schema link: the look failed")
                await asyncio.sleep(self.poll_s)
        finally:
            await self.source.close()

    async def sync_once(self) -> None:
        """One look at the source: new versions imported; every `FULL_EVERY` looks,
        deletions and compatibility levels too."""
        full = self._looks % FULL_EVERY == 0
        self._looks += 1
        names = await self.source.get("subjects", deleted="true")
        linked = []
        for name in names if isinstance(names, list) else ():
            if not isinstance(name, str) or not self.subjects.fullmatch(name):
                continue
            if len(name) > MAX_SUBJECT_CHARS:
                self.errors[name[:64] + "…"] = f"longer than Floe's {MAX_SUBJECT_CHARS} characters"
                continue
            linked.append(name)
        linked.sort()
        self.source_subjects = set(linked)
        if full:
            level = (await self.source.get("config")).get("compatibilityLevel")
            await self._level(None, level)
        for subject in linked:
            if not self.active:
                return
            try:
                await self._subject(subject, full=full)
                self.errors.pop(subject, None)
            except (SourceRegistryError, RestError) as exc:
                self.errors[subject] = str(exc)
                log.warning("schema link: subject %s: %s", subject, exc)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                self.errors[subject] = f"the source answered unexpectedly: {exc!r}"
                log.warning("schema link: subject %s: %r", subject, exc)
        self.last_sync = datetime.now(UTC).isoformat()

    async def _source_versions(self, subject: str, *, deleted: bool) -> set[int]:
        try:
            found = await self.source.get(
                "subjects", subject, "versions", deleted="true" if deleted else "false"
            )
        except SourceRegistryError as exc:
            if exc.error_code in _NOT_FOUND:
                return set()  # every version deleted (permanently, or soft without `deleted`)
            raise
        return {int(v) for v in found}

    async def _subject(self, subject: str, *, full: bool) -> None:
        if full:  # Floe's side read again: what anyone else changed there is seen
            self._floe.pop(subject, None)
        every = await self._source_versions(subject, deleted=True)
        floe = await self._floe_versions(subject)
        new = every - set(floe)
        await self._import_mode(subject)
        if not new and not full:
            return
        live = await self._source_versions(subject, deleted=False)
        for version in sorted(new):
            await self._version(subject, version, deleted=version not in live, depth=0)
        for version, (_, deleted) in sorted(floe.items()):
            if not deleted and version not in live:
                await self._delete(subject, version)
        if full:
            try:
                level = (await self.source.get("config", subject)).get("compatibilityLevel")
            except SourceRegistryError as exc:
                if exc.error_code not in _NOT_FOUND:
                    raise
                level = None  # the subject follows the global level
            await self._level(subject, level)

    async def _floe_versions(self, subject: str) -> dict[int, tuple[int, bool]]:
        """Floe's versions of a subject: read at each full look, kept as this linker
        writes them in between."""
        known = self._floe.get(subject)
        if known is None:
            answer = await self.registry.call(
                "versions", {"subject": subject, "deleted": True, "missing_ok": True}
            )
            known = self._floe[subject] = {
                v["version"]: (v["id"], v["deleted"]) for v in answer["versions"]
            }
            if answer.get("mode") != "IMPORT":  # (changed on Floe meanwhile: linked again)
                self._imported.discard(subject)
        return known

    async def _import_mode(self, subject: str) -> None:
        """The subject linked — in IMPORT mode: the link writes it, normal registrations
        do not. Asked of the migration (`link_subject`), which refuses once the link ended:
        then this linker stops."""
        if subject not in self._imported:
            if not await self._link_subject(subject):
                raise LinkEnded(f"the schemas were cut over; {subject} not linked")
            self._imported.add(subject)

    async def _version(self, subject: str, version: int, *, deleted: bool, depth: int) -> None:
        """Import the source's `version` of `subject` with its id (its references first)."""
        if depth > MAX_REFERENCE_DEPTH:
            raise SourceRegistryError(f"references nested over {MAX_REFERENCE_DEPTH} deep")
        entry = await self.source.get("subjects", subject, "versions", str(version), deleted="true")
        references = entry.get("references") or []
        for ref in references:
            await self._reference(str(ref["subject"]), int(ref["version"]), depth + 1)
        schema = await self.registry.parse_request(
            {
                "schema": entry["schema"],
                "schemaType": entry.get("schemaType") or "AVRO",
                "references": references,
            }
        )
        await self._import_mode(subject)
        answer = await self.registry.register(
            subject, schema, schema_id=int(entry["id"]), version=version
        )
        self._floe.setdefault(subject, {})[version] = (answer["id"], False)
        log.info("schema link: %s version %d imported with id %d", subject, version, answer["id"])
        if deleted:
            await self._delete(subject, version)

    async def _reference(self, subject: str, version: int, depth: int) -> None:
        """A version a reference names, on Floe before the schema naming it (imported
        from the source if missing, whether or not the subjects regex names it)."""
        if version in await self._floe_versions(subject):
            return
        live = await self._source_versions(subject, deleted=False)
        await self._version(subject, version, deleted=version not in live, depth=depth)

    async def _delete(self, subject: str, version: int) -> None:
        """Soft-delete a version on Floe as the source did (never permanently)."""
        try:
            await self.registry.call(
                "delete_version", {"subject": subject, "version": version, "permanent": False}
            )
        except RestError as exc:
            if exc.error_code != 40406:  # soft-deleted already
                raise
        schema_id, _ = self._floe[subject][version]
        self._floe[subject][version] = (schema_id, True)

    async def _level(self, subject: str | None, level: Any) -> None:
        """The source's compatibility level (None: the subject follows the global one)."""
        if level is not None and not isinstance(level, str):
            raise SourceRegistryError(f"the source answered the level {level!r}")
        if subject in self._levels and self._levels[subject] == level:
            return
        if level is None:
            try:
                await self.registry.call("config_delete", {"subject": subject})
            except RestError as exc:
                if exc.error_code not in _NOT_FOUND:
                    raise
        else:
            await self.registry.call("config_set", {"subject": subject, "compatibility": level})
        self._levels[subject] = level
