"""The fault suite's own world: every part a separate process that a fault can kill.

A PostgreSQL of its own (initdb'd from the `pgserver` package's binaries into a temporary
folder, on its own port — never the machine's PostgreSQL, which others use), the control
plane's web server under uvicorn, moto's S3 server (a process of its own,
tests/fixtures_s3.py's `moto_s3_process`) behind a `TcpProxy`, and two agents
whose control-plane connections go through another `TcpProxy`. Agents and the web server
keep their ports across restarts, so clients bootstrapped to them find them again.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from controlplane import webserver
from tests.agents.conftest import AgentProcess, agent_command
from tests.agents.faults import TcpProxy
from tests.fixtures_s3 import MotoProcess, create_bucket, moto_s3_process
from tests.serving import free_port, wait_until_answering

REPO = Path(__file__).resolve().parents[2]
PG_USER = "pgserver"  # initdb refuses root: the user pgserver's package runs it as


def _let_postgres_user_in(bin_folder: Path, data: Path) -> None:
    """As root, what pgserver's own start does first: the user exists, and it may walk to
    the binaries (inside .venv, maybe under a mode-700 checkout) and to the data folder.
    Without it, the world depended on an embedded PostgreSQL started earlier in the run."""
    from pgserver.utils import (
        ensure_folder_permissions,
        ensure_prefix_permissions,
        ensure_user_exists,
    )

    ensure_user_exists(PG_USER)
    ensure_prefix_permissions(data)
    ensure_prefix_permissions(bin_folder)
    read, execute = stat.S_IRGRP | stat.S_IROTH, stat.S_IXGRP | stat.S_IXOTH
    ensure_folder_permissions(bin_folder, read | execute)
    ensure_folder_permissions(bin_folder.parent / "lib", read)


class LocalPostgres:
    """A throwaway PostgreSQL cluster: `start`, `stop` (fast shutdown), `restart`."""

    def __init__(self, folder: Path) -> None:
        import pgserver

        self.bin = Path(pgserver.__file__).parent / "pginstall" / "bin"
        self.data = folder / "pgdata"
        self.port = free_port()
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/floe"
        self._as_user = ["runuser", "-u", PG_USER, "--"] if os.geteuid() == 0 else []
        self.data.mkdir(parents=True)
        if self._as_user:
            _let_postgres_user_in(self.bin, self.data)
            shutil.chown(folder, PG_USER)
            shutil.chown(self.data, PG_USER)
        self._run(
            str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
            "--encoding=utf8", "--no-sync",
        )  # fmt: skip
        self.start()
        self._run(str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port),
                  "-U", "postgres", "floe")  # fmt: skip

    def _run(self, *command: str) -> None:
        subprocess.run([*self._as_user, *command], check=True, capture_output=True, timeout=60)

    def start(self) -> None:
        options = f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options, "-w",
                  "-l", str(self.data / "log"), "start")  # fmt: skip

    def stop(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        try:
            self.stop()
        except subprocess.CalledProcessError:
            pass


class WebServer:
    """The control plane's web server (uvicorn, ``controlplane.asgi``) on a fixed port."""

    def __init__(self, env: dict[str, str], folder: Path) -> None:
        self.env = env
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = folder / "web.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                webserver.command(self.port, access_log=False),
                cwd=REPO,
                env=self.env,
                stdout=log,
                stderr=log,
            )
        # Answering: 405 for a GET.
        wait_until_answering(
            self.url + "/agent/v1/heartbeat", self.proc, 30, "the web server", log=self.log
        )

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        # The port closes with the process; wait until it has.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) != 0:
                    return
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()


def prepare_database(env: dict[str, str], *, make_cluster: bool = True) -> tuple[str, str]:
    """Migrate the database at the environment's DATABASE_URL and (unless not
    `make_cluster`) make the cluster ``faults`` (topics created on first use); returns its
    agent key and an API key of its organization (empty strings without a cluster)."""
    script = (
        "import django; django.setup();"
        "from django.core.management import call_command;"
        "call_command('migrate', verbosity=0);"
    )
    if make_cluster:
        script += (
            "from tests.factories import make_api_key, make_cluster;"
            "c, key = make_cluster('faults', auto_create_topics=True);"
            "print('KEY', key, make_api_key(c.organization))"
        )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        env={**env, "DJANGO_SETTINGS_MODULE": "controlplane.settings"},
        capture_output=True,
        text=True,
        timeout=180,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    if not make_cluster:
        return "", ""
    agent_key, api_key = done.stdout.split("KEY ", 1)[1].split()
    return agent_key, api_key


class World:
    """Everything the fault suite runs: see the module docstring. `agent_flags` go on
    every agent's command line (e.g. ``--ripcord``); `s3_process` is moto's server, when
    the caller started it as a process (its CPU and requests go into the figures);
    `s3_proxy=False` lets the agents reach it directly (a world that never cuts or tears
    the bucket's link, whose proxy would be one more thread of the test's busy process)."""

    def __init__(
        self,
        s3_endpoint: str,
        bucket: str,
        *,
        agent_flags: tuple[str, ...] = (),
        s3_process: MotoProcess | None = None,
        s3_proxy: bool = True,
    ) -> None:
        self.agent_flags = list(agent_flags)
        self.s3_process = s3_process
        self.folder = Path(tempfile.mkdtemp(prefix="floe-faults-"))
        os.chmod(self.folder, 0o755)
        self.pg = LocalPostgres(self.folder / "pg")
        env = {
            **os.environ,
            "DATABASE_URL": self.pg.url,
            "SECRET_KEY": "fault-suite-" + "x" * 40,
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "FLOE_DATA_DIR": str(self.folder / "data"),
            "DEBUG": "0",
            "PYTHONUNBUFFERED": "1",
        }
        env.pop("PYTEST_VERSION", None)
        env.pop("PYTEST_CURRENT_TEST", None)
        self.env = env
        self.agent_key = self._prepare_database()
        self.web = WebServer(env, self.folder)
        self.web.start()
        self.cp_proxy = TcpProxy(self.web.port)
        s3_port = int(s3_endpoint.rsplit(":", 1)[1])
        self.s3_proxy = TcpProxy(s3_port) if s3_proxy else None
        if self.s3_proxy is not None:
            s3_port = self.s3_proxy.port
        self.bucket_url = f"s3://{bucket}?endpoint=http://127.0.0.1:{s3_port}&region=us-east-1"
        self.agents: list[AgentProcess] = []
        self._agent_ports: list[tuple[int, int]] = []
        for n in range(2):
            self._agent_ports.append((free_port(), free_port()))
            self.agents.append(self._start_agent(n))

    def _prepare_database(self) -> str:
        return prepare_database(self.env)[0]

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{kafka}" for kafka, _ in self._agent_ports)

    def _start_agent(self, n: int) -> AgentProcess:
        kafka, http = self._agent_ports[n]
        command = agent_command(
            control_plane_url=self.cp_proxy.url,
            key=self.agent_key,
            bucket_url=self.bucket_url,
            batch_timeout_ms=50,
            extra=self.agent_flags,
        )
        command[command.index("--kafka-port") + 1] = str(kafka)
        command[command.index("--http-port") + 1] = str(http)
        out, err = self.folder / f"agent{n}.out", self.folder / f"agent{n}.err"
        env = {k: v for k, v in self.env.items() if not k.startswith("FLOE_")}
        with out.open("wb") as stdout, err.open("ab") as stderr:
            out.write_bytes(b"")
            proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=stdout, stderr=stderr)
        agent = AgentProcess(proc, out, err)
        agent.wait_ready(60)
        return agent

    def restart_agent(self, n: int) -> None:
        self.agents[n].kill()
        self.agents[n] = self._start_agent(n)

    def agents_alive(self, but: int | None = None) -> bool:
        return all(a.proc.poll() is None for n, a in enumerate(self.agents) if n != but)

    def partition_ids(self, topic: str) -> list[int]:
        import psycopg

        with psycopg.connect(self.pg.url) as conn:
            rows = conn.execute(
                "SELECT p.id FROM floe_partition p JOIN floe_topic t ON t.id = p.topic_id"
                " WHERE t.name = %s ORDER BY p.id",
                [topic],
            ).fetchall()
        return [row[0] for row in rows]

    def stop_control_plane(self) -> None:
        """The web server and PostgreSQL stopped (the control plane wholly away)."""
        self.web.stop()
        self.pg.stop()

    def start_control_plane(self) -> None:
        self.pg.start()
        self.web.start()

    def stop_everything(self) -> None:
        for agent in self.agents:
            agent.stop(25)
        self.web.stop()
        self.pg.stop()

    def start_everything(self) -> None:
        self.pg.start()
        self.web.start()
        for n in range(len(self.agents)):
            self.agents[n] = self._start_agent(n)

    def close(self) -> None:
        for agent in self.agents:
            agent.kill()
        self.web.kill()
        self.cp_proxy.close()
        if self.s3_proxy is not None:
            self.s3_proxy.close()
        self.pg.close()
        shutil.rmtree(self.folder, ignore_errors=True)


@contextlib.contextmanager
def world_with_moto(*, agent_flags: tuple[str, ...] = (), s3_proxy: bool = True) -> Iterator[World]:
    """A `World` on a fresh bucket of a moto server in a process of its own, all stopped on
    the way out."""
    folder = Path(tempfile.mkdtemp(prefix="floe-moto-"))
    try:
        with moto_s3_process(folder / "moto.log") as moto:
            built = World(
                moto.endpoint,
                create_bucket(moto.endpoint),
                agent_flags=agent_flags,
                s3_process=moto,
            )
            try:
                yield built
            finally:
                built.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
