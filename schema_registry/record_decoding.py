"""The message browser's keys and values framed with a schema id of the cluster's registry,
decoded: each record gets ``key_decoded`` and ``value_decoded`` — ``{schema_id, subject,
version, schema_type, json, error}``: ``json`` the decoded value, or ``error`` saying why
it could not be read (unknown id, bad frame, schema text unreadable or unparsable,
payload that does not read) — or None when the bytes are not framed.

Everything a page needs is read once per request, however many records it has: the ids'
rows in two queries, the references' rows in one query per level of nesting, the texts
from a live agent in one ask per `browser.MAX_TEXTS` schemas (the texts live only in the
bucket), each schema parsed once (`core.schemas`). Registered on start-up into
`virtualclusters.record_browser.RECORD_DECODERS` (that app cannot import this one).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q

from core.schemas import formats
from core.schemas.framed import FrameError, UndecodablePayload, frame_split, payload_decode
from metadata_store.clusters import VirtualCluster
from schema_registry.browser import MAX_TEXTS, schema_texts
from schema_registry.models import RegisteredSchema, SubjectVersion
from virtualclusters.browsing.asking import BrowseNotFound, BrowseUnavailable

MAX_REFERENCE_DEPTH = 10


@dataclass
class _Schema:
    schema_id: int | None
    fingerprint: str
    schema_type: str
    references: list[dict[str, Any]]
    subject: str | None = None
    version: int | None = None
    parsed: formats.ParsedSchema | None = None
    error: str | None = None
    referenced: list[_Schema] = field(default_factory=list)


def records_decode(cluster: VirtualCluster, topic: str, records: list[dict[str, Any]]) -> None:
    """Set ``key_decoded`` and ``value_decoded`` on each of `records` (the browse
    channel's records: base64 ``key`` and ``value``)."""
    frames: list[tuple[dict[str, Any], str, int | None, bytes | str]] = []
    for record in records:
        for side in ("key", "value"):
            record[f"{side}_decoded"] = None
            if record.get(side) is None:
                continue
            try:
                split = frame_split(base64.b64decode(record[side]))
            except FrameError as exc:
                frames.append((record, side, None, str(exc)))
                continue
            if split is not None:
                frames.append((record, side, split[0], split[1]))
    if not frames:
        return
    ids = {schema_id for _, _, schema_id, _ in frames if schema_id is not None}
    schemas = _schemas_by_id(cluster, topic, ids)
    _texts_parse(cluster, list(schemas.values()))
    for record, side, schema_id, payload in frames:
        record[f"{side}_decoded"] = _decoded(schemas, schema_id, payload)


def _decoded(
    schemas: dict[int, _Schema], schema_id: int | None, payload: bytes | str
) -> dict[str, Any]:
    """``{schema_id, subject, version, schema_type, json, error}``: ``error`` None when
    decoded, else why not (and ``json`` None)."""
    schema = schemas.get(schema_id) if schema_id is not None else None
    shown = {
        "schema_id": schema_id,
        "subject": schema.subject if schema else None,
        "version": schema.version if schema else None,
        "schema_type": schema.schema_type if schema else None,
        "json": None,
        "error": None,
    }
    if isinstance(payload, str):  # the frame's own error
        return {**shown, "error": payload}
    if schema is None:
        return {**shown, "error": f"unknown schema id {schema_id} in this cluster's registry"}
    if schema.parsed is None:
        return {**shown, "error": schema.error or "schema not read"}
    try:
        return {**shown, "json": payload_decode(schema.parsed, payload)}
    except UndecodablePayload as exc:
        return {**shown, "error": f"does not read as schema id {schema_id}: {exc}"}


def _schemas_by_id(cluster: VirtualCluster, topic: str, ids: set[int]) -> dict[int, _Schema]:
    """The ids' schemas, each with the subject and version it is best shown as: the
    topic's own subject (``<topic>-value``, ``<topic>-key``) if one of its versions is
    it, else a live version of another subject, newest first."""
    if not ids:
        return {}
    schemas = {
        row.schema_id: _Schema(row.schema_id, row.fingerprint, row.schema_type, row.references)
        for row in RegisteredSchema.objects.filter(registry__cluster=cluster, schema_id__in=ids)
    }
    uses = (
        SubjectVersion.objects.filter(schema__registry__cluster=cluster, schema__schema_id__in=ids)
        .values_list("schema__schema_id", "subject__name", "version", "deleted")
        .order_by("deleted", "-version")
    )
    own = (f"{topic}-value", f"{topic}-key")
    for schema_id, subject, version, _deleted in uses:
        schema = schemas[schema_id]
        if schema.subject is None or (subject in own and schema.subject not in own):
            schema.subject, schema.version = subject, version
    _references_resolve(cluster, list(schemas.values()))
    return schemas


def _references_resolve(cluster: VirtualCluster, schemas: list[_Schema]) -> None:
    """Each schema's `referenced` (its references' schemas, in its references' order),
    level by level: one query per level."""
    level = schemas
    for _ in range(MAX_REFERENCE_DEPTH):
        wanted = {(r["subject"], r["version"]) for s in level for r in s.references}
        if not wanted:
            return
        match = Q()
        for subject, version in wanted:
            match |= Q(subject__name=subject, version=version)
        found = {
            (v.subject.name, v.version): v.schema
            for v in SubjectVersion.objects.filter(
                match, subject__registry__cluster=cluster
            ).select_related("subject", "schema")
        }
        following = []
        for schema in level:
            for ref in schema.references:
                row = found.get((ref["subject"], ref["version"]))
                if row is None:
                    schema.error = (
                        f"reference {ref['subject']} v{ref['version']} is not in the registry"
                    )
                    continue
                child = _Schema(row.schema_id, row.fingerprint, row.schema_type, row.references,
                                ref["subject"], ref["version"])  # fmt: skip
                schema.referenced.append(child)
                following.append(child)
        level = following
    for schema in level:
        if schema.references:
            schema.error = f"references nested deeper than {MAX_REFERENCE_DEPTH}"


def _texts_parse(cluster: VirtualCluster, schemas: list[_Schema]) -> None:
    """Read the schemas' texts (and their references') through a live agent, a few
    fingerprints an ask, and parse each schema once, references first."""
    every: list[_Schema] = []
    stack = list(schemas)
    while stack:
        schema = stack.pop()
        every.append(schema)
        stack.extend(schema.referenced)
    fingerprints = sorted({s.fingerprint for s in every})
    texts: dict[str, dict[str, Any]] = {}
    unread: dict[str, str] = {}
    for start in range(0, len(fingerprints), MAX_TEXTS):
        asked = fingerprints[start : start + MAX_TEXTS]
        try:
            texts.update(schema_texts(cluster, asked)["texts"])
        except (BrowseUnavailable, BrowseNotFound) as exc:
            # Not asked again for the rest: a person waits for one silent agent, not each.
            unread.update({f: f"schema text unreadable: {exc}" for f in fingerprints[start:]})
            break
    parsed: dict[str, formats.ParsedSchema | str] = {}

    def parse(schema: _Schema) -> formats.ParsedSchema | str:
        if schema.fingerprint in parsed:
            return parsed[schema.fingerprint]
        if schema.error:
            return schema.error
        if schema.fingerprint in unread:
            return unread[schema.fingerprint]
        referenced = [parse(child) for child in schema.referenced]
        refused = next((r for r in referenced if isinstance(r, str)), None)
        if refused is not None:
            result: formats.ParsedSchema | str = f"a reference cannot be read: {refused}"
        else:
            document = texts[schema.fingerprint]
            refs = tuple((r["name"], r["subject"], r["version"]) for r in schema.references)
            try:
                result = formats.parse(
                    document["schema"], document.get("schemaType") or schema.schema_type,
                    refs, [r for r in referenced if not isinstance(r, str)],
                )  # fmt: skip
            except formats.InvalidSchema as exc:
                result = f"schema parse error: {exc}"
        parsed[schema.fingerprint] = result
        return result

    for schema in schemas:
        result = parse(schema)
        if isinstance(result, str):
            schema.error = result
        else:
            schema.parsed = result
