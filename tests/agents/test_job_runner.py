"""The jobs role's runner against a real control plane: a step's result goes back with
its lease, and when the lease was lost meanwhile the result is refused and the outputs
the step wrote are deleted from the agent's bucket. (The Spark step itself is replaced:
`tests/jobs/test_byoc.py` runs real ones.)"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from agents.control_plane import ControlPlaneClient
from agents.job_runner import JobRunner
from core.storage import open_store
from virtualclusters.jobs.models import JobRun

pytestmark = pytest.mark.django_db(transaction=True)


class StepThenLoseLease(JobRunner):
    """Writes an output like a compaction would; `lose` makes the lease expire and go
    to another agent while the step runs."""

    lose = False

    def _run_step(self, step):
        try:
            return self._write_output()
        finally:
            connection.close()  # this thread's: the test database must drop at the end

    def _write_output(self):
        run = JobRun.objects.get(state="running")
        key = f"{run.cluster.public_id}/compacted/{run.public_id}/abcd/000000.seg"
        self.store.put(key, b"compacted bytes")
        if self.lose:
            JobRun.objects.filter(pk=run.pk).update(
                lease_expires_at=timezone.now() - timedelta(seconds=1)
            )
        return {"files": [{"key": key, "size": 15}], "orphans": [], "listed": 1, "listed_bytes": 15}


def run_once(live_server, key, bucket_url, *, lose: bool) -> None:
    async def go():
        client = ControlPlaneClient(live_server.url, key)
        runner = StepThenLoseLease(
            client, open_store(bucket_url), agent_id="agt-j", bucket_url=bucket_url, lease_s=30
        )
        runner.lose = lose
        try:
            answer = await client.call("jobs/lease", {"agent_id": "agt-j", "lease_s": 30})
            await runner.execute(answer["run"])
        finally:
            runner.close()
            await client.close()

    asyncio.run(go())


def test_a_refused_result_has_its_outputs_deleted(live_server, cluster, bucket_url):
    run = JobRun.objects.create(cluster=cluster.cluster, kind=JobRun.Kind.ORPHAN_CLEANUP)
    run_once(live_server, cluster.key, bucket_url, lose=True)
    assert [o.key for o in open_store(bucket_url).list(cluster.public_id + "/")] == []
    run.refresh_from_db()
    assert run.state == "running"  # the lost lease's result changed nothing

    JobRun.objects.filter(pk=run.pk).update(state="queued", lease_token="")
    run_once(live_server, cluster.key, bucket_url, lose=False)
    run.refresh_from_db()
    assert run.state == "succeeded" and run.attempts == 2 and run.input_files == 1
