"""Reads of pipelines: the describe the REST API and the console show (state, version,
per-agent status, throughput from successive reports, lag, last errors)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from virtualclusters.models import VirtualCluster
from virtualclusters.pipelines.models import Pipeline, PipelineReport, PipelineVersion
from virtualclusters.pipelines.principal import principal

# A report older than this is an agent that stopped running the pipeline (agents report
# every few seconds): it counts for nothing in the throughput and lag.
FRESH_S = 30
MAX_ERRORS_SHOWN = 20


def pipelines_of(cluster: VirtualCluster) -> QuerySet[Pipeline]:
    return Pipeline.objects.filter(cluster=cluster).order_by("name")


def versions_of(pipeline: Pipeline) -> QuerySet[PipelineVersion]:
    return PipelineVersion.objects.filter(pipeline=pipeline).order_by("-version")


def _rate(now_value: int, before: int | None, seconds: float | None) -> float | None:
    if before is None or not seconds or seconds <= 0:
        return None
    return round(max(now_value - before, 0) / seconds, 1)


def agent_status(report: PipelineReport, *, fresh_after: Any) -> dict[str, Any]:
    seconds = (
        (report.reported_at - report.previous_at).total_seconds() if report.previous_at else None
    )
    fresh = report.reported_at >= fresh_after
    return {
        "agent_id": report.agent_id,
        "state": report.state if fresh else "silent",
        "version": report.version,
        "reported_at": report.reported_at,
        "records_in": report.records_in,
        "records_out": report.records_out,
        "records_dead_lettered": report.records_dead_lettered,
        "records_filtered": report.records_filtered,
        "records_in_per_s": _rate(report.records_in, report.previous_records_in, seconds)
        if fresh
        else 0.0,
        "records_out_per_s": _rate(report.records_out, report.previous_records_out, seconds)
        if fresh
        else 0.0,
        "lag": report.lag,
        "errors": list(report.errors or []),
    }


def pipeline_status(pipeline: Pipeline, reports: list[PipelineReport]) -> dict[str, Any]:
    """The live part of a describe: per agent, the sums over agents heard lately, and
    the newest errors of all (newest first)."""
    fresh_after = timezone.now() - timedelta(seconds=FRESH_S)
    agents = [agent_status(r, fresh_after=fresh_after) for r in reports]
    live = [a for a in agents if a["state"] != "silent"]
    lags = [a["lag"] for a in live if a["lag"] is not None]
    errors = sorted(
        ({**e, "agent_id": a["agent_id"]} for a in agents for e in a["errors"]),
        key=lambda e: str(e.get("at", "")),
        reverse=True,
    )[:MAX_ERRORS_SHOWN]
    return {
        "agents": agents,
        "records_in_per_s": round(sum(a["records_in_per_s"] or 0 for a in live), 1),
        "records_out_per_s": round(sum(a["records_out_per_s"] or 0 for a in live), 1),
        "records_in": sum(a["records_in"] for a in agents),
        "records_out": sum(a["records_out"] for a in agents),
        "records_dead_lettered": sum(a["records_dead_lettered"] for a in agents),
        "records_filtered": sum(a["records_filtered"] for a in agents),
        "lag": sum(lags) if lags else None,
        "errors": errors,
        "error_count": sum(len(a["errors"]) for a in live),
    }


def pipeline_detail(pipeline: Pipeline) -> dict[str, Any]:
    """The describe: the pipeline, its current configuration, and its live status."""
    version = PipelineVersion.objects.filter(
        pipeline=pipeline, version=pipeline.current_version
    ).first()
    reports = list(PipelineReport.objects.filter(pipeline=pipeline).order_by("agent_id"))
    return {
        "id": pipeline.public_id,
        "name": pipeline.name,
        "state": pipeline.state,
        "version": pipeline.current_version,
        "config": version.config if version else "",
        "created_at": pipeline.created_at,
        "updated_at": pipeline.updated_at,
        "principal": principal(pipeline),
        **pipeline_status(pipeline, reports),
    }


def pipelines_listed(cluster: VirtualCluster) -> list[dict[str, Any]]:
    """The cluster's pipelines with their status (the list page and REST list)."""
    pipelines = list(pipelines_of(cluster))
    reports: dict[int, list[PipelineReport]] = {}
    for report in PipelineReport.objects.filter(pipeline__in=pipelines).order_by("agent_id"):
        reports.setdefault(report.pipeline_id, []).append(report)
    listed = []
    for pipeline in pipelines:
        status = pipeline_status(pipeline, reports.get(pipeline.pk, []))
        listed.append(
            {
                "id": pipeline.public_id,
                "name": pipeline.name,
                "state": pipeline.state,
                "version": pipeline.current_version,
                "created_at": pipeline.created_at,
                "updated_at": pipeline.updated_at,
                "records_in_per_s": status["records_in_per_s"],
                "records_out_per_s": status["records_out_per_s"],
                "lag": status["lag"],
                "error_count": status["error_count"],
                "agents": len([a for a in status["agents"] if a["state"] != "silent"]),
            }
        )
    return listed
