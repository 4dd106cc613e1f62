"""The jobs role's runner against a real control plane: when the lease was lost while a
step ran, the result is refused and the outputs the step wrote are deleted from the
agent's bucket, and the run goes to the next lease. (The Spark step itself is replaced
by one that writes an output: `tests/jobs/test_byoc.py` runs real ones.)"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from agents.control_plane import ControlPlaneClient
from agents.job_runner import JobRunner
from core.kafka.records import RecordInput, encode_batch
from core.storage import open_store
from metadata_store.models import Lease
from tests.jobs.segments import SegmentWriter
from virtualclusters.jobs import services as jobs_services
from virtualclusters.jobs.models import JobRun

pytestmark = pytest.mark.django_db(transaction=True)


class StepThatLosesItsLease(JobRunner):
    """Writes an output where the plan says, and meanwhile the lease runs out."""

    written: list[str] = []

    def _run_step(self, step):
        key = step["plan"]["output_prefix"] + "000000.seg"
        self.store.put(key, b"compacted bytes")
        self.written.append(key)
        try:
            for run in JobRun.objects.filter(state="running"):
                Lease.objects.filter(subject=f"job {run.public_id}").update(
                    expires_at=timezone.now() - timedelta(seconds=1)
                )
        finally:
            connection.close()  # this thread's: the test database must drop at the end
        return {"files": [{"key": key, "size": 15, "batch_count": 1}], "batches": []}


def test_a_result_from_a_lost_lease_is_refused_and_its_outputs_deleted(
    live_server, cluster, bucket_url, settings
):
    settings.FLOE_COMPACTION_MIN_FILES = 2
    writer = SegmentWriter(cluster.cluster, bucket_url)
    topic = writer.topic("t")
    for n in range(2):
        writer.commit([(topic, 0, encode_batch([RecordInput(key=b"k", value=b"v%d" % n)]))])
    run = jobs_services.job_dispatch(cluster=cluster.cluster, kind=JobRun.Kind.COMPACTION)

    async def lease_and_execute():
        client = ControlPlaneClient(live_server.url, cluster.key)
        runner = StepThatLosesItsLease(
            client, open_store(bucket_url), agent_id="agt-j", bucket_url=bucket_url, lease_s=30
        )
        try:
            answer = await client.call("jobs/lease", {"agent_id": "agt-j", "lease_s": 30})
            await runner.execute(answer["run"])
            return await client.call("jobs/lease", {"agent_id": "agt-k", "lease_s": 30})
        finally:
            runner.close()
            await client.close()

    second = asyncio.run(lease_and_execute())

    (written,) = StepThatLosesItsLease.written
    assert written.startswith(f"{cluster.public_id}/compacted/{run.public_id}/")
    keys = {o.key for o in open_store(bucket_url).list(cluster.public_id + "/")}
    assert written not in keys and len(keys) == 2  # the two inputs stay
    assert second["run"]["id"] == run.public_id and second["run"]["attempt"] == 2
    run.refresh_from_db()
    assert run.state == "running" and run.lease_agent == "agt-k"
