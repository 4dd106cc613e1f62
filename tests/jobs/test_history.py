"""Old job runs and rows of long-deleted files are forgotten; key compaction's progress is not."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from metadata_store.models import SegmentFile
from virtualclusters.jobs import services as jobs_services
from virtualclusters.jobs.models import JobRun


def test_history_prune_forgets_what_is_old_and_keeps_progress(tenant, settings):
    settings.FLOE_JOB_HISTORY_DAYS = 14
    now = timezone.now()
    old, recent = now - timedelta(days=15), now - timedelta(days=1)

    def run(kind: str, state: str, finished_at):
        return JobRun.objects.create(
            cluster=tenant, kind=kind, state=state, finished_at=finished_at
        )

    gone = [run("compaction", "succeeded", old), run("retention", "failed", old)]
    older_progress = run("key_compaction", "succeeded", old - timedelta(days=1))
    progress = run("key_compaction", "succeeded", old)
    kept = [run("compaction", "succeeded", recent), run("orphan_cleanup", "running", None)]
    for name, state, since in (
        ("long-deleted", "deleted", old),
        ("just-deleted", "deleted", recent),
        ("replaced-long-ago", "replaced", old),
    ):
        SegmentFile.objects.create(
            cluster=tenant, key=f"{name}.seg", size=1, state=state, unreferenced_at=since
        )

    assert jobs_services.history_prune(now=now) == (3, 1)

    left = set(JobRun.objects.values_list("id", flat=True))
    assert left == {progress.id, *(r.id for r in kept)}
    assert not left & {older_progress.id, *(r.id for r in gone)}
    assert set(SegmentFile.objects.values_list("key", flat=True)) == {
        "just-deleted.seg",
        "replaced-long-ago.seg",
    }
