"""Job runs leased by jobs-role agents through the agent API: only the agent key's own
cluster's runs, a lease with a deadline renewed by heartbeats carrying progress, an
expired lease re-queued, and the late result of a lost lease refused."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models.functions import Now
from django.utils import timezone

from metadata_store.models import Lease
from tests.metadata_store.conftest import AgentApi
from virtualclusters.jobs.models import JobRun

pytestmark = pytest.mark.django_db


def queue_orphan_cleanup(cluster) -> JobRun:
    # Orphan cleanup always has a Spark step (the listing): a lease hands it out.
    return JobRun.objects.create(cluster=cluster, kind=JobRun.Kind.ORPHAN_CLEANUP)


def _lease(run: JobRun) -> Lease:
    return Lease.objects.get(cluster_id=run.cluster_id, subject=f"job {run.public_id}")


def _expire(run: JobRun) -> None:
    """The run's lease, made to have expired a second ago (by the database's clock)."""
    Lease.objects.filter(pk=_lease(run).pk).update(expires_at=Now() - timedelta(seconds=1))


def lease(key: str, agent_id: str = "agt-jobs") -> dict | None:
    return AgentApi(key)("jobs/lease", {"agent_id": agent_id, "lease_s": 30})["run"]


def test_an_agent_leases_its_clusters_run_with_a_step_for_its_own_bucket(alice):
    run = queue_orphan_cleanup(alice["cluster"])
    leased = lease(alice["agent_key"])
    assert leased["id"] == run.public_id and leased["kind"] == "orphan_cleanup"
    assert leased["step"]["job"] == "orphan_cleanup"
    assert "bucket_url" not in leased["step"]["plan"]  # the agent brings its own
    run.refresh_from_db()
    assert run.state == "running" and run.lease_agent == "agt-jobs" and run.attempts == 1
    assert lease(alice["agent_key"], "agt-other") is None  # one lease at a time


def test_another_clusters_agent_can_neither_lease_nor_report_the_run(alice, bob):
    run = queue_orphan_cleanup(alice["cluster"])
    assert lease(bob["agent_key"]) is None
    leased = lease(alice["agent_key"])
    body = {"run_id": run.public_id, "lease": leased["lease"], "result": {"orphans": []}}
    refused = AgentApi(bob["agent_key"]).raw("jobs/report", body)
    assert refused.status_code == 409 and "no job run" in refused.json()["error"]
    run.refresh_from_db()
    assert run.state == "running"


def test_heartbeats_renew_the_lease_and_record_progress(alice):
    run = queue_orphan_cleanup(alice["cluster"])
    leased = lease(alice["agent_key"])
    AgentApi(alice["agent_key"])(
        "jobs/heartbeat",
        {
            "run_id": run.public_id,
            "lease": leased["lease"],
            "lease_s": 60,
            "progress": {"stage": "listing", "bytes_done": 10, "bytes_total": 40},
        },
    )
    run.refresh_from_db()
    assert run.progress == {"stage": "listing", "bytes_done": 10, "bytes_total": 40}
    assert _lease(run).expires_at > timezone.now() + timedelta(seconds=50)


def test_an_expired_lease_is_requeued_and_the_late_result_refused(alice):
    run = queue_orphan_cleanup(alice["cluster"])
    first = lease(alice["agent_key"], "agt-dead")
    _expire(run)
    # Expired by the database's clock: refused before anyone takes the run over.
    body = {"run_id": run.public_id, "lease": first["lease"], "lease_s": 30, "progress": {}}
    expired = AgentApi(alice["agent_key"]).raw("jobs/heartbeat", body)
    assert expired.status_code == 409 and "expired" in expired.json()["error"]
    second = lease(alice["agent_key"], "agt-alive")
    assert second["id"] == run.public_id and second["attempt"] == 2
    assert second["epoch"] == first["epoch"] + 1 and second["lease"] != first["lease"]
    late = AgentApi(alice["agent_key"]).raw(
        "jobs/report",
        {"run_id": run.public_id, "lease": first["lease"], "result": {"orphans": []}},
    )
    assert late.status_code == 409 and "lease" in late.json()["error"]
    done = AgentApi(alice["agent_key"])(
        "jobs/report",
        {
            "run_id": run.public_id,
            "lease": second["lease"],
            "result": {"orphans": [], "listed": 3, "listed_bytes": 300},
        },
    )
    assert done == {"step": None, "discard": []}
    run.refresh_from_db()
    assert run.state == "succeeded" and run.input_files == 3 and run.lease_agent == "agt-alive"


def test_a_renewal_racing_the_expiry_does_not_bring_the_lease_back(alice, monkeypatch):
    """The renewal reads the run (lease still good), the lease runs out, then the renewal
    writes: it must stay lost. (It was extended by 30 s: the job runner's test saw a step's
    result accepted after its lease had been made to expire.)"""
    from virtualclusters.jobs import leases

    run = queue_orphan_cleanup(alice["cluster"])
    leased = lease(alice["agent_key"])
    read = leases._leased

    def read_then_expire(*args, **kwargs):
        found = read(*args, **kwargs)
        _expire(run)
        return found

    monkeypatch.setattr(leases, "_leased", read_then_expire)
    refused = AgentApi(alice["agent_key"]).raw(
        "jobs/heartbeat",
        {"run_id": run.public_id, "lease": leased["lease"], "lease_s": 30, "progress": {}},
    )
    assert refused.status_code == 409 and "lease" in refused.json()["error"]
    run.refresh_from_db()
    assert _lease(run).expires_at < timezone.now()


def test_a_reported_error_fails_the_run_with_it(alice):
    run = queue_orphan_cleanup(alice["cluster"])
    leased = lease(alice["agent_key"])
    AgentApi(alice["agent_key"])(
        "jobs/report",
        {"run_id": run.public_id, "lease": leased["lease"], "error": "Py4JError: no Java"},
    )
    run.refresh_from_db()
    assert run.state == "failed" and run.error == "Py4JError: no Java"
