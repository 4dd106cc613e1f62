"""``make run``: the whole of Floe on one machine, with embedded parts.

Starts (or reuses) an embedded PostgreSQL and Redis unless ``DATABASE_URL`` /
``REDIS_URL`` are set, migrates, creates the demo tenant, then runs the control plane
(uvicorn), one agent with every role (``file://`` bucket under the data folder; it also
runs the Spark jobs, as a customer's jobs-role agent would) and a Celery worker with beat
(which plans the jobs). Prints one ``name: value`` line per thing a person or a script needs, then waits;
Ctrl-C (SIGINT) or SIGTERM stops everything it started.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import cast

from controlplane import webserver
from controlplane.embedded import data_dir_from_env, postgres_url, redis_url

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
SCHEMA_REGISTRY_PORT = 8081  # Confluent's, where free


def _say(line: str) -> None:
    print(line, flush=True)


def _port_taken(port: int) -> bool:
    """Whether something already listens on (or holds) 127.0.0.1:``port``."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_tcp(port: int, timeout: float) -> bool:
    """Wait until 127.0.0.1:``port`` accepts connections."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            sock.settimeout(1)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.2)
    return False


def _wait_http(url: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return True
        except OSError:
            time.sleep(0.3)
    return False


def main() -> int:
    data_dir = data_dir_from_env(ROOT)
    http_port = int(os.environ.get("FLOE_HTTP_PORT", "8000"))
    kafka_port = int(os.environ.get("FLOE_KAFKA_PORT", "9092"))
    agent_http_port = int(os.environ.get("FLOE_AGENT_HTTP_PORT", str(kafka_port + 1000)))
    # Confluent's port when free; another free one otherwise, unless it was asked for.
    registry_port = int(os.environ.get("FLOE_SCHEMA_REGISTRY_PORT") or 0)
    if not registry_port:
        registry_port = _free_port() if _port_taken(SCHEMA_REGISTRY_PORT) else SCHEMA_REGISTRY_PORT
    for port, name, variable in (
        (http_port, "the console", "FLOE_HTTP_PORT"),
        (kafka_port, "the agent's Kafka listener", "FLOE_KAFKA_PORT"),
        (agent_http_port, "the agent's HTTP port", "FLOE_AGENT_HTTP_PORT"),
        (registry_port, "the agent's schema registry", "FLOE_SCHEMA_REGISTRY_PORT"),
    ):
        if _port_taken(port):
            sys.stderr.write(
                f"make run: port {port} ({name}) is already in use; "
                f"stop what uses it or set {variable}=<another port>\n"
            )
            return 1
    env = dict(os.environ)
    env.setdefault("DEBUG", "1")
    env["FLOE_DATA_DIR"] = str(data_dir)
    env["FLOE_HTTP_PORT"] = str(http_port)
    env["FLOE_KAFKA_PORT"] = str(kafka_port)
    env.setdefault("PYTHONUNBUFFERED", "1")
    # Start the embedded services here, once, and hand their URLs to every child.
    env["DATABASE_URL"] = env.get("DATABASE_URL") or postgres_url(data_dir, keep_running=False)
    env["REDIS_URL"] = env.get("REDIS_URL") or redis_url(data_dir)
    logs = data_dir / "logs"
    logs.mkdir(exist_ok=True)

    def manage(*args: str) -> str:
        done = subprocess.run(
            [PY, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True
        )
        if done.returncode != 0:
            sys.stderr.write(done.stdout + done.stderr)
            raise SystemExit(f"make run: 'manage.py {' '.join(args)}' failed (see above)")
        return done.stdout

    manage("migrate", "--noinput")
    demo = json.loads(manage("floe_demo").strip().splitlines()[-1])

    children: list[subprocess.Popen] = []

    def start(name: str, argv: list[str]) -> subprocess.Popen:
        log = open(logs / f"{name}.log", "ab")  # noqa: SIM115 - lives as long as the child
        child = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        children.append(child)
        return child

    def stop(*_args, code: int = 0) -> None:
        for child in children:
            if child.poll() is None:
                child.terminate()
        deadline = time.monotonic() + 10
        for child in children:
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
        raise SystemExit(code)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)

    start("web", webserver.command(http_port))
    console = f"http://127.0.0.1:{http_port}/"
    if not _wait_http(console + "healthz", 60):
        _say(f"make run: the control plane did not answer in 60 s; see {logs / 'web.log'}")
        stop(code=1)
    agent_args = [
        PY,
        "-m",
        "agents",
        "--control-plane-url",
        console.rstrip("/"),
        "--agent-key",
        demo["agent_key"],
        "--bucket-url",
        f"file://{data_dir / 'bucket'}",
        "--kafka-port",
        str(kafka_port),
        "--http-port",
        str(agent_http_port),
        "--schema-registry-port",
        str(registry_port),
        "--roles",
        "produce,consume,jobs,schema-registry",
    ]
    start("agent", agent_args)
    # The worker only plans (jobs run on the agent): two threads are plenty.
    start(
        "worker",
        [
            PY,
            "-m",
            "celery",
            "-A",
            "controlplane",
            "worker",
            "--beat",
            "--loglevel",
            "INFO",
            "--pool",
            "threads",
            "--concurrency",
            "2",
            "--schedule",
            str(data_dir / "celerybeat-schedule"),
        ],
    )

    # Each line is printed once what it names answers: the console (checked above), then
    # the agent's Kafka port, which a client started on the "bootstrap" line connects to.
    _say(f"console: {console}")
    _say(f"login: {demo['email']} {demo['password']}")
    _say(f"api-key: {demo['api_key']}")
    _say(f"cluster: {demo['cluster']}")
    if not _wait_tcp(kafka_port, 60):
        _say(
            f"make run: the agent did not listen on {kafka_port} in 60 s; see {logs / 'agent.log'}"
        )
        stop(code=1)
    _say(f"bootstrap: 127.0.0.1:{kafka_port}")
    registry = f"http://127.0.0.1:{registry_port}"
    if not _wait_http(registry + "/", 60):
        _say(f"make run: the schema registry did not answer in 60 s; see {logs / 'agent.log'}")
        stop(code=1)
    _say(f"schema-registry: {registry}")
    _say(f"logs: {logs}   (Ctrl-C stops everything)")
    while True:
        for child in children:
            if child.poll() is not None:
                _say(
                    f"make run: {' '.join(cast(list[str], child.args)[:3])} exited with {child.returncode}; see {logs}"
                )
                stop(code=1)
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(main())
