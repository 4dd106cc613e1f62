"""Shared harness for benchmarks: a bench database, the control plane's web server."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # `python bench/x.py` puts only bench/ on the path

from tests.serving import free_port, wait_until_answering  # noqa: E402

# The control plane's /metrics answers only the scraper holding its token.
METRICS_TOKEN = "bench-metrics-" + "m" * 40


def metrics_text(url: str) -> str:
    """``url``'s /metrics (the control plane's wants the token; an agent's ignores it)."""
    request = urllib.request.Request(
        url + "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read().decode()


def bench_env(data_dir: Path, database: str | None = None) -> dict:
    """Environment for a control plane on a fresh bench database.

    With ``DATABASE_URL`` set, a database ``database`` (else ``FLOE_BENCH_DATABASE``, else
    ``floe_bench``) is (re)created on that server (benchmarks that may run side by side on
    one server use their own names); otherwise the embedded PostgreSQL in ``data_dir``.
    """
    from controlplane.embedded import postgres_url

    # Production settings: DEBUG would log every query of every request.
    env = dict(
        os.environ,
        DEBUG="0",
        SECRET_KEY="bench-" + "x" * 40,
        ALLOWED_HOSTS="127.0.0.1,localhost",
        FLOE_DATA_DIR=str(data_dir),
        PYTHONUNBUFFERED="1",
        FLOE_METRICS_TOKEN=METRICS_TOKEN,
    )
    database = database or env.get("FLOE_BENCH_DATABASE", "floe_bench")
    # An embedded server here belongs to the benchmark: it stops when the benchmark exits.
    base = env.get("DATABASE_URL") or postgres_url(data_dir, keep_running=False)
    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {database}")
    head, _, tail = base.partition("?")
    env["DATABASE_URL"] = head.rsplit("/", 1)[0] + f"/{database}" + ("?" + tail if tail else "")
    env.setdefault("REDIS_URL", "redis://127.0.0.1:6379/14")
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True
    )
    return env


def django_setup(env: dict) -> None:
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "controlplane.settings")
    import django

    django.setup()


@contextlib.contextmanager
def control_plane(env: dict, *, workers: int = 1):
    """The web server (uvicorn, ``controlplane.asgi``, as `make run` and docker-compose
    start it) on a free port; yields its base URL."""
    from controlplane import webserver  # the repository is on sys.path (bench_env)

    port = free_port()
    proc = subprocess.Popen(
        webserver.command(port, workers=workers, access_log=False, log_level="warning"),
        cwd=ROOT,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_answering(url + "/healthz", proc, 60, "the control plane")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]
