"""Topics as Iceberg tables: switching a topic's table on and off, its state, and the
``table_append`` job run (its plan, and what the control plane keeps of its result).

A topic table is an Iceberg table of the cluster's catalog (namespace `NAMESPACE`) with
the raw schema (`RAW_SCHEMA`: Kafka's partition, offset, timestamp, key, value and
headers). Beat's check queues a ``table_append`` run when an active table is due (its
freshness interval passed and its topic has records past its last offsets); the run's
one step is ``jobs/table_append.py`` on a jobs-role agent, which commits through the
catalog itself. The source of truth for how far a table got is its current snapshot's
summary (``floe.last-offsets``), read here from the catalog's metadata document.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform, HourTransform
from pyiceberg.types import (
    BinaryType,
    IntegerType,
    ListType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestamptzType,
)

from metadata_store import rewrites
from metadata_store.models import Topic
from virtualclusters.jobs.models import JobRun
from virtualclusters.jobs.steps import Step
from virtualclusters.models import VirtualCluster
from virtualclusters.tables import catalog
from virtualclusters.tables.models import TopicTable
from virtualclusters.tables.selectors import (
    due_tables,
    lag_records,
    table_behind,
    table_last_offsets,
    table_rows,
    table_snapshot,
)

NAMESPACE = "topics"
PARTITION_BY = {"day": DayTransform, "hour": HourTransform}
# A record's headers, field 6 of both table kinds (top level in a raw table, in `kafka` in
# an Avro one): a list of (key, value).
HEADERS_FIELD = NestedField(
    6,
    "headers",
    ListType(
        7,
        StructType(
            NestedField(8, "key", StringType(), required=False),
            NestedField(9, "value", BinaryType(), required=False),
        ),
        element_required=False,
    ),
    required=False,
)
RAW_SCHEMA = Schema(
    NestedField(1, "partition", IntegerType(), required=True),
    NestedField(2, "offset", LongType(), required=True),
    NestedField(3, "timestamp", TimestamptzType(), required=True),
    NestedField(4, "key", BinaryType(), required=False),
    NestedField(5, "value", BinaryType(), required=False),
    HEADERS_FIELD,
)
# An Avro table: the value's fields as columns (the job adds them by name from the
# subject's schema, which only the bucket holds) and Kafka's own in one struct.
AVRO_BASE_SCHEMA = Schema(
    NestedField(
        1,
        "kafka",
        StructType(
            NestedField(2, "partition", IntegerType(), required=True),
            NestedField(3, "offset", LongType(), required=True),
            NestedField(4, "timestamp", TimestamptzType(), required=True),
            NestedField(5, "key", BinaryType(), required=False),
            HEADERS_FIELD,
        ),
        required=True,
    ),
)
# An Avro table's dead letters: the raw record and why its value did not decode.
DEAD_LETTER_SCHEMA = Schema(
    *RAW_SCHEMA.fields, NestedField(10, "error", StringType(), required=False)
)
TIMESTAMP_FIELD = {"raw": 3, "avro": 4}  # the record timestamp's field id
# The schema registry app (which no other app imports) registers how to read a
# subject's versions at start: (cluster, subject) → [{"version", "id", "fingerprint",
# "schema_type", "references", "deleted"}, …] oldest first.
SUBJECT_VERSIONS: list[Callable[[VirtualCluster, str], list[dict[str, Any]]]] = []

# The job retries a lost commit race itself, from the new snapshot (PyIceberg's own
# retry would re-add the same files on top of a snapshot that may already hold them).
TABLE_PROPERTIES = {"commit.retry.num-retries": "0"}


class TopicTableError(ValueError):
    """A request to switch a topic's table on that cannot be honoured (400, or 409 with
    `conflict`)."""

    def __init__(self, field: str, message: str, *, conflict: bool = False) -> None:
        super().__init__(message)
        self.field, self.message, self.conflict = field, message, conflict


def catalog_path(cluster: VirtualCluster) -> str:
    """The catalog's base URI under the control plane (``catalog_url`` minus the host)."""
    return f"/iceberg/{cluster.public_id}"


def catalog_url(cluster: VirtualCluster) -> str:
    return settings.FLOE_PUBLIC_URL.rstrip("/") + catalog_path(cluster)


def _partition_spec(partition_by: str, kind: str) -> PartitionSpec | None:
    if not partition_by:
        return None
    transform = PARTITION_BY.get(partition_by)
    if transform is None:
        raise TopicTableError(
            "partition_by", "Partition by 'day' or 'hour' of the record timestamp."
        )
    return PartitionSpec(
        PartitionField(
            source_id=3, field_id=1000, transform=transform(), name=f"timestamp_{partition_by}"
        )
    )


def _subject_versions(cluster: VirtualCluster, subject: str) -> list[dict[str, Any]]:
    if not SUBJECT_VERSIONS:
        raise TopicTableError("schema", "The Schema Registry is not installed.", conflict=True)
    return [v for v in SUBJECT_VERSIONS[0](cluster, subject) if not v.get("deleted")]


def _schema_kept(cluster: VirtualCluster, schema: object) -> dict[str, Any]:
    """What a PUT's schema is kept as: {"kind": "raw"} or {"kind": "avro", "subject",
    "version": n | "latest"} (an Avro subject with that version, without references)."""
    if schema == "raw":
        return {"kind": "raw"}
    if not isinstance(schema, dict) or not isinstance(schema.get("subject"), str):
        raise TopicTableError(
            "schema", 'Either "raw" or {"subject": "<subject>", "version": "latest" | n}.'
        )
    version = schema.get("version", "latest")
    if version != "latest" and (not isinstance(version, int) or version < 1):
        raise TopicTableError("schema", 'The version is "latest" or a version number.')
    found = _version(_subject_versions(cluster, schema["subject"]), schema["subject"], version)
    if found["schema_type"] != "AVRO" or found["references"]:
        raise TopicTableError(
            "schema", "Only Avro subjects without references can be tables so far.", conflict=True
        )
    return {"kind": "avro", "subject": schema["subject"], "version": version}


def _version(versions: list[dict[str, Any]], subject: str, version: object) -> dict[str, Any]:
    if not versions:
        raise TopicTableError(
            "schema", f"The Schema Registry has no subject {subject!r}.", conflict=True
        )
    if version == "latest":
        return versions[-1]
    for row in versions:
        if row["version"] == version:
            return row
    raise TopicTableError(
        "schema", f"The subject {subject!r} has no version {version}.", conflict=True
    )


def _plan_schema(cluster: VirtualCluster, kept: dict[str, Any]) -> dict[str, Any]:
    """The job's view of a table's schema: the texts' fingerprints and every writer's id."""
    if kept["kind"] == "raw":
        return kept
    versions = _subject_versions(cluster, kept["subject"])
    return {
        "kind": "avro",
        "texts": f"{cluster.public_id}/_schemas/",
        "reader": _version(versions, kept["subject"], kept["version"])["fingerprint"],
        "writers": {str(v["id"]): v["fingerprint"] for v in versions},
    }


@transaction.atomic
def topic_table_enable(
    *,
    topic: Topic,
    schema: object,
    table: str = "",
    partition_by: str = "",
    freshness_seconds: int = 60,
) -> TopicTable:
    """Keep `topic` as an Iceberg table (created now, empty; the append job fills it
    from the topic's log start). Again on an existing one: its freshness and state
    change; its schema, name and partitioning cannot (409)."""
    kept = _schema_kept(topic.cluster, schema)
    if not 1 <= freshness_seconds <= 86_400:
        raise TopicTableError("freshness_seconds", "Between 1 and 86400 seconds.")
    name = table or topic.name.replace(".", "_")
    existing = TopicTable.objects.select_for_update().filter(topic=topic).first()
    if existing is not None:
        if (name, partition_by, kept) != (
            existing.table.name,
            existing.partition_by,
            existing.schema,
        ):
            raise TopicTableError(
                "table",
                f"The topic is already kept as {existing.table} (partition_by "
                f"{existing.partition_by or 'none'}, schema {existing.schema}): its name, "
                "partitioning and schema stay; drop the table through the catalog first.",
                conflict=True,
            )
        existing.freshness_seconds = freshness_seconds
        existing.state = TopicTable.State.ACTIVE
        existing.save(update_fields=["freshness_seconds", "state"])
        return existing
    cluster = topic.cluster
    try:  # the cluster's bucket must hold tables: its state, not the request (409)
        catalog.table_root(cluster, NAMESPACE, name)
    except catalog.CatalogError as exc:
        raise TopicTableError("table", exc.message, conflict=True) from None
    catalog.namespace_ensure(cluster=cluster, name=NAMESPACE)
    try:
        created = catalog.table_create(
            cluster=cluster,
            namespace=NAMESPACE,
            name=name,
            schema=RAW_SCHEMA if kept["kind"] == "raw" else AVRO_BASE_SCHEMA,
            partition_spec=_partition_spec(partition_by, kept["kind"]),
            properties=dict(TABLE_PROPERTIES),
        )
    except catalog.CatalogError as exc:
        raise TopicTableError("table", exc.message, conflict=exc.code == 409) from None
    dead_letters = None
    if kept["kind"] == "avro":
        try:
            dead_letters = catalog.table_create(
                cluster=cluster,
                namespace=NAMESPACE,
                name=f"{name}_dead_letters",
                schema=DEAD_LETTER_SCHEMA,
                properties=dict(TABLE_PROPERTIES),
            )
        except catalog.CatalogError as exc:
            raise TopicTableError("table", exc.message, conflict=exc.code == 409) from None
    return TopicTable.objects.create(
        topic=topic,
        table=created,
        dead_letters=dead_letters,
        schema=kept,
        partition_by=partition_by,
        freshness_seconds=freshness_seconds,
    )


def topic_table_stop(*, topic_table: TopicTable) -> None:
    """No more appends (the table and its data stay; PUT starts them again)."""
    TopicTable.objects.filter(pk=topic_table.pk).update(state=TopicTable.State.STOPPED)
    topic_table.state = TopicTable.State.STOPPED


def topic_table_state(topic_table: TopicTable) -> dict[str, Any]:
    """What ``GET …/topics/{name}/table/`` answers."""
    table = topic_table.table
    offsets = table_last_offsets(table)
    cluster = topic_table.topic.cluster
    behind = table_behind(topic_table, offsets, now=timezone.now())
    return {
        "state": topic_table.state,
        "catalog_url": catalog_url(cluster),
        "namespace": table.namespace.name,
        "table": table.name,
        "schema": "raw"
        if topic_table.schema.get("kind") == "raw"
        else {k: topic_table.schema[k] for k in ("subject", "version")},
        "partition_by": topic_table.partition_by or None,
        "freshness_seconds": topic_table.freshness_seconds,
        "metadata_location": table.metadata_location,
        "rows": table_rows(table),
        "last_offsets": {str(p): o for p, o in sorted(offsets.items())},
        "lag_records": lag_records(topic_table, offsets),
        "lag_seconds": behind["lag_seconds"],
        "backfill": behind["backfill"],
        "snapshot": table_snapshot(table),
        "last_appended_at": topic_table.last_appended_at,
        "last_error": topic_table.last_error,
        "dead_letters": None
        if topic_table.dead_letters is None
        else {"table": topic_table.dead_letters.name, "rows": table_rows(topic_table.dead_letters)},
    }


# --- the table_append job run -------------------------------------------------------


def table_append_begin(run: JobRun) -> Step | dict[str, Any]:
    """The step: for each due table, the partition runs past its last offsets."""
    tables = []
    for topic_table in due_tables(run.cluster, now=timezone.now()):
        offsets = table_last_offsets(topic_table.table)
        runs = rewrites.runs_after(
            str(topic_table.topic_id),
            {p: o + 1 for p, o in offsets.items()},
            max_bytes=settings.FLOE_TABLE_APPEND_MAX_BYTES,
        )
        starts = {p: o + 1 for p, o in offsets.items()}
        stable, aborted, markers = rewrites.stable_bounds(str(topic_table.topic_id), starts)
        # Only decided records: none of an open transaction's, nor anything after it.
        runs = [r for r in runs if r[1] < stable.get(r[0], 0)]
        decided = {p: [m for m in ms if m < stable.get(p, 0)] for p, ms in markers.items()}
        if runs or any(decided.values()):
            tables.append(
                {
                    "id": topic_table.public_id,
                    "namespace": topic_table.table.namespace.name,
                    "table": topic_table.table.name,
                    "schema": _plan_schema(run.cluster, topic_table.schema),
                    "batches": [list(r) for r in runs],
                    "stable": {str(p): o for p, o in stable.items()},
                    "aborted": aborted,
                    "markers": {str(p): ms for p, ms in decided.items() if ms},
                    "dead_letters": topic_table.dead_letters.name
                    if topic_table.dead_letters is not None
                    else None,
                    "maintenance": {
                        "retention_ms": _retention_ms(topic_table),
                        "target_bytes": settings.FLOE_TABLE_TARGET_FILE_BYTES,
                        "max_files": settings.FLOE_TABLE_MAX_SMALL_FILES,
                        # Files of an attempt that never committed: once no attempt can.
                        "orphan_grace_s": settings.FLOE_JOB_TIMEOUT_S,
                        "sweep_s": settings.FLOE_TABLE_SWEEP_S,
                    },
                }
            )
    if not tables:
        return {"details": {"skipped": "no topic table is due"}}
    return Step(
        "table_append",
        {"catalog_path": catalog_path(run.cluster), "tables": tables},
        stage="appending",
    )


def _maintained(outcome: dict[str, Any], key: str) -> int:
    maintenance = outcome.get("maintenance")
    return int(maintenance.get(key) or 0) if isinstance(maintenance, dict) else 0


def _retention_ms(topic_table: TopicTable) -> int:
    """The topic's retention.ms: how long the table keeps old snapshots (at least)."""
    topic = topic_table.topic
    return int(topic.configs.get("retention.ms", topic.cluster.default_retention_ms))


def table_append_continue(run: JobRun, result: dict[str, Any]) -> dict[str, Any]:
    """Record each table's outcome (the commit itself went through the catalog)."""
    now = timezone.now()
    outcomes = [t for t in result.get("tables") or [] if isinstance(t, dict)]
    by_id = {
        t.public_id: t
        for t in TopicTable.objects.filter(
            topic__cluster=run.cluster, public_id__in=[str(o.get("id")) for o in outcomes]
        )
    }
    errors: list[str] = []
    for outcome in outcomes:
        topic_table = by_id.get(str(outcome.get("id")))
        if topic_table is None:
            continue
        error = str(outcome.get("error") or "")[:2000]
        maintenance = outcome.get("maintenance")
        if isinstance(maintenance, dict) and maintenance.get("error"):
            errors.append(f"{topic_table.table.name} maintenance: {maintenance['error']}"[:2000])
        if error:
            errors.append(f"{topic_table.table.name}: {error}")
            TopicTable.objects.filter(pk=topic_table.pk).update(last_error=error)
        else:
            TopicTable.objects.filter(pk=topic_table.pk).update(last_error="", last_appended_at=now)
    if outcomes and all(o.get("error") for o in outcomes):
        raise RuntimeError("; ".join(errors))  # the run fails (and backs off)
    files = sum(int(o.get("files") or 0) for o in outcomes)
    details = {
        "tables": len(outcomes),
        "appended": sum(int(o.get("appended") or 0) for o in outcomes),
        "conflicts": sum(int(o.get("conflicts") or 0) for o in outcomes),
        "dead_lettered": sum(int(o.get("dead") or 0) for o in outcomes),
        "compacted_files": sum(_maintained(o, "compacted") for o in outcomes),
        "expired_snapshots": sum(_maintained(o, "expired") for o in outcomes),
        "deleted_files": sum(_maintained(o, "deleted") for o in outcomes),
        "orphans_deleted": sum(_maintained(o, "orphans") for o in outcomes),
        "errors": errors,
    }
    return {
        "output_files": files,
        "output_bytes": sum(int(o.get("bytes") or 0) for o in outcomes),
        "details": details,
    }
