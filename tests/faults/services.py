"""More processes a fault can kill: a Redis server of the test's own, and Celery's worker
and beat (each its own process, as production runs them)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.agents.conftest import AgentProcess, agent_command
from tests.faults.world import REPO
from tests.serving import free_port, wait_until_answering


def floe_env(*, database_url: str, redis_url: str | None = None, folder: Path) -> dict[str, str]:
    """The environment of a test's Floe processes (web, worker, beat): its database and
    Redis (else the test run's own), beat's transaction check every second (a task that
    touches the database to watch the worker by), outside pytest's variables."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "SECRET_KEY": "fault-processes-" + "x" * 40,
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "FLOE_DATA_DIR": str(folder / "data"),
        "DEBUG": "0",
        "PYTHONUNBUFFERED": "1",
        "FLOE_TXN_TIMEOUT_CHECK_S": "1",
    }
    if redis_url is not None:
        env["REDIS_URL"] = redis_url
    for name in ("PYTEST_VERSION", "PYTEST_CURRENT_TEST"):
        env.pop(name, None)
    return env


def agent_start(
    env: dict[str, str],
    folder: Path,
    name: str,
    *,
    control_plane_url: str,
    key: str,
    bucket_url: str | None = None,
) -> AgentProcess:
    """An agent on OS-chosen ports, once it serves; its bucket `bucket_url`, else the
    folder ``folder/bucket`` (shared by every agent started on `folder`)."""
    if bucket_url is None:
        bucket = folder / "bucket"
        bucket.mkdir(exist_ok=True)
        bucket_url = bucket.as_uri()
    command = agent_command(
        control_plane_url=control_plane_url,
        key=key,
        bucket_url=bucket_url,
        batch_timeout_ms=50,
    )
    out, err = folder / f"{name}.out", folder / f"{name}.err"
    agent_env = {k: v for k, v in env.items() if not k.startswith("FLOE_")}
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen(command, cwd=REPO, env=agent_env, stdout=stdout, stderr=stderr)
    agent = AgentProcess(proc, out, err)
    agent.wait_ready(60)
    return agent


class RedisServer:
    """``redis-server`` on its own port, nothing saved: `kill` (SIGKILL) loses everything
    it held, as a lost machine would; `start` again on the same port."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        with (self.folder / "redis.log").open("ab") as log:
            self.proc = subprocess.Popen(
                ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                 "--save", "", "--appendonly", "no", "--dir", str(self.folder)],
                stdout=log, stderr=log,
            )  # fmt: skip
        wait_until_answering(
            self.port, self.proc, 10, "redis-server", log=self.folder / "redis.log"
        )

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class CeleryProcess:
    """``celery -A controlplane worker`` (solo pool, its /metrics on a port of its own) or
    ``beat`` (its schedule file in `folder`)."""

    def __init__(self, kind: str, env: dict[str, str], folder: Path) -> None:
        self.kind = kind
        self.metrics_port = free_port() if kind == "worker" else 0
        self.env = (
            {**env, "FLOE_WORKER_METRICS_PORT": str(self.metrics_port)}
            if (self.metrics_port)
            else dict(env)
        )
        self.log = folder / f"celery-{kind}.log"
        command = [sys.executable, "-m", "celery", "-A", "controlplane", kind, "-l", "INFO"]
        if kind == "worker":
            command += ["--pool", "solo", "--without-gossip", "--without-mingle"]
        else:
            command += ["--schedule", str(folder / "celerybeat-schedule")]
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(command, cwd=REPO, env=self.env, stdout=log, stderr=log)
        if self.metrics_port:
            wait_until_answering(self.metrics_port, self.proc, 60, f"celery {kind}", log=self.log)

    def task_runs(self, task: str) -> float:
        """How many runs of `task` the worker finished (its /metrics)."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
        pattern = r'floe_celery_task_runs_total\{outcome="success",task="%s"\} (\S+)'
        found = re.search(pattern % re.escape(task), text)
        return float(found.group(1)) if found else 0.0

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def wait_until(check, timeout_s: float, interval_s: float = 0.2) -> float | None:
    """Seconds until `check()` is true, or None after `timeout_s`."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if check():
            return time.monotonic() - start
        time.sleep(interval_s)
    return None
