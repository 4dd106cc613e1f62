"""Fixtures that run real agent processes against a real control plane.

`agent(key)` starts `python -m agents` in a subprocess (Kafka and HTTP ports chosen by the
OS, a `file://` bucket shared by every agent of the test), waits for its ready line and
stops it at teardown. Reuse it for consumer-group, S3 and kill tests:

    @pytest.mark.django_db(transaction=True)
    def test_something(agent, cluster):
        a = agent(cluster.key)                 # or agent(key, bucket_url="s3://…", extra=[…])
        producer = Producer({"bootstrap.servers": a.bootstrap})
        a.kill()                               # SIGKILL; a.stop() is a clean SIGTERM
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.factories import make_cluster

REPO = Path(__file__).resolve().parents[2]
READY = re.compile(r"agent (\S+) serving Kafka on (\S+):(\d+) for cluster (\S+)")
HTTP_LINE = re.compile(r"metrics and health on http://[^:]+:(\d+)/")
REGISTRY_LINE = re.compile(r"schema registry on http://[^:]+:(\d+)/")
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 15.0


@dataclass
class ClusterUnderTest:
    cluster: object
    key: str

    @property
    def public_id(self) -> str:
        return self.cluster.public_id


class AgentProcess:
    """A running agent; `bootstrap` is what Kafka clients connect to."""

    def __init__(self, proc: subprocess.Popen, stdout: Path, stderr: Path) -> None:
        self.proc = proc
        self.stdout_path = stdout
        self.stderr_path = stderr
        self.agent_id = ""
        self.host = "127.0.0.1"
        self.port = 0
        self.http_port = 0
        self.registry_port = 0  # the schema-registry role's REST API (0: not served)
        self.cluster_id = ""

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def registry_url(self) -> str:
        return f"http://127.0.0.1:{self.registry_port}"

    def logs(self) -> str:
        """Everything the agent wrote to stderr so far."""
        return self.stderr_path.read_text(errors="replace")

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ready = READY.search(self.stdout_path.read_text(errors="replace"))
            http = HTTP_LINE.search(self.logs())
            if ready and http:
                self.agent_id, self.host = ready.group(1), ready.group(2)
                self.port, self.cluster_id = int(ready.group(3)), ready.group(4)
                self.http_port = int(http.group(1))
                registry = REGISTRY_LINE.search(self.logs())
                self.registry_port = int(registry.group(1)) if registry else 0
                return
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"agent exited with {self.proc.returncode} before it was ready:\n{self.logs()}"
                )
            time.sleep(0.05)
        self.kill()
        raise TimeoutError(f"agent not ready after {timeout_s}s:\n{self.logs()}")

    def metrics(self) -> str:
        with urllib.request.urlopen(self.http_url + "/metrics", timeout=5) as resp:
            return resp.read().decode()

    def health(self) -> tuple[int, str]:
        """The agent's /healthz: its status (a 503 too) and body."""
        try:
            with urllib.request.urlopen(self.http_url + "/healthz", timeout=5) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM and wait: the clean shutdown path. Returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL: the crash path."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)


def agent_command(
    *,
    control_plane_url: str,
    key: str,
    bucket_url: str,
    batch_timeout_ms: int = 20,
    extra: list[str] | None = None,
) -> list[str]:
    """The command line that starts one agent on OS-chosen ports (`--listener`s in
    `extra` replace the single Kafka port)."""
    kafka_port = [] if "--listener" in (extra or []) else ["--kafka-port", "0"]
    return [
        sys.executable,
        "-m",
        "agents",
        "--control-plane-url",
        control_plane_url,
        "--agent-key",
        key,
        "--bucket-url",
        bucket_url,
        *kafka_port,
        "--http-port",
        "0",
        "--schema-registry-port",
        "0",
        "--batch-timeout",
        str(batch_timeout_ms),
        *(extra or []),
    ]


@pytest.fixture
def bucket_url(tmp_path) -> str:
    """A `file://` bucket every agent of one test shares (a `mem://` one cannot be shared
    across processes)."""
    path = tmp_path / "bucket"
    path.mkdir()
    return path.as_uri()


@pytest.fixture
def cluster(transactional_db) -> ClusterUnderTest:
    """A virtual cluster (auto-create on, 1 partition by default) and its agent key."""
    created, key = make_cluster("agent-tests", auto_create_topics=True)
    return ClusterUnderTest(created, key)


@pytest.fixture
def agent(live_server, bucket_url, tmp_path):
    """Factory: `agent(key, *, bucket_url=None, batch_timeout_ms=20, extra=None)` → a ready
    `AgentProcess` talking to the test's live control plane. Stopped at teardown."""
    started: list[AgentProcess] = []

    def start(
        key: str,
        *,
        bucket_url: str = bucket_url,
        batch_timeout_ms: int = 20,
        extra: list[str] | None = None,
        wait: bool = True,
        control_plane_url: str | None = None,
    ) -> AgentProcess:
        n = len(started)
        stdout, stderr = tmp_path / f"agent{n}.out", tmp_path / f"agent{n}.err"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        for name in ("FLOE_CONTROL_PLANE_URL", "FLOE_AGENT_KEY", "FLOE_BUCKET_URL"):
            env.pop(name, None)
        with stdout.open("wb") as out, stderr.open("wb") as err:
            proc = subprocess.Popen(
                agent_command(
                    control_plane_url=control_plane_url or live_server.url,
                    key=key,
                    bucket_url=bucket_url,
                    batch_timeout_ms=batch_timeout_ms,
                    extra=extra,
                ),
                cwd=REPO,
                env=env,
                stdout=out,
                stderr=err,
            )
        process = AgentProcess(proc, stdout, stderr)
        started.append(process)
        if wait:
            process.wait_ready()
        return process

    yield start
    for number, process in enumerate(started):
        process.stop()
        # Shown by pytest only when the test failed: the agent's side of the story.
        print(f"--- agent {number} ({process.agent_id}) stderr ---\n{process.logs()[-20000:]}")
