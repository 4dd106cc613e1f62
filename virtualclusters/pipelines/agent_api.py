"""Agent API calls of the pipelines role (docs/AGENT_API.md "pipelines/…"): which
pipelines the agent key's cluster runs, and the runners' reports. Bodies are checked by
the schemas below, as every agent-API call's (`metadata_store.agent_api.endpoint`);
thin adapters over `services`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

from metadata_store.agent_api.endpoint import endpoint
from metadata_store.agent_api.schemas import AGENT_ID, COUNT
from virtualclusters.models import VirtualCluster
from virtualclusters.pipelines import services

MAX_PIPELINES = 10_000
MAX_ERRORS = 100


class _Body(Struct, forbid_unknown_fields=False, frozen=True):
    pass


class PipelineAssignmentsRequest(_Body, frozen=True):
    agent_id: AGENT_ID


class PipelineErrorReport(_Body, frozen=True):
    # ISO 8601 text or ms since the epoch (shown as ISO 8601).
    at: Annotated[str, Meta(max_length=64)] | Annotated[int, Meta(ge=0, le=2**53)]
    message: Annotated[str, Meta(max_length=1_000)]


class PipelineStatusReport(_Body, frozen=True):
    id: Annotated[str, Meta(min_length=1, max_length=32)]
    version: Annotated[int, Meta(ge=1, le=2**31 - 1)]
    records_in: COUNT = 0
    records_out: COUNT = 0
    records_dead_lettered: COUNT = 0
    records_filtered: COUNT = 0
    errors: Annotated[list[PipelineErrorReport], Meta(max_length=MAX_ERRORS)] = []
    lag: Annotated[int, Meta(ge=0, le=2**62)] | None = None
    state: Literal["running", "stopped", "failing"] = "running"


class PipelineReportRequest(_Body, frozen=True):
    agent_id: AGENT_ID
    pipelines: Annotated[list[PipelineStatusReport], Meta(max_length=MAX_PIPELINES)] = []


@endpoint(PipelineAssignmentsRequest)
def pipelines_assignments(
    cluster: VirtualCluster, body: PipelineAssignmentsRequest
) -> dict[str, Any]:
    return {"pipelines": services.pipeline_assignments(cluster=cluster)}


@endpoint(PipelineReportRequest)
def pipelines_report(cluster: VirtualCluster, body: PipelineReportRequest) -> dict[str, Any]:
    services.pipeline_report(
        cluster=cluster,
        agent_id=body.agent_id,
        reports=[
            services.StatusReport(
                id=p.id,
                version=p.version,
                records_in=p.records_in,
                records_out=p.records_out,
                records_dead_lettered=p.records_dead_lettered,
                records_filtered=p.records_filtered,
                errors=msgspec.to_builtins(p.errors),
                lag=p.lag,
                state=p.state,
            )
            for p in body.pipelines
        ],
    )
    return {}
