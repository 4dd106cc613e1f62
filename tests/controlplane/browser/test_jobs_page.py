"""The cluster page's bucket and the Jobs page's running and failed runs in a real
browser, wide and narrow."""

from __future__ import annotations

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tests.controlplane.browser.conftest import log_in
from tests.factories import make_cluster, make_org
from tests.metadata_store.conftest import AgentApi
from virtualclusters.jobs.models import JobRun

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_bucket_and_running_and_failed_jobs_are_shown(page, screenshots):
    user, org = make_org("Byoc")
    cluster, key = make_cluster("orders", org=org)
    AgentApi(key)(
        "register", {"agent_id": "agt-j1", "bucket_url": "s3://orders-data?region=eu-west-1"}
    )
    now = timezone.now()
    JobRun.objects.create(
        cluster=cluster, kind="compaction", state="running", started_at=now,
        lease_agent="agt-j1", attempts=1,
        progress={"stage": "compacting", "bytes_done": 40 << 20, "bytes_total": 96 << 20},
    )  # fmt: skip
    JobRun.objects.create(
        cluster=cluster, kind="retention", state="failed", started_at=now, finished_at=now,
        lease_agent="agt-j1", attempts=1,
        error="StorageError: s3://orders-data: AccessDenied (the agent's role lacks s3:DeleteObject)",
    )  # fmt: skip
    log_in(page, user)
    page.goto("/clusters/new")
    expect(page.get_by_label("Bucket")).to_be_visible()
    for width in (1366, 375):
        page.set_viewport_size({"width": width, "height": 800})
        page.screenshot(path=screenshots / f"cluster-new-{width}.png", full_page=True)
    page.goto(f"/clusters/{cluster.public_id}/")
    expect(page.locator("#bucket")).to_contain_text("s3://orders-data?region=eu-west-1")
    for width in (1366, 375):
        page.set_viewport_size({"width": width, "height": 800})
        page.screenshot(path=screenshots / f"cluster-bucket-{width}.png", full_page=True)
    page.goto(f"/clusters/{cluster.public_id}/jobs")
    expect(page.locator("#job-runs")).to_contain_text("Compacting")
    expect(page.locator("#job-runs progress")).to_have_count(1)
    expect(page.locator("#job-runs")).to_contain_text("AccessDenied")
    for width in (1366, 375):
        page.set_viewport_size({"width": width, "height": 800})
        page.screenshot(path=screenshots / f"jobs-{width}.png", full_page=True)
