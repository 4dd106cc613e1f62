"""What the control plane's processes load at start: no PySpark in the web server nor in
the Celery worker (Spark runs in jobs-role agents; the in-process driver of the tests
and benchmarks is ``tests/jobs/driver.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# What each process imports before it serves: the ASGI app with every URL (the first
# request loads them) and the agent API's routes; the Celery app with every task module.
STARTS = {
    "web": (
        "import controlplane.asgi;"
        "from django.urls import get_resolver; get_resolver().url_patterns;"
        "from controlplane import agent_urls"
    ),
    "worker": (
        "from controlplane.celery import app; app.loader.import_default_modules();"
        "assert 'virtualclusters.jobs.tasks.jobs_check' in app.tasks, sorted(app.tasks)"
    ),
}


def _imported(code: str) -> list[str]:
    """The modules `python -X importtime -c code` reports, one per line."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "controlplane.settings",
        "SECRET_KEY": "a-test-key-of-more-than-thirty-two-characters",
    }
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [
        line.rsplit("|", 1)[-1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    ]


@pytest.mark.parametrize("process", sorted(STARTS))
def test_the_control_plane_process_does_not_import_pyspark(process):
    modules = _imported(STARTS[process])
    assert "django" in modules  # the check reads real output
    assert not [m for m in modules if m.split(".")[0] == "pyspark"]
