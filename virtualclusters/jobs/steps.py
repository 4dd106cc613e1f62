"""What every kind of job run shares: the step a run asks the data plane for, where
its outputs go, what it keeps between steps, and the conflict a swap can end in.

The kinds themselves live beside this module (``compaction``, ``retention``,
``orphans``); ``services`` drives a run through them.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from metadata_store.rewrites import SwapConflict
from virtualclusters.jobs.models import JobRun
from virtualclusters.jobs.selectors import epoch_ms

__all__ = ["SwapConflict", "Step"]  # SwapConflict: the metadata store's, raised by swaps


@dataclass(frozen=True)
class Step:
    """What a run needs done in the data plane next: Spark job `job` on `plan` (the
    executor adds its own ``bucket_url``); `stage` names it for the progress shown."""

    job: str
    plan: dict[str, Any]
    stage: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"job": self.job, "plan": self.plan, "stage": self.stage or self.job}


def details_update(run: JobRun, **details: Any) -> None:
    """Merge `details` into the run's details, in memory and in its row."""
    run.details = {**run.details, **details}
    JobRun.objects.filter(pk=run.pk).update(details=run.details)


def plan_keep(run: JobRun, plan: dict[str, Any]) -> None:
    """What the continuation of a step needs (the inputs as planned, for the
    compare-and-swap), kept on the run until it finishes."""
    details_update(run, _plan=plan)


def outputs_of(result: dict[str, Any] | None, *, under: str | None = None) -> list[str]:
    """Objects a job's result says it wrote (deleted when nothing will reference them);
    with `under`, only those below that prefix (never a file some index row names)."""
    files = (result or {}).get("files") or []
    keys = [f["key"] for f in files if isinstance(f, dict) and isinstance(f.get("key"), str)]
    if under is not None:
        keys = [k for k in keys if k.startswith(under) and ".." not in k]
    return keys


def output_root(run: JobRun) -> str:
    """The folder of a run's outputs (each attempt writes in a subfolder of its own)."""
    return f"{run.cluster.public_id}/compacted/{run.public_id}/"


def output_prefix(run: JobRun) -> str:
    """Where this attempt writes: under the run's root (protected from the orphan
    cleaner while the run is active), in a folder of its own."""
    root = output_root(run)
    details_update(run, output_root=root)
    return f"{root}{secrets.token_hex(4)}/"


def outputs_check(run: JobRun, result: dict[str, Any]) -> None:
    """A job's outputs lie under this run's output root (the agent that ran it is the
    cluster's, but its answer is still input)."""
    root = output_root(run)
    keys = outputs_of(result)
    if len(keys) != len(result["files"]) or any(not k.startswith(root) or ".." in k for k in keys):
        raise ValueError(f"the job's output files must lie under {root}")


def grace() -> timedelta:
    """How long an unreferenced file or an unknown object is kept before deletion."""
    return timedelta(seconds=settings.FLOE_FILE_DELETE_GRACE_S)


def deletion(
    entries: Sequence[tuple[int | None, str, datetime]], *, now: datetime, stage: str
) -> Step:
    """The retention job's step that deletes these (file id or None, key, unreferenced
    since) once their grace period has passed."""
    return Step(
        "retention",
        {
            "now_ms": epoch_ms(now),
            "grace_ms": settings.FLOE_FILE_DELETE_GRACE_S * 1000,
            "files": [[file_id, key, epoch_ms(since)] for file_id, key, since in entries],
        },
        stage=stage,
    )
