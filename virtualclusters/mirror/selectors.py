"""Reads of migrations: a migration with its topics, partitions and groups, as the REST
API and the console show it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import models
from django.utils.dateparse import parse_datetime

from metadata_store.models import Partition
from virtualclusters.mirror.models import Migration, MigrationTopic


def _partitions(row: MigrationTopic, floe: dict[int, tuple[int, int]]) -> list[dict[str, Any]]:
    """Each partition: the copier's view of the source, the store's of the destination."""
    reported = {int(p.get("partition", -1)): p for p in row.partitions}
    indexes = sorted(set(reported) | set(floe))
    answers = []
    for index in indexes:
        source = reported.get(index, {})
        start, end = floe.get(index, (0, 0))
        source_end = int(source.get("source_end_offset", -1))
        answers.append(
            {
                "partition": index,
                "source_log_start": int(source.get("source_log_start", -1)),
                "source_end_offset": source_end,
                "destination_log_start": start,
                "destination_end_offset": end,
                "records_behind": max(0, source_end - end) if source_end >= 0 else None,
                "bytes_copied": int(source.get("bytes_copied", 0)),
                "error": str(source.get("error", "")),
            }
        )
    return answers


def _when(text: Any) -> datetime | None:
    """An ISO 8601 time an agent reported; None when it is none or not one."""
    try:
        return parse_datetime(text) if isinstance(text, str) else None
    except ValueError:
        return None


def schema_link_state(migration: Migration) -> dict[str, Any] | None:
    """The schema link's progress (None: the migration links no schemas): `state`
    (linking, cut_over, stopped), when cut over, and the linker's last report — subjects
    copied, versions copied, the last sync with the source, its error and each subject's."""
    if not migration.schema_registry_url:
        return None
    report = migration.schema_link or {}
    if migration.schemas_linked:
        state = "linking"
    elif migration.schemas_cut_over_at is not None:
        state = "cut_over"
    else:
        state = "stopped"
    return {
        "state": state,
        "cut_over_at": migration.schemas_cut_over_at,
        "subjects_copied": int(report.get("subjects_copied") or 0),
        "versions_copied": int(report.get("versions_copied") or 0),
        "last_sync": _when(report.get("last_sync")),
        "error": str(report.get("error") or ""),
        "subject_errors": dict(report.get("errors") or {}),
    }


def migration_detail(migration: Migration) -> dict[str, Any]:
    """The migration's fields with `topics` (each with its partitions) and `groups`."""
    rows = list(MigrationTopic.objects.filter(migration=migration).order_by("name"))
    offsets: dict[Any, dict[int, tuple[int, int]]] = {}
    for topic_id, index, start, end in Partition.objects.filter(
        topic_id__in=[r.topic_id for r in rows if r.topic_id is not None]
    ).values_list("topic_id", "index", "log_start_offset", "high_watermark"):
        offsets.setdefault(topic_id, {})[index] = (start, end)
    detail = {
        field: getattr(migration, field)
        for field in (
            "public_id",
            "state",
            "source_bootstrap",
            "source_security",
            "topics_regex",
            "groups_regex",
            "start_from_now",
            "created_at",
            "stopped_at",
            "lease_agent",
            "waiting_for",
            "reported_at",
            "groups",
            "source_schema_registry",
            "subjects_regex",
        )
    }
    detail["schemas"] = schema_link_state(migration)
    detail["topics"] = [
        {
            "name": r.name,
            "state": r.state,
            "error": r.error,
            "cut_over_at": r.cut_over_at,
            # The source's configs as copied (value, origin); Floe's retention and
            # compaction leave a mirrored topic alone, so they apply after its cutover.
            "configs": r.configs,
            "retention_applies": (
                "after cutover" if r.state == MigrationTopic.State.MIRRORING else "now"
            ),
            "partitions": _partitions(r, offsets.get(r.topic_id, {})),
        }
        for r in rows
    ]
    return detail


def migration_shown(migration: Migration) -> dict[str, Any]:
    """`migration_detail` with each topic's totals, as the console shows it:
    `records_behind` (None while a partition's source end is unknown), `bytes_copied`,
    `errors`, and for its progress bar `source_records` (the source's log start to end)
    and `copied_records` (of those, the ones the mirror holds); and the migration's
    `mirroring` (how many topics it still mirrors) and their `records_behind`."""
    detail = migration_detail(migration)
    for topic in detail["topics"]:
        partitions = topic["partitions"]
        behind = [p["records_behind"] for p in partitions]
        topic["records_behind"] = None if None in behind else sum(behind)
        topic["bytes_copied"] = sum(p["bytes_copied"] for p in partitions)
        topic["errors"] = [p["error"] for p in partitions if p["error"]]
        known = [p for p in partitions if p["source_end_offset"] >= 0]
        topic["source_records"] = sum(
            max(0, p["source_end_offset"] - max(p["source_log_start"], 0)) for p in known
        )
        topic["copied_records"] = sum(
            max(
                0,
                min(p["destination_end_offset"], p["source_end_offset"])
                - max(p["source_log_start"], 0),
            )
            for p in known
        )
    mirroring = [t for t in detail["topics"] if t["state"] == MigrationTopic.State.MIRRORING]
    behind_total = [t["records_behind"] for t in mirroring]
    detail["mirroring"] = len(mirroring)
    detail["records_behind"] = None if None in behind_total else sum(behind_total)
    return detail


def migrations_shown(cluster: Any, *, limit: int = 5) -> list[dict[str, Any]]:
    """The cluster's migrations as `migration_shown` shows each: running ones first, then
    the latest stopped."""
    rows = Migration.objects.filter(cluster=cluster).order_by(
        models.Case(models.When(state=Migration.State.RUNNING, then=0), default=1), "-id"
    )[:limit]
    return [migration_shown(migration) for migration in rows]
