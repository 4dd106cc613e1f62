"""Reads of a cluster's registry. Nothing here locks; each answer is one consistent
snapshot of its rows (read committed, one statement or two)."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Max, OuterRef, Q, QuerySet, Subquery

from metadata_store.clusters import VirtualCluster
from schema_registry.models import (
    DEFAULT_COMPATIBILITY,
    DEFAULT_MODE,
    RegisteredSchema,
    Registry,
    Subject,
    SubjectVersion,
)
from schema_registry.services import RegistryError, subject_not_found


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


_DEFAULTS = {"compatibility": DEFAULT_COMPATIBILITY, "mode": DEFAULT_MODE}
_NOT_CONFIGURED = {"compatibility": 40408, "mode": 40409}


def _global_setting(cluster: VirtualCluster, setting: str) -> str:
    row = Registry.objects.filter(cluster=cluster).values_list(setting, flat=True).first()
    return row or _DEFAULTS[setting]


def global_compatibility(cluster: VirtualCluster) -> str:
    return _global_setting(cluster, "compatibility")


def global_mode(cluster: VirtualCluster) -> str:
    return _global_setting(cluster, "mode")


def _subject_setting(
    cluster: VirtualCluster, subject: str | None, setting: str, default_to_global: bool
) -> str:
    """A subject's own `setting` (compatibility, mode), else with `default_to_global`
    the global one (subject None: the global one); else 40408 / 40409."""
    if subject is None:
        return _global_setting(cluster, setting)
    own = (
        Subject.objects.filter(registry__cluster=cluster, name=subject)
        .values_list(setting, flat=True)
        .first()
    )
    if own:
        return str(own)
    if default_to_global:
        return _global_setting(cluster, setting)
    raise RegistryError(
        _NOT_CONFIGURED[setting],
        f"Subject '{subject}' does not have subject-level {setting} configured",
    )


def subject_mode(*, cluster: VirtualCluster, subject: str | None, default_to_global: bool) -> str:
    return _subject_setting(cluster, subject, "mode", default_to_global)


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
    return _subject_setting(cluster, subject, "compatibility", default_to_global)


def subjects_overview(*, cluster: VirtualCluster, deleted: bool) -> QuerySet[Subject]:
    """The cluster's subjects with versions (soft-deleted ones too when `deleted`), by
    name, each annotated with ``live_versions``, ``latest_version`` (live), and that
    version's ``latest_id`` and ``latest_type`` (the console's and the REST API's list)."""
    latest = SubjectVersion.objects.filter(subject=OuterRef("pk"), deleted=False).order_by(
        "-version"
    )
    rows = Subject.objects.filter(registry__cluster=cluster).annotate(
        live_versions=Count("versions", filter=Q(versions__deleted=False)),
        all_versions=Count("versions"),
        latest_version=Max("versions__version", filter=Q(versions__deleted=False)),
        latest_id=Subquery(latest.values("schema__schema_id")[:1]),
        latest_type=Subquery(latest.values("schema__schema_type")[:1]),
    )
    rows = rows.filter(all_versions__gt=0) if deleted else rows.filter(live_versions__gt=0)
    return rows.order_by("name")


def subject_detail(*, cluster: VirtualCluster, subject: str) -> dict[str, Any]:
    """A subject's versions, soft-deleted ones included (40401 without any), the level in
    force, its own level (None: the global one) and the global level."""
    answer = subject_versions(cluster=cluster, subject=subject, deleted=True)
    own = (
        Subject.objects.filter(registry__cluster=cluster, name=subject)
        .values_list("compatibility", flat=True)
        .first()
    )
    return {
        "name": subject,
        **answer,
        "compatibility_own": own,
        "compatibility_global": global_compatibility(cluster),
    }
