"""Running ``floe`` as a user does: a subprocess, with a bound."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def floe(*args: str, stdin: str = "", timeout_s: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "floecli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout_s,
    )
