"""Without Chromium the browser tests skip on a developer's machine but fail under CI=true,
as every other real part does. Run in a child process whose PATH holds no chromium."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CHECK = """
import pytest
from tests.controlplane.browser.conftest import chromium_executable
try:
    print("found", chromium_executable())
except pytest.fail.Exception as outcome:
    print("failed:", outcome)
except pytest.skip.Exception as outcome:
    print("skipped:", outcome)
"""


def run_check(path: Path, **env: str) -> str:
    child_env = {k: v for k, v in os.environ.items() if k != "CI"}
    child_env.update(PATH=str(path), **env)
    done = subprocess.run(
        [sys.executable, "-c", CHECK],
        cwd=ROOT,
        env=child_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


def test_a_ci_run_without_chromium_fails(tmp_path):
    out = run_check(tmp_path, CI="true")
    assert out.startswith("failed:"), out
    assert "chromium is not installed" in out


def test_a_developer_run_without_chromium_skips(tmp_path):
    assert run_check(tmp_path).startswith("skipped:")
    assert run_check(tmp_path, CI="false").startswith("skipped:")


def test_chromium_on_the_path_is_the_one_used(tmp_path):
    chromium = tmp_path / "chromium"
    chromium.write_text("#!/bin/sh\n")
    chromium.chmod(0o755)
    assert run_check(tmp_path, CI="true") == f"found {chromium}"
