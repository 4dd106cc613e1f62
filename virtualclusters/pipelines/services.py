"""Writes of pipelines: the REST API, the console and the agent API all go through these.

A pipeline is made with its first version and its principal (`principal`); a new
version becomes current at once and rewrites the principal's ACLs; the state is running
or paused; deleting removes the principal too. Users' actions are written to the audit
log here (`team.audit.event_record`): the agents' reports are no one's action."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from core.pipelines import ConfigError, PipelineSpec, parse_config
from team.audit import actor_label, event_record
from tenancy.errors import conflict
from virtualclusters.models import VirtualCluster
from virtualclusters.pipelines import principal as principals
from virtualclusters.pipelines.config import config_check
from virtualclusters.pipelines.models import Pipeline, PipelineReport, PipelineVersion

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
NAME_RULE = "1-100 letters, digits, '.', '_' or '-', starting with a letter or digit"
NAME_TAKEN = "A pipeline with this name already exists in this cluster."
STATES = (Pipeline.State.RUNNING, Pipeline.State.PAUSED)
MAX_ERRORS_KEPT = 20


def _audited(pipeline: Pipeline, action: str, what: str) -> None:
    event_record(
        organization_id=pipeline.cluster.organization_id,
        action=action,
        target_type="pipeline",
        target_id=pipeline.public_id,
        target_name=what,
    )


@transaction.atomic
def pipeline_create(
    *, cluster: VirtualCluster, name: str, config: str, state: str = Pipeline.State.PAUSED
) -> Pipeline:
    """A new pipeline with `config` as version 1 (checked: `config.ConfigInvalid`) and
    its principal. A name already taken is a conflict."""
    if not NAME.fullmatch(name or ""):
        raise ValidationError({"name": [f"A pipeline name is {NAME_RULE}."]})
    if state not in STATES:
        raise ValidationError({"state": ["running or paused"]})
    spec = config_check(cluster, config)
    if Pipeline.objects.filter(cluster=cluster, name=name).exists():
        raise conflict("name", NAME_TAKEN)
    try:
        with transaction.atomic():
            pipeline = Pipeline.objects.create(cluster=cluster, name=name, state=state)
    except IntegrityError:
        raise conflict("name", NAME_TAKEN) from None
    PipelineVersion.objects.create(
        pipeline=pipeline,
        version=1,
        config=config,
        canonical=spec.canonical(),
        created_by=actor_label(),
    )
    principals.principal_create(pipeline=pipeline)
    principals.principal_acls_set(pipeline=pipeline, spec=spec)
    _audited(pipeline, "created", f"{name} v1 ({state})")
    return pipeline


@transaction.atomic
def pipeline_configure(*, pipeline: Pipeline, config: str) -> PipelineVersion:
    """A new version of `pipeline` (checked), current at once: the agents switch to it
    at their next look at their assignments."""
    spec = config_check(pipeline.cluster, config)
    locked = Pipeline.objects.select_for_update().get(pk=pipeline.pk)
    number = locked.current_version + 1
    created = PipelineVersion.objects.create(
        pipeline=locked,
        version=number,
        config=config,
        canonical=spec.canonical(),
        created_by=actor_label(),
    )
    locked.current_version = number
    locked.save(update_fields=["current_version", "updated_at"])
    pipeline.current_version, pipeline.updated_at = locked.current_version, locked.updated_at
    principals.principal_acls_set(pipeline=locked, spec=spec)
    _audited(locked, "changed", f"{locked.name} v{number}")
    return created


@transaction.atomic
def pipeline_state_set(*, pipeline: Pipeline, state: str) -> Pipeline:
    """Run or pause the pipeline (the agents follow at their next look)."""
    if state not in STATES:
        raise ValidationError({"state": ["running or paused"]})
    if state == Pipeline.State.RUNNING:
        try:
            spec: PipelineSpec | None = parse_config(current_version(pipeline).config)
        except ConfigError:  # the engine's rules grew stricter since: its ACLs stay as made
            spec = None
        principals.principal_ensure(pipeline=pipeline, spec=spec)
    if pipeline.state != state:
        pipeline.state = state
        pipeline.save(update_fields=["state", "updated_at"])
        _audited(
            pipeline, "started" if state == Pipeline.State.RUNNING else "paused", pipeline.name
        )
    return pipeline


@transaction.atomic
def pipeline_delete(*, pipeline: Pipeline) -> None:
    """Delete the pipeline, its versions, reports and principal (its agents stop it at
    their next look: it is no longer assigned)."""
    principals.principal_delete(pipeline=pipeline)
    _audited(pipeline, "deleted", pipeline.name)
    pipeline.delete()


def current_version(pipeline: Pipeline) -> PipelineVersion:
    return PipelineVersion.objects.get(pipeline=pipeline, version=pipeline.current_version)


# --- the agents' side -----------------------------------------------------------------------


def pipeline_assignments(*, cluster: VirtualCluster) -> list[dict[str, Any]]:
    """Every running pipeline of the cluster with its current configuration and how to
    reach the cluster as its principal (``pipelines/assignments``; agents ask every few
    seconds: two queries, nothing parsed — the group comes from the canonical form)."""
    running = list(
        Pipeline.objects.filter(cluster=cluster, state=Pipeline.State.RUNNING).order_by("name")
    )
    versions = {
        (v.pipeline_id, v.version): v
        for v in PipelineVersion.objects.filter(
            pipeline__in=running, version__in={p.current_version for p in running}
        )
    }
    found = []
    for pipeline in running:
        version = versions.get((pipeline.pk, pipeline.current_version))
        if version is None:
            continue
        found.append(
            {
                "id": pipeline.public_id,
                "name": pipeline.name,
                "state": pipeline.state,
                "version": version.version,
                "config": version.config,
                "credentials": principals.credentials(pipeline),
                "group": principals.group_of(pipeline, version.canonical),
                "transactional_id_prefix": principals.transactional_id_prefix(pipeline),
            }
        )
    return found


@dataclass(frozen=True)
class StatusReport:
    """One pipeline's counters as one agent reports them (cumulative per agent process)."""

    id: str
    version: int
    records_in: int
    records_out: int
    records_dead_lettered: int
    records_filtered: int
    errors: list[dict[str, Any]]
    lag: int | None
    state: str


def _at_text(at: str | int | float) -> str:
    """An error's time as ISO 8601 (agents send ms since the epoch or ISO text)."""
    if isinstance(at, int | float):
        try:
            return datetime.fromtimestamp(at / 1000, tz=UTC).isoformat()
        except (OverflowError, OSError, ValueError):
            return str(at)
    return at[:64]


def pipeline_report(*, cluster: VirtualCluster, agent_id: str, reports: list[StatusReport]) -> None:
    """Keep each report as the agent's last for its pipeline (and the one before, for the
    rates). Pipelines not of the agent key's cluster (or deleted meanwhile) are left out."""
    ids = {r.id for r in reports}
    pipelines = {
        p.public_id: p for p in Pipeline.objects.filter(cluster=cluster, public_id__in=ids)
    }
    now = timezone.now()
    for report in reports:
        pipeline = pipelines.get(report.id)
        if pipeline is None:
            continue
        with transaction.atomic():
            row = (
                PipelineReport.objects.select_for_update()
                .filter(pipeline=pipeline, agent_id=agent_id)
                .first()
            )
            errors = [
                {"at": _at_text(e["at"]), "message": str(e["message"])[:1000]}
                for e in report.errors
            ]
            if row is None:
                row = PipelineReport(pipeline=pipeline, agent_id=agent_id)
                kept: list[dict[str, Any]] = []
            else:
                restarted = (
                    report.records_in < row.records_in or report.records_out < row.records_out
                )
                row.previous_at = None if restarted else row.reported_at
                row.previous_records_in = None if restarted else row.records_in
                row.previous_records_out = None if restarted else row.records_out
                kept = list(row.errors or [])
            for error in errors:
                if error not in kept:
                    kept.append(error)
            row.errors = kept[-MAX_ERRORS_KEPT:]
            row.version = report.version
            row.state = report.state
            row.reported_at = now
            row.records_in = report.records_in
            row.records_out = report.records_out
            row.records_dead_lettered = report.records_dead_lettered
            row.records_filtered = report.records_filtered
            row.lag = report.lag
            row.save()
