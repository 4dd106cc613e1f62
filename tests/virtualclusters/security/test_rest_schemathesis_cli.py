"""Schemathesis's own command line against the REST API over HTTP, every phase — examples,
coverage, fuzzing and the stateful one (calls chained through the ids and Location
headers one answer gives the next: create a cluster, read it, change it, delete it) —
with every check and a valid admin key, as `make fuzz` runs it, bounded in examples.

In process (test_rest_schemathesis.py) Hypothesis replays a stateful run against a
database that moved on; over HTTP against a live server each call sees what the last
one left, as a user's would.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.virtualclusters.security.fuzz_tenant import make_fuzz_tenant

ROOT = Path(__file__).resolve().parents[3]
ST = Path(sys.executable).with_name("st")

pytestmark = [pytest.mark.timeout(600), pytest.mark.django_db(transaction=True)]


def test_every_phase_stateful_included_ends_with_no_failure(live_server):
    key = make_fuzz_tenant("schemathesis-cli-co")["key"]
    run = subprocess.run(
        [
            str(ST),
            "run",
            f"{live_server.url}/api/v1/schema/?format=json",
            "-H",
            f"Authorization: Bearer {key}",
            "--checks",
            "all",
            "--phases",
            "examples,coverage,fuzzing,stateful",
            "--max-examples",
            "6",
            "--seed",
            "14",
            "--request-timeout",
            "20",
            # One worker: with two, schemathesis's threads can meet CPython 3.11's
            # thread-unsafe ast.parse ("AST constructor recursion depth mismatch").
            "--workers",
            "1",
            "--no-color",
        ],
        cwd=ROOT,  # schemathesis.toml
        capture_output=True,
        text=True,
        timeout=540,
    )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-6000:]
    # It ran what it says: each phase, the stateful one chaining calls, and every case passed.
    for phase in ("Coverage", "Fuzzing", "Stateful"):
        assert f"✅ {phase}" in output, output[-6000:]
    cases = re.search(r"(\d+) generated, (\d+) passed", output)
    assert cases and cases.group(1) == cases.group(2) and int(cases.group(1)) > 1000, output[-6000:]
