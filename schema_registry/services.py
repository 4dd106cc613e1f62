"""Writes to a cluster's registry. Every write locks the cluster's `Registry` row first,
so registrations and deletes of one cluster run one at a time (ids and versions dense,
no schema with two ids) while other clusters' go on.

Refusals are `RegistryError`s carrying Confluent's error codes; the agent answers them
to its REST client as they are. Deletes are in the audit log (whoever asked: a person in
the console, an API key, "system" for an agent's REST client).
"""

from __future__ import annotations

from typing import Any

from django.db import models, transaction
from django.db.models import Max, QuerySet

from core.ecma_regex import ecma_compile
from metadata_store.clusters import VirtualCluster
from schema_registry.models import (
    COMPATIBILITY_LEVELS,
    MODES,
    RegisteredSchema,
    Registry,
    Subject,
    SubjectVersion,
)
from team.audit import event_record

# Bounds (issue 27, "Bounded everything"); the agent refuses texts over its size limit.
MAX_SUBJECTS = 10_000
MAX_VERSIONS_PER_SUBJECT = 1_000
MAX_SCHEMAS = 100_000


class RegistryError(Exception):
    """A refusal with Confluent's `error_code` (40401 subject not found, 409
    incompatible, 42201 invalid schema …) and its message."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code

    def answer(self) -> dict[str, Any]:
        return {"error_code": self.error_code, "message": str(self)}


def subject_not_found(name: str) -> RegistryError:
    return RegistryError(40401, f"Subject '{name}' not found.")


def version_not_found(version: object) -> RegistryError:
    return RegistryError(40402, f"Version {version} not found.")


def registry_locked(cluster: VirtualCluster) -> Registry:
    """The cluster's registry row, made on first use and locked until the transaction
    ends."""
    Registry.objects.bulk_create([Registry(cluster=cluster)], ignore_conflicts=True)
    return Registry.objects.select_for_update().get(cluster=cluster)


def _live_versions(subject: Subject) -> QuerySet[SubjectVersion]:
    return subject.versions.filter(deleted=False).order_by("version")


READ_ONLY_MODES = ("READONLY", "READONLY_OVERRIDE")


def _mode(registry: Registry, row: Subject | None) -> str:
    """The mode in force for a subject: its own, else the registry's."""
    return (row.mode if row is not None else None) or registry.mode


def _not_permitted(message: str) -> RegistryError:
    return RegistryError(42205, message)


@transaction.atomic
def schema_register(
    *,
    cluster: VirtualCluster,
    subject: str,
    fingerprint: str,
    schema_type: str,
    references: list[dict[str, Any]],
    checked_latest: int,
    schema_id: int | None = None,
    version: int | None = None,
) -> dict[str, Any]:
    """Register a schema (by fingerprint) under `subject`: its id (an existing one for a
    schema the cluster already has) and version (the existing one when the subject has
    it live already). `checked_latest` is the subject's latest live version the agent
    checked compatibility against (0: none); if another registration moved it meanwhile
    the answer is ``{"stale": true}`` and the agent checks again.

    The mode in force decides, as in Confluent's registry: READONLY refuses (42205);
    READWRITE takes a registration without `schema_id` and `version`, IMPORT one with
    either (the schema takes that id, the subject that version; nothing is checked
    against the subject's other versions)."""
    registry = registry_locked(cluster)
    row = Subject.objects.filter(registry=registry, name=subject).first()
    mode = _mode(registry, row)
    if mode in READ_ONLY_MODES:
        raise _not_permitted(f"Subject {subject} is in read-only mode")
    importing = schema_id is not None or version is not None
    if importing and mode != "IMPORT":
        raise _not_permitted(f"Subject {subject} is not in import mode")
    if not importing and mode != "READWRITE":
        raise _not_permitted(f"Subject {subject} is not in read-write mode")
    if row is not None:
        same = _live_versions(row).filter(schema__fingerprint=fingerprint).first()
        if same is not None and (schema_id or same.schema.schema_id) == same.schema.schema_id:
            if (version or same.version) == same.version:
                return {"id": same.schema.schema_id, "version": same.version}
        latest = _live_versions(row).last()
        if not importing and (latest.version if latest else 0) != checked_latest:
            return {"stale": True}
        if row.versions.count() >= MAX_VERSIONS_PER_SUBJECT:
            raise RegistryError(
                42205, f"Subject '{subject}' has {MAX_VERSIONS_PER_SUBJECT} versions, the most"
            )
    elif checked_latest != 0 and not importing:
        return {"stale": True}
    _check_references(registry, references)
    schema = _schema_row(registry, fingerprint, schema_type, references, schema_id)
    if row is None:
        if Subject.objects.filter(registry=registry).count() >= MAX_SUBJECTS:
            raise RegistryError(42205, f"The registry holds {MAX_SUBJECTS} subjects, the most")
        row = Subject.objects.create(registry=registry, name=subject)
    if version is not None:
        taken = row.versions.filter(version=version).first()
        if taken is not None and taken.schema_id != schema.pk:
            raise _not_permitted(f"Overwrite new schema with version {version} is not permitted.")
        if taken is not None:
            return {"id": schema.schema_id, "version": version}
    else:
        version = (row.versions.aggregate(top=Max("version"))["top"] or 0) + 1
    SubjectVersion.objects.create(subject=row, version=version, schema=schema)
    return {"id": schema.schema_id, "version": version}


def _check_references(registry: Registry, references: list[dict[str, Any]]) -> None:
    for ref in references:
        if not SubjectVersion.objects.filter(
            subject__registry=registry,
            subject__name=ref["subject"],
            version=ref["version"],
            deleted=False,
        ).exists():
            raise RegistryError(
                42201,
                f"Invalid schema: reference {ref['name']!r} names subject "
                f"{ref['subject']!r} version {ref['version']}, which does not exist",
            )


def _schema_row(
    registry: Registry,
    fingerprint: str,
    schema_type: str,
    references: list[dict[str, Any]],
    schema_id: int | None,
) -> RegisteredSchema:
    """The schema's row: the one the cluster has for the fingerprint, else a new one with
    `schema_id` (IMPORT) or the next id."""
    schema = RegisteredSchema.objects.filter(registry=registry, fingerprint=fingerprint).first()
    if schema_id is not None:
        holder = RegisteredSchema.objects.filter(registry=registry, schema_id=schema_id).first()
        if holder is not None and holder.fingerprint != fingerprint:
            raise _not_permitted(f"Overwrite new schema with id {schema_id} is not permitted.")
        if schema is not None and schema.schema_id != schema_id:
            raise _not_permitted(
                f"The schema is registered with id {schema.schema_id} already, not {schema_id}"
            )
    if schema is not None:
        return schema
    if RegisteredSchema.objects.filter(registry=registry).count() >= MAX_SCHEMAS:
        raise RegistryError(42205, f"The registry holds {MAX_SCHEMAS} schemas, the most")
    schema = RegisteredSchema.objects.create(
        registry=registry,
        schema_id=schema_id or registry.next_id,
        fingerprint=fingerprint,
        schema_type=schema_type,
        references=references,
    )
    # Never an id twice: the counter passes every id taken, imported ones too.
    registry.next_id = max(registry.next_id, schema.schema_id + 1)
    registry.save(update_fields=["next_id"])
    return schema


def _referenced(version: SubjectVersion) -> bool:
    return RegisteredSchema.objects.filter(
        registry_id=version.subject.registry_id,
        references__contains=[{"subject": version.subject.name, "version": version.version}],
        uses__deleted=False,
    ).exists()


def _subject_locked(cluster: VirtualCluster, name: str) -> Subject:
    """A subject with versions, to delete from: not in a read-only mode."""
    registry = registry_locked(cluster)
    row = Subject.objects.filter(registry=registry, name=name).first()
    if _mode(registry, row) in READ_ONLY_MODES:
        raise _not_permitted(f"Subject {name} is in read-only mode")
    if row is None or not row.versions.exists():
        raise subject_not_found(name)
    return row


def _drop_unused_schemas(registry_id: int) -> None:
    """A schema no version uses any more is forgotten (its id is never reused: the
    counter only grows). Its text stays in the bucket, content-addressed."""
    RegisteredSchema.objects.filter(registry_id=registry_id, uses__isnull=True).delete()


def _deletion_audited(cluster: VirtualCluster, subject: str, what: str) -> None:
    event_record(
        organization_id=cluster.organization_id,
        action="deleted",
        target_type="schema_subject",
        target_id=cluster.public_id,
        target_name=f"{subject} {what}",
    )


@transaction.atomic
def subject_delete(*, cluster: VirtualCluster, subject: str, permanent: bool) -> list[int]:
    """Soft delete (every live version marked deleted) or, after that, permanent delete
    (the rows go). The deleted versions' numbers."""
    row = _subject_locked(cluster, subject)
    live = list(_live_versions(row))
    if permanent:
        if live:
            raise RegistryError(
                40405, f"Subject '{subject}' was not deleted first before being permanently deleted"
            )
        numbers = list(row.versions.order_by("version").values_list("version", flat=True))
        row.delete()
        _drop_unused_schemas(row.registry_id)
        _deletion_audited(cluster, subject, "(permanently)")
        return numbers
    if not live:
        raise RegistryError(40404, f"Subject '{subject}' was soft deleted.")
    for version in live:
        if _referenced(version):
            raise RegistryError(
                42206,
                f"One or more references exist to the schema {{subject={subject},version={version.version}}}.",
            )
    row.versions.filter(deleted=False).update(deleted=True)
    _deletion_audited(cluster, subject, "(soft)")
    return [v.version for v in live]


@transaction.atomic
def version_delete(
    *, cluster: VirtualCluster, subject: str, version: int | None, permanent: bool
) -> int:
    """Delete one version (`None`: the latest live one), soft or, after that, permanent."""
    row = _subject_locked(cluster, subject)
    if version is None:
        target = _live_versions(row).last()
        if target is None:
            raise subject_not_found(subject)
    else:
        target = row.versions.filter(version=version).first()
        if target is None:
            raise version_not_found(version)
    if permanent:
        if not target.deleted:
            raise RegistryError(
                40407,
                f"Subject '{subject}' Version {target.version} was not deleted first before "
                "being permanently deleted",
            )
        target.delete()
        _drop_unused_schemas(row.registry_id)
        _deletion_audited(cluster, subject, f"version {target.version} (permanently)")
        return int(target.version)
    if target.deleted:
        raise RegistryError(
            40406, f"Subject '{subject}' Version {target.version} was soft deleted."
        )
    if _referenced(target):
        raise RegistryError(
            42206,
            f"One or more references exist to the schema {{subject={subject},version={target.version}}}.",
        )
    target.deleted = True
    target.save(update_fields=["deleted"])
    _deletion_audited(cluster, subject, f"version {target.version} (soft)")
    return int(target.version)


def _check_level(level: str) -> str:
    upper = level.upper()
    if upper not in COMPATIBILITY_LEVELS:
        raise RegistryError(42203, f"Invalid compatibility level: {level}")
    return upper


@transaction.atomic
def config_set(*, cluster: VirtualCluster, subject: str | None, compatibility: str) -> str:
    """Set the global (subject None) or a subject's compatibility level."""
    level = _check_level(compatibility)
    registry = registry_locked(cluster)
    if subject is None:
        registry.compatibility = level
        registry.save(update_fields=["compatibility"])
    else:
        Subject.objects.update_or_create(
            registry=registry, name=subject, defaults={"compatibility": level}
        )
    return level


def _setting_delete(cluster: VirtualCluster, subject: str | None, setting: str) -> str:
    """Drop a subject's `setting` (compatibility, mode: it follows the global one
    again), or reset the global one to its default. The value that was in force."""
    registry = registry_locked(cluster)
    if subject is None:
        old = getattr(registry, setting)
        field = Registry._meta.get_field(setting)
        assert isinstance(field, models.Field)  # a column of the registry, not a relation
        setattr(registry, setting, field.default)
        registry.save(update_fields=[setting])
        return str(old)
    row = Subject.objects.filter(registry=registry, name=subject).first()
    if row is None or getattr(row, setting) is None:
        raise subject_not_found(subject)
    old = getattr(row, setting)
    setattr(row, setting, None)
    row.save(update_fields=[setting])
    if not row.versions.exists() and row.compatibility is None and row.mode is None:
        row.delete()
    return str(old)


@transaction.atomic
def config_delete(*, cluster: VirtualCluster, subject: str | None) -> str:
    """Drop a subject's level, or reset the global one to BACKWARD."""
    return _setting_delete(cluster, subject, "compatibility")


@transaction.atomic
def mode_set(*, cluster: VirtualCluster, subject: str | None, mode: str, force: bool) -> str:
    """Set the global (subject None) or a subject's mode. IMPORT only on a registry (a
    subject) without schemas, unless `force`, as in Confluent's registry."""
    upper = mode.upper()
    if upper not in MODES:
        raise RegistryError(42204, f"Invalid mode: {mode} (one of {', '.join(MODES)})")
    registry = registry_locked(cluster)
    if upper == "IMPORT" and not force:
        versions = SubjectVersion.objects.filter(subject__registry=registry)
        if subject is not None:
            versions = versions.filter(subject__name=subject)
        if versions.exists():
            raise _not_permitted(
                "Cannot import since found existing subjects (set the mode with force=true "
                "to import anyway)"
            )
    if subject is None:
        registry.mode = upper
        registry.save(update_fields=["mode"])
    else:
        Subject.objects.update_or_create(registry=registry, name=subject, defaults={"mode": upper})
    return upper


@transaction.atomic
def mode_delete(*, cluster: VirtualCluster, subject: str | None) -> str:
    """Drop a subject's mode, or reset the global one to READWRITE."""
    return _setting_delete(cluster, subject, "mode")


@transaction.atomic
def link_release(*, cluster: VirtualCluster, subjects: list[str], subjects_regex: str) -> int:
    """A migration's schema link ended (schema linking, issue 38): the subjects it linked —
    those it reported, and any matching its regex — that are still in IMPORT mode follow
    the global mode again, taking registrations as before. How many."""
    registry = registry_locked(cluster)
    named = set(subjects)
    released = 0
    matching = ecma_compile(subjects_regex) if subjects_regex else None
    for row in Subject.objects.filter(registry=registry, mode="IMPORT"):
        if row.name in named or (matching and matching.fullmatch(row.name)):
            row.mode = None
            row.save(update_fields=["mode"])
            released += 1
    return released
