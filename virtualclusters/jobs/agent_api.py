"""Agent API calls of the jobs role (docs/AGENT_API.md "jobs/…"): lease a queued run of
the agent key's cluster, renew the lease with progress, report each step's result.
Thin adapters over `leases`."""

from __future__ import annotations

from typing import Any

import msgspec

from metadata_store.agent_api import schemas
from metadata_store.agent_api.endpoint import CallRefused, endpoint
from virtualclusters.jobs import leases
from virtualclusters.models import VirtualCluster


def _lost(exc: leases.LeaseLost) -> CallRefused:
    return CallRefused(409, str(exc))


@endpoint(schemas.JobLeaseRequest)
def jobs_lease(cluster: VirtualCluster, body: schemas.JobLeaseRequest) -> dict[str, Any]:
    leased = leases.job_run_lease(cluster=cluster, agent_id=body.agent_id, lease_s=body.lease_s)
    if leased is None:
        return {"run": None}
    run, step, epoch = leased
    return {
        "run": {
            "id": run.public_id,
            "kind": run.kind,
            "lease": run.lease_token,
            "epoch": epoch,
            "attempt": run.attempts,
            "step": step.as_dict(),
        }
    }


@endpoint(schemas.JobHeartbeatRequest)
def jobs_heartbeat(cluster: VirtualCluster, body: schemas.JobHeartbeatRequest) -> dict[str, Any]:
    progress = msgspec.to_builtins(body.progress) if body.progress is not None else {}
    try:
        leases.job_lease_renew(
            cluster=cluster,
            run_id=body.run_id,
            token=body.lease,
            lease_s=body.lease_s,
            progress=progress,
        )
    except leases.LeaseLost as exc:
        raise _lost(exc) from None
    return {"ok": True}


@endpoint(schemas.JobReportRequest)
def jobs_report(cluster: VirtualCluster, body: schemas.JobReportRequest) -> dict[str, Any]:
    try:
        advance = leases.job_run_report(
            cluster=cluster,
            run_id=body.run_id,
            token=body.lease,
            lease_s=body.lease_s,
            result=body.result,
            error=body.error,
        )
    except leases.LeaseLost as exc:
        raise _lost(exc) from None
    return {
        "step": advance.step.as_dict() if advance.step is not None else None,
        "discard": advance.discard,
    }
