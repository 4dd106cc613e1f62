"""Agent-API calls of the Schema Registry (docs/AGENT_API.md, "Schema Registry").

The agent serves Confluent's REST API and keeps every schema text in the cluster's
bucket; these calls carry only fingerprints, types, references, subjects, versions and
levels. A refusal the REST client should see is an answer with Confluent's
``error_code`` and ``message`` (HTTP 200 on this channel), never an HTTP error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from msgspec import Meta, Struct

from metadata_store.agent_api.endpoint import endpoint
from metadata_store.clusters import VirtualCluster
from schema_registry import selectors, services

SUBJECT = Annotated[str, Meta(min_length=1, max_length=255)]
FINGERPRINT = Annotated[str, Meta(pattern=r"^[0-9a-f]{64}$")]
SCHEMA_ID = Annotated[int, Meta(ge=1, le=2**31 - 1)]
VERSION = Annotated[int, Meta(ge=1, le=2**31 - 1)]
LEVEL = Annotated[str, Meta(max_length=32)]


class _Body(Struct, forbid_unknown_fields=False, frozen=True):
    """Every body is a JSON object; unknown fields are ignored."""


class Reference(_Body, frozen=True):
    name: Annotated[str, Meta(min_length=1, max_length=1_000)]
    subject: SUBJECT
    version: VERSION


class RegisterRequest(_Body, frozen=True):
    subject: SUBJECT
    fingerprint: FINGERPRINT
    schema_type: Annotated[str, Meta(pattern="^(AVRO|JSON|PROTOBUF)$")] = "AVRO"
    references: Annotated[list[Reference], Meta(max_length=100)] = []
    checked_latest: Annotated[int, Meta(ge=0, le=2**31 - 1)] = 0
    schema_id: SCHEMA_ID | None = None  # IMPORT mode: the id the schema is to have
    version: VERSION | None = None  # IMPORT mode: the version the subject is to have


class LookupRequest(_Body, frozen=True):
    subject: SUBJECT
    fingerprint: FINGERPRINT
    deleted: bool = False


class SubjectRequest(_Body, frozen=True):
    subject: SUBJECT
    deleted: bool = False
    missing_ok: bool = False  # no versions: an empty list, not 40401


class SubjectsRequest(_Body, frozen=True):
    deleted: bool = False
    prefix: Annotated[str, Meta(max_length=255)] = ""


class SchemaRequest(_Body, frozen=True):
    id: SCHEMA_ID
    deleted: bool = False


class DeleteSubjectRequest(_Body, frozen=True):
    subject: SUBJECT
    permanent: bool = False


class DeleteVersionRequest(_Body, frozen=True):
    subject: SUBJECT
    version: VERSION | None = None  # None: the latest
    permanent: bool = False


class ReferencedByRequest(_Body, frozen=True):
    subject: SUBJECT
    version: VERSION


class ConfigRequest(_Body, frozen=True):
    subject: SUBJECT | None = None  # None: the global level
    compatibility: LEVEL = ""  # set: the new level; get/delete: unused
    default_to_global: bool = False


class ModeRequest(_Body, frozen=True):
    subject: SUBJECT | None = None  # None: the global mode
    mode: LEVEL = ""  # set: the new mode; get/delete: unused
    force: bool = False  # set IMPORT although there are schemas
    default_to_global: bool = False


def _answering(call: Callable[[], Any], key: str | None = None) -> dict[str, Any]:
    """`call()`'s answer (under `key`, when given), or its refusal's error code."""
    try:
        answer = call()
    except services.RegistryError as exc:
        return exc.answer()
    return answer if key is None else {key: answer}


@endpoint(RegisterRequest)
def registry_register(cluster: VirtualCluster, body: RegisterRequest) -> dict[str, Any]:
    return _answering(
        lambda: services.schema_register(
            cluster=cluster,
            subject=body.subject,
            fingerprint=body.fingerprint,
            schema_type=body.schema_type,
            references=[
                {"name": r.name, "subject": r.subject, "version": r.version}
                for r in body.references
            ],
            checked_latest=body.checked_latest,
            schema_id=body.schema_id,
            version=body.version,
        )
    )


@endpoint(SubjectRequest)
def registry_versions(cluster: VirtualCluster, body: SubjectRequest) -> dict[str, Any]:
    return _answering(
        lambda: selectors.subject_versions(
            cluster=cluster, subject=body.subject, deleted=body.deleted, missing_ok=body.missing_ok
        )
    )


@endpoint(SubjectsRequest)
def registry_subjects(cluster: VirtualCluster, body: SubjectsRequest) -> dict[str, Any]:
    return _answering(
        lambda: selectors.subjects_list(cluster=cluster, deleted=body.deleted, prefix=body.prefix),
        "subjects",
    )


@endpoint(SchemaRequest)
def registry_schema(cluster: VirtualCluster, body: SchemaRequest) -> dict[str, Any]:
    return _answering(lambda: selectors.schema_by_id(cluster=cluster, schema_id=body.id))


@endpoint(SchemaRequest)
def registry_schema_uses(cluster: VirtualCluster, body: SchemaRequest) -> dict[str, Any]:
    return _answering(
        lambda: selectors.schema_uses(cluster=cluster, schema_id=body.id, deleted=body.deleted),
        "uses",
    )


@endpoint(ReferencedByRequest)
def registry_referenced_by(cluster: VirtualCluster, body: ReferencedByRequest) -> dict[str, Any]:
    return _answering(
        lambda: selectors.referenced_by(
            cluster=cluster, subject=body.subject, version=body.version
        ),
        "ids",
    )


@endpoint(DeleteSubjectRequest)
def registry_delete_subject(cluster: VirtualCluster, body: DeleteSubjectRequest) -> dict[str, Any]:
    return _answering(
        lambda: services.subject_delete(
            cluster=cluster, subject=body.subject, permanent=body.permanent
        ),
        "versions",
    )


@endpoint(DeleteVersionRequest)
def registry_delete_version(cluster: VirtualCluster, body: DeleteVersionRequest) -> dict[str, Any]:
    return _answering(
        lambda: services.version_delete(
            cluster=cluster, subject=body.subject, version=body.version, permanent=body.permanent
        ),
        "version",
    )


@endpoint(ConfigRequest)
def registry_config_get(cluster: VirtualCluster, body: ConfigRequest) -> dict[str, Any]:
    return _answering(
        lambda: selectors.subject_compatibility(
            cluster=cluster, subject=body.subject, default_to_global=body.default_to_global
        ),
        "compatibility",
    )


@endpoint(ConfigRequest)
def registry_config_set(cluster: VirtualCluster, body: ConfigRequest) -> dict[str, Any]:
    return _answering(
        lambda: services.config_set(
            cluster=cluster, subject=body.subject, compatibility=body.compatibility
        ),
        "compatibility",
    )


@endpoint(ConfigRequest)
def registry_config_delete(cluster: VirtualCluster, body: ConfigRequest) -> dict[str, Any]:
    return _answering(
        lambda: services.config_delete(cluster=cluster, subject=body.subject), "compatibility"
    )


@endpoint(ModeRequest)
def registry_mode_get(cluster: VirtualCluster, body: ModeRequest) -> dict[str, Any]:
    return _answering(
        lambda: selectors.subject_mode(
            cluster=cluster, subject=body.subject, default_to_global=body.default_to_global
        ),
        "mode",
    )


@endpoint(ModeRequest)
def registry_mode_set(cluster: VirtualCluster, body: ModeRequest) -> dict[str, Any]:
    return _answering(
        lambda: services.mode_set(
            cluster=cluster, subject=body.subject, mode=body.mode, force=body.force
        ),
        "mode",
    )


@endpoint(ModeRequest)
def registry_mode_delete(cluster: VirtualCluster, body: ModeRequest) -> dict[str, Any]:
    return _answering(lambda: services.mode_delete(cluster=cluster, subject=body.subject), "mode")
