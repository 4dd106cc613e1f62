"""The jobs page in the console and the job-runs endpoint of the REST API."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from metadata_store.models import SegmentFile
from virtualclusters.jobs.models import JobRun

pytestmark = pytest.mark.urls("tests.jobs.urls")


@pytest.fixture
def runs(alice, bob):
    now = timezone.now()
    cluster = alice["cluster"]
    done = JobRun.objects.create(
        cluster=cluster,
        kind="compaction",
        state="succeeded",
        started_at=now - timedelta(seconds=12),
        finished_at=now - timedelta(seconds=2),
        input_files=40,
        input_bytes=40 * 1024 * 1024,
        output_files=1,
        output_bytes=39 * 1024 * 1024,
        details={"swapped": True, "batches": 160, "output_root": "x/", "cleaned": {"17": 4}},
    )
    failed = JobRun.objects.create(
        cluster=cluster, kind="retention", state="failed", error="StorageError: bucket gone"
    )
    SegmentFile.objects.create(cluster=cluster, key="a.seg", size=3000, level=0)
    SegmentFile.objects.create(cluster=cluster, key="b.seg", size=5000, level=1)
    SegmentFile.objects.create(cluster=cluster, key="c.seg", size=7000, level=0, state="replaced")
    JobRun.objects.create(cluster=bob["cluster"], kind="compaction", error="bob's secret")
    return done, failed


def test_the_jobs_page_shows_a_running_jobs_progress_and_agent(alice):
    JobRun.objects.create(
        cluster=alice["cluster"],
        kind="compaction",
        state="running",
        started_at=timezone.now(),
        lease_agent="agt-jobs-1",
        attempts=2,
        progress={
            "stage": "compacting",
            "bytes_done": 3 * 1024 * 1024,
            "bytes_total": 12 * 1024 * 1024,
        },
    )
    client = Client()
    client.force_login(alice["user"])
    html = client.get(f"/clusters/{alice['cluster'].public_id}/jobs").content.decode()
    assert "Compacting" in html and "3.0\xa0MB of 12.0\xa0MB" in html
    assert "agt-jobs-1" in html and "attempt 2" in html
    assert '<progress max="12582912" value="3145728">' in html


def test_the_jobs_page_lists_runs_and_files_per_level(alice, runs):
    client = Client()
    client.force_login(alice["user"])
    page = client.get(f"/clusters/{alice['cluster'].public_id}/jobs")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Compaction" in html and "Retention" in html
    assert "40 files, 40.0\xa0MB → 1 file, 39.0\xa0MB" in html
    assert "10.0 s" in html
    assert "StorageError: bucket gone" in html
    assert "Level 0 (ingestion)" in html and "Level 1 (compacted)" in html
    assert "bob&#x27;s secret" not in html and "bob's secret" not in html


def test_the_jobs_page_of_another_tenants_cluster_is_a_404(alice, bob, runs):
    client = Client()
    client.force_login(alice["user"])
    assert client.get(f"/clusters/{bob['cluster'].public_id}/jobs").status_code == 404


def test_the_api_lists_runs_newest_first_without_internal_details(api, alice, runs):
    done, failed = runs
    response = api(alice["reader"]).get(f"/api/v1/clusters/{alice['cluster'].public_id}/job-runs/")
    assert response.status_code == 200
    body = response.json()
    assert [r["id"] for r in body] == [failed.public_id, done.public_id]
    assert body[1]["details"] == {"swapped": True, "batches": 160}
    assert body[1]["duration_s"] == 10.0
    assert (body[1]["input_files"], body[1]["output_files"]) == (40, 1)
    assert body[0]["error"] == "StorageError: bucket gone"

    only = api(alice["reader"]).get(
        f"/api/v1/clusters/{alice['cluster'].public_id}/job-runs/?kind=retention&limit=5"
    )
    assert [r["id"] for r in only.json()] == [failed.public_id]
    bad = api(alice["reader"]).get(
        f"/api/v1/clusters/{alice['cluster'].public_id}/job-runs/?kind=nope&limit=0"
    )
    assert bad.status_code == 400


def test_the_api_hides_another_tenants_runs(api, alice, bob, runs):
    response = api(alice["admin"]).get(f"/api/v1/clusters/{bob['cluster'].public_id}/job-runs/")
    assert response.status_code == 404
    assert api().get(f"/api/v1/clusters/{alice['cluster'].public_id}/job-runs/").status_code in (
        401,
        403,
    )
