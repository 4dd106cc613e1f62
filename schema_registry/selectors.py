"""Reads of a cluster's registry. Nothing here locks; each answer is one consistent
snapshot of its rows (read committed, one statement or two)."""

from __future__ import annotations

from typing import Any

from schema_registry.models import (
    DEFAULT_COMPATIBILITY,
    DEFAULT_MODE,
    RegisteredSchema,
    Registry,
    Subject,
    SubjectVersion,
)
from schema_registry.services import RegistryError, subject_not_found
from virtualclusters.models import VirtualCluster


def _version_json(version: SubjectVersion) -> dict[str, Any]:
    schema = version.schema
    return {
        "version": version.version,
        "id": schema.schema_id,
        "fingerprint": schema.fingerprint,
        "schema_type": schema.schema_type,
        "references": schema.references,
        "deleted": version.deleted,
    }


def global_compatibility(cluster: VirtualCluster) -> str:
    row = Registry.objects.filter(cluster=cluster).values_list("compatibility", flat=True).first()
    return row or DEFAULT_COMPATIBILITY


def global_mode(cluster: VirtualCluster) -> str:
    row = Registry.objects.filter(cluster=cluster).values_list("mode", flat=True).first()
    return row or DEFAULT_MODE


def mode_in_force(cluster: VirtualCluster, subject: str) -> str:
    """The subject's own mode, else the global one."""
    own = (
        Subject.objects.filter(registry__cluster=cluster, name=subject)
        .values_list("mode", flat=True)
        .first()
    )
    return own or global_mode(cluster)


def subject_mode(*, cluster: VirtualCluster, subject: str | None, default_to_global: bool) -> str:
    if subject is None:
        return global_mode(cluster)
    own = (
        Subject.objects.filter(registry__cluster=cluster, name=subject)
        .values_list("mode", flat=True)
        .first()
    )
    if own:
        return own
    if default_to_global:
        return global_mode(cluster)
    raise RegistryError(40409, f"Subject '{subject}' does not have subject-level mode configured")


def subject_versions(
    *, cluster: VirtualCluster, subject: str, deleted: bool, missing_ok: bool = False
) -> dict[str, Any]:
    """A subject's versions (with the soft-deleted ones when `deleted`), each with its
    schema's id, fingerprint, type and references, and the level and mode in force for
    it. A subject without versions is 40401, or no versions when `missing_ok` (a
    registration's first look: one call, not two)."""
    row = Subject.objects.filter(registry__cluster=cluster, name=subject).first()
    versions = []
    if row is not None:
        rows = row.versions.select_related("schema").order_by("version")
        versions = [_version_json(v) for v in rows if deleted or not v.deleted]
    if not versions and not missing_ok:
        raise subject_not_found(subject)
    own = row.compatibility if row is not None else None
    own_mode = row.mode if row is not None else None
    return {
        "versions": versions,
        "compatibility": own or global_compatibility(cluster),
        "mode": own_mode or global_mode(cluster),
    }


def subjects_list(*, cluster: VirtualCluster, deleted: bool, prefix: str) -> list[str]:
    versions = SubjectVersion.objects.filter(subject__registry__cluster=cluster)
    if not deleted:
        versions = versions.filter(deleted=False)
    if prefix:
        versions = versions.filter(subject__name__startswith=prefix)
    return sorted(set(versions.values_list("subject__name", flat=True)))


def schema_by_id(*, cluster: VirtualCluster, schema_id: int) -> dict[str, Any]:
    row = RegisteredSchema.objects.filter(registry__cluster=cluster, schema_id=schema_id).first()
    if row is None:
        raise RegistryError(40403, "Schema not found")
    return {
        "id": row.schema_id,
        "fingerprint": row.fingerprint,
        "schema_type": row.schema_type,
        "references": row.references,
    }


def schema_uses(*, cluster: VirtualCluster, schema_id: int, deleted: bool) -> list[dict[str, Any]]:
    """The (subject, version) pairs that use a schema id."""
    rows = SubjectVersion.objects.filter(
        subject__registry__cluster=cluster, schema__schema_id=schema_id
    )
    if not deleted:
        rows = rows.filter(deleted=False)
    found = [
        {"subject": name, "version": version}
        for name, version in rows.order_by("subject__name", "version").values_list(
            "subject__name", "version"
        )
    ]
    if (
        not found
        and not RegisteredSchema.objects.filter(
            registry__cluster=cluster, schema_id=schema_id
        ).exists()
    ):
        raise RegistryError(40403, "Schema not found")
    return found


def referenced_by(*, cluster: VirtualCluster, subject: str, version: int) -> list[int]:
    """The ids of the schemas that reference a subject's version."""
    return sorted(
        RegisteredSchema.objects.filter(
            registry__cluster=cluster,
            references__contains=[{"subject": subject, "version": version}],
            uses__deleted=False,
        )
        .values_list("schema_id", flat=True)
        .distinct()
    )


def subject_compatibility(
    *, cluster: VirtualCluster, subject: str | None, default_to_global: bool
) -> str:
    if subject is None:
        return global_compatibility(cluster)
    level = (
        Subject.objects.filter(registry__cluster=cluster, name=subject)
        .values_list("compatibility", flat=True)
        .first()
    )
    if level:
        return level
    if default_to_global:
        return global_compatibility(cluster)
    raise RegistryError(
        40408, f"Subject '{subject}' does not have subject-level compatibility configured"
    )
