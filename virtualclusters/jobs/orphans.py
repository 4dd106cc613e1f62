"""Orphan cleanup: list the cluster's objects in the data plane, and delete those no
file row knows once they are past the grace period (never a running job's outputs)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from virtualclusters.jobs import selectors
from virtualclusters.jobs.models import JobRun
from virtualclusters.jobs.selectors import epoch_ms
from virtualclusters.jobs.steps import Step, deletion, grace, plan_keep


def orphan_cleanup_begin(run: JobRun) -> Step:
    cluster, now = run.cluster, timezone.now()
    known = selectors.known_file_keys(cluster)  # read before the listing: see below
    plan_keep(run, {"phase": "list", "now_ms": epoch_ms(now)})
    return Step(
        "orphan_cleanup",
        {
            "prefix": f"{cluster.public_id}/",
            "cutoff_ms": epoch_ms(now - grace()),
            "known_keys": sorted(known),
            "protected_prefixes": selectors.protected_output_roots(cluster, exclude_run=run),
        },
        stage="listing",
    )


def orphan_cleanup_continue(run: JobRun, result: dict[str, Any]) -> Step | dict[str, Any]:
    kept = run.details["_plan"]
    if kept["phase"] == "delete":
        sizes = kept["sizes"]
        deleted_keys = [key for _, key in result["deleted"] if key in sizes]
        return {
            "input_files": kept["listed"],
            "input_bytes": kept["listed_bytes"],
            "details": {
                "orphans_deleted": len(deleted_keys),
                "orphan_bytes_deleted": sum(sizes[key] for key in deleted_keys),
                "orphans_sample": sorted(deleted_keys)[:20],
            },
        }
    cluster = run.cluster
    now = datetime.fromtimestamp(kept["now_ms"] / 1000, tz=timezone.get_current_timezone())
    # A file committed after `known` was read is in the listing but not in `known`:
    # look the candidates up again now, and spare outputs of jobs started meanwhile.
    candidates = {key: (size, modified) for key, size, modified in result["orphans"]}
    known_now = selectors.known_file_keys(cluster, keys=list(candidates))
    protected = tuple(selectors.protected_output_roots(cluster, exclude_run=run))
    candidates = {
        key: found
        for key, found in candidates.items()
        if key not in known_now and not key.startswith(protected)
    }
    listed = {"listed": result["listed"], "listed_bytes": result["listed_bytes"]}
    if not candidates:
        return {
            "input_files": listed["listed"],
            "input_bytes": listed["listed_bytes"],
            "details": {"orphans_deleted": 0, "orphan_bytes_deleted": 0, "orphans_sample": []},
        }
    plan_keep(
        run,
        {"phase": "delete", **listed, "sizes": {k: size for k, (size, _) in candidates.items()}},
    )
    return deletion(
        [
            (None, key, datetime.fromtimestamp(modified / 1000, tz=now.tzinfo))
            for key, (_, modified) in candidates.items()
        ],
        now=now,
        stage="deleting orphans",
    )
