"""How the control plane runs a job: in this process (default) or in a child process.

``inprocess``: the job runs on this process's cached SparkSession (`jobs.session`).
The Celery worker pays Spark's start-up once and each job then costs only its own
work; the result comes back as a return value. Run such workers with a small
concurrency (each worker process holds a JVM).

``subprocess``: ``python -m jobs.<name> --plan … --result …`` per job: a fresh JVM each
time (seconds of start-up), nothing held between jobs, and a crash of the job cannot
take the worker down. The same command under ``spark-submit`` runs a job on a cluster.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from jobs.session import spark_session

JOBS = {
    "compaction": "jobs.compaction",
    "key_compaction": "jobs.key_compaction",
    "retention": "jobs.retention",
    "orphan_cleanup": "jobs.orphan_cleanup",
    "table_append": "jobs.table_append",
}
MODES = ("inprocess", "subprocess")
_CHECKOUT = Path(__file__).resolve().parent.parent


class JobFailed(Exception):
    """A job's child process failed; the message carries the end of its stderr."""


def run_job(
    name: str,
    plan: dict,
    *,
    mode: str = "inprocess",
    master: str | None = None,
    timeout_s: float | None = None,
) -> dict:
    """Run job `name` on `plan` and return its result."""
    module_name = JOBS.get(name)
    if module_name is None:
        raise ValueError(f"unknown job {name!r} (known: {', '.join(sorted(JOBS))})")
    if mode == "inprocess":
        return importlib.import_module(module_name).run(spark_session(master), plan)
    if mode != "subprocess":
        raise ValueError(f"unknown job mode {mode!r} (known: {', '.join(MODES)})")
    with tempfile.TemporaryDirectory(prefix=f"floe-{name}-") as folder:
        plan_path, result_path = Path(folder, "plan.json"), Path(folder, "result.json")
        plan_path.write_text(json.dumps(plan, separators=(",", ":")))
        command = [
            sys.executable,
            "-m",
            module_name,
            "--plan",
            str(plan_path),
            "--result",
            str(result_path),
        ]
        if master:
            command += ["--master", master]
        try:
            done = subprocess.run(
                command, cwd=_CHECKOUT, capture_output=True, text=True, timeout=timeout_s
            )
        except subprocess.TimeoutExpired:
            raise JobFailed(f"job {name} did not finish in {timeout_s} s") from None
        if done.returncode != 0:
            raise JobFailed(f"job {name} exited with {done.returncode}: {done.stderr[-4000:]}")
        return json.loads(result_path.read_text())
