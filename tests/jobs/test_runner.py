"""How jobs are started: their command line, and the subprocess mode."""

from __future__ import annotations

import json
import time

import pytest

from jobs import orphan_cleanup
from jobs.runner import run_job


def test_a_job_runs_from_its_command_line(spark, tmp_path, bucket_url):
    from core.storage import open_store

    store = open_store(bucket_url)
    store.put("vci_cli/segments/lost.seg", b"x" * 10)
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "bucket_url": bucket_url,
                "prefix": "vci_cli/",
                "cutoff_ms": int(time.time() * 1000) + 60_000,
                "known_keys": [],
            }
        )
    )
    result = tmp_path / "result.json"

    assert orphan_cleanup.main(["--plan", str(plan), "--result", str(result)]) == 0

    answer = json.loads(result.read_text())
    assert answer["listed"] == 1 and answer["orphans"][0][:2] == ["vci_cli/segments/lost.seg", 10]


def test_the_subprocess_mode_runs_a_job_on_a_fresh_spark(tmp_path, bucket_url):
    from core.storage import open_store

    store = open_store(bucket_url)
    store.put("vci_sub/segments/old.seg", b"x")
    store.put("vci_sub/segments/young.seg", b"x")
    now_ms = int(time.time() * 1000)
    plan = {
        "bucket_url": bucket_url,
        "now_ms": now_ms,
        "grace_ms": 60_000,
        "files": [
            [1, "vci_sub/segments/old.seg", now_ms - 61_000],
            [2, "vci_sub/segments/young.seg", now_ms],
        ],
    }

    result = run_job("retention", plan, mode="subprocess", master="local[1]", timeout_s=240)

    assert result == {"deleted": [[1, "vci_sub/segments/old.seg"]]}
    assert [info.key for info in store.list("vci_sub/")] == ["vci_sub/segments/young.seg"]


def test_unknown_jobs_and_modes_are_refused():
    with pytest.raises(ValueError, match="unknown job"):
        run_job("defrag", {})
    with pytest.raises(ValueError, match="unknown job mode"):
        run_job("retention", {"files": []}, mode="threads")
