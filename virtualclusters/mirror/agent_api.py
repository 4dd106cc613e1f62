"""Agent API calls of a migration's copier (docs/AGENT_API.md "migrations/…"): lease a
running migration of the agent key's cluster, create the mirrored topics, report the
copier's state (renewing the lease), copy consumer-group offsets. The data itself goes
to the bucket and is committed by ``mirror/commit`` (the metadata store's). Thin
adapters over `services`."""

from __future__ import annotations

from typing import Any

import msgspec

from metadata_store.agent_api import schemas
from metadata_store.agent_api.endpoint import CallRefused, endpoint
from metadata_store.agent_api.schemas import as_dicts
from metadata_store.leases import LeaseLost
from tenancy.sealed import SealBroken
from virtualclusters.mirror import services
from virtualclusters.models import VirtualCluster


def _lost(exc: LeaseLost) -> CallRefused:
    return CallRefused(409, str(exc))


@endpoint(schemas.MigrationLeaseRequest)
def migrations_lease(
    cluster: VirtualCluster, body: schemas.MigrationLeaseRequest
) -> dict[str, Any]:
    leased = services.migration_lease(cluster=cluster, agent_id=body.agent_id, lease_s=body.lease_s)
    if leased is None:
        return {"migration": None}
    migration, lease = leased
    try:
        source = services.migration_source(migration)
    except SealBroken as exc:
        source = {"bootstrap": migration.source_bootstrap, "security": {}, "error": str(exc)}
    try:
        registry = services.migration_schema_source(migration)
    except SealBroken as exc:
        registry = {"url": migration.schema_registry_url, "error": str(exc)}
    return {
        "migration": {
            "id": migration.public_id,
            "lease": lease.token,
            "epoch": lease.epoch,
            "source": source,
            "topics": migration.topics_regex,
            "groups": migration.groups_regex,
            "start_from_now": migration.start_from_now,
            "schema_registry": registry,
        }
    }


@endpoint(schemas.MigrationReportRequest)
def migrations_report(
    cluster: VirtualCluster, body: schemas.MigrationReportRequest
) -> dict[str, Any]:
    try:
        return services.migration_report(
            cluster=cluster,
            migration_id=body.migration_id,
            token=body.lease,
            lease_s=body.lease_s,
            waiting_for=body.waiting_for,
            topics=[
                services.TopicReport(
                    t.name, [msgspec.to_builtins(p) for p in t.partitions], t.error
                )
                for t in body.topics
            ],
            groups=body.groups,
            schema_link=msgspec.to_builtins(body.schema_link) if body.schema_link else None,
        )
    except LeaseLost as exc:
        raise _lost(exc) from None


@endpoint(schemas.MirrorTopicCreateRequest)
def migrations_topic(
    cluster: VirtualCluster, body: schemas.MirrorTopicCreateRequest
) -> dict[str, Any]:
    try:
        row = services.mirror_topic_create(
            cluster=cluster,
            migration_id=body.migration_id,
            token=body.lease,
            name=body.name,
            partitions=body.partitions,
            configs=body.configs,
            config_origins=body.config_origins,
        )
    except LeaseLost as exc:
        raise _lost(exc) from None
    return {
        "name": row.name,
        "state": row.state,
        "topic_id": str(row.topic_id) if row.topic_id is not None else None,
        "error": row.error,
    }


@endpoint(schemas.MirrorGroupOffsetsRequest)
def migrations_group_offsets(
    cluster: VirtualCluster, body: schemas.MirrorGroupOffsetsRequest
) -> dict[str, Any]:
    try:
        code, used = services.mirror_group_offsets(
            cluster=cluster,
            migration_id=body.migration_id,
            token=body.lease,
            group_id=body.group_id,
            offsets=as_dicts(body.offsets),
        )
    except LeaseLost as exc:
        raise _lost(exc) from None
    return {"error_code": int(code), "used": used}


@endpoint(schemas.MigrationLinkSubjectRequest)
def migrations_link_subject(
    cluster: VirtualCluster, body: schemas.MigrationLinkSubjectRequest
) -> dict[str, Any]:
    try:
        linked = services.link_subject(
            cluster=cluster, migration_id=body.migration_id, token=body.lease, subject=body.subject
        )
    except LeaseLost as exc:
        raise _lost(exc) from None
    return {"linked": linked}
