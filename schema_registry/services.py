"""Writes to a cluster's registry. Every write locks the cluster's `Registry` row first,
so registrations and deletes of one cluster run one at a time (ids and versions dense,
no schema with two ids) while other clusters' go on.

Refusals are `RegistryError`s carrying Confluent's error codes; the agent answers them
to its REST client as they are. Deletes are in the audit log (whoever asked: a person in
the console, an API key, "system" for an agent's REST client).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Max

from schema_registry.models import (
    COMPATIBILITY_LEVELS,
    RegisteredSchema,
    Registry,
    Subject,
    SubjectVersion,
)
from team.audit import event_record
from virtualclusters.models import VirtualCluster

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


def _live_versions(subject: Subject):
    return subject.versions.filter(deleted=False).order_by("version")


@transaction.atomic
def schema_register(
    *,
    cluster: VirtualCluster,
    subject: str,
    fingerprint: str,
    schema_type: str,
    references: list[dict[str, Any]],
    checked_latest: int,
) -> dict[str, Any]:
    """Register a schema (by fingerprint) under `subject`: its id (an existing one for a
    schema the cluster already has) and version (the existing one when the subject has
    it live already). `checked_latest` is the subject's latest live version the agent
    checked compatibility against (0: none); if another registration moved it meanwhile
    the answer is ``{"stale": true}`` and the agent checks again."""
    registry = registry_locked(cluster)
    row = Subject.objects.filter(registry=registry, name=subject).first()
    if row is not None:
        same = _live_versions(row).filter(schema__fingerprint=fingerprint).first()
        if same is not None:
            return {"id": same.schema.schema_id, "version": same.version}
        latest = _live_versions(row).last()
        if (latest.version if latest else 0) != checked_latest:
            return {"stale": True}
        if row.versions.count() >= MAX_VERSIONS_PER_SUBJECT:
            raise RegistryError(
                42205, f"Subject '{subject}' has {MAX_VERSIONS_PER_SUBJECT} versions, the most"
            )
    elif checked_latest != 0:
        return {"stale": True}
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
    schema = RegisteredSchema.objects.filter(registry=registry, fingerprint=fingerprint).first()
    if schema is None:
        if registry.next_id > MAX_SCHEMAS:
            raise RegistryError(42205, f"The registry holds {MAX_SCHEMAS} schemas, the most")
        schema = RegisteredSchema.objects.create(
            registry=registry,
            schema_id=registry.next_id,
            fingerprint=fingerprint,
            schema_type=schema_type,
            references=references,
        )
        registry.next_id += 1
        registry.save(update_fields=["next_id"])
    if row is None:
        if Subject.objects.filter(registry=registry).count() >= MAX_SUBJECTS:
            raise RegistryError(42205, f"The registry holds {MAX_SUBJECTS} subjects, the most")
        row = Subject.objects.create(registry=registry, name=subject)
    top = row.versions.aggregate(top=Max("version"))["top"] or 0
    version = SubjectVersion.objects.create(subject=row, version=top + 1, schema=schema)
    return {"id": schema.schema_id, "version": version.version}


def _referenced(version: SubjectVersion) -> bool:
    return RegisteredSchema.objects.filter(
        registry_id=version.subject.registry_id,
        references__contains=[{"subject": version.subject.name, "version": version.version}],
        uses__deleted=False,
    ).exists()


def _subject_locked(cluster: VirtualCluster, name: str) -> Subject:
    registry = registry_locked(cluster)
    row = Subject.objects.filter(registry=registry, name=name).first()
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
        return target.version
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
    return target.version


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


@transaction.atomic
def config_delete(*, cluster: VirtualCluster, subject: str | None) -> str:
    """Drop a subject's level (it follows the global one again), or reset the global one
    to the default. The level that was in force."""
    registry = registry_locked(cluster)
    if subject is None:
        old = registry.compatibility
        registry.compatibility = Registry._meta.get_field("compatibility").default
        registry.save(update_fields=["compatibility"])
        return old
    row = Subject.objects.filter(registry=registry, name=subject).first()
    if row is None or row.compatibility is None:
        raise subject_not_found(subject)
    old = row.compatibility
    row.compatibility = None
    row.save(update_fields=["compatibility"])
    if not row.versions.exists():
        row.delete()
    return old
