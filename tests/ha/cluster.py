"""A replicated, backed-up metadata PostgreSQL on this machine, for tests and benchmarks.

`HACluster` starts, on 127.0.0.1 ports and in a temporary folder: one etcd (Debian's
`etcd-server` 3.4, Patroni's consensus store) and three Patroni 4 nodes running Debian's
PostgreSQL 15 binaries with `synchronous_mode` (a commit returns once a second node has
it), continuous archiving of WAL with barman-cloud to an S3 bucket (moto's server in
tests), and Patroni's replica creation methods `barman_cloud` (the latest base backup plus
the archived WAL: `deploy/ha/replica_from_backup.sh`), falling back to `basebackup`; beside
each node, as on each machine of docker-compose.yml, `deploy/ha/failure_detector.py`
(a primary whose processes died replaced within seconds, not after the leader key's ttl).

PostgreSQL refuses to run as root: as root, Patroni (and so PostgreSQL) and barman-cloud
run as the unprivileged OS user `postgres` (Debian's package creates it), which is let
through to this interpreter's folder (traverse only) and owns the temporary folder.

    with HACluster(s3_endpoint, bucket) as cluster:
        cluster.dsn          # postgres://postgres@h1,h2,h3/floe?target_session_attrs=read-write
        cluster.kill_primary()
        cluster.wait_healthy()
        restored = cluster.restore_to("latest")   # a new PostgreSQL from the bucket alone

Every wait is bounded; `close()` kills whatever is left and removes the folder.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.serving import free_port

REPO = Path(__file__).resolve().parents[2]
PG_BIN = Path("/usr/lib/postgresql/15/bin")
REPLICA_FROM_BACKUP = REPO / "deploy" / "ha" / "replica_from_backup.sh"
FAILURE_DETECTOR = REPO / "deploy" / "ha" / "failure_detector.py"
OS_USER = "postgres"
DATABASE = "floe"
SERVER_NAME = "floe-metadata"  # what the backups and WAL are filed under in the bucket
# Seconds after which PostgreSQL switches to a new WAL segment (and so archives it) even
# when it is not full: the RPO of losing every node, at most (README "Production").
ARCHIVE_TIMEOUT_S = 5


def _get_json(url: str, timeout: float = 2.0) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        return json.loads(answer.read())


def _wait(what: str, check, timeout_s: float, interval: float = 0.2):
    """Call `check` until it returns something truthy (returned) or `timeout_s` passes."""
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception as error:  # noqa: BLE001 — a check that fails is a check not yet met
            last_error = error
        time.sleep(interval)
    raise TimeoutError(f"{what}: not within {timeout_s}s (last error: {last_error!r})")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _let_os_user_in(user: str, paths: list[Path]) -> None:
    """Let `user` traverse to each of `paths` (o+x on every folder above it; no read)."""
    for path in paths:
        for folder in path.parents:
            mode = folder.stat().st_mode
            if not mode & stat.S_IXOTH:
                folder.chmod(mode | stat.S_IXOTH)
    pwd.getpwnam(user)  # KeyError: the user does not exist (Debian's postgresql makes it)


def start_etcd(folder: Path, port: int, peer_port: int) -> subprocess.Popen:
    """A one-member etcd on 127.0.0.1:`port`, its data and log in `folder`, once it answers."""
    peer, client = f"http://127.0.0.1:{peer_port}", f"http://127.0.0.1:{port}"
    log = (folder / "etcd.log").open("ab")
    etcd = subprocess.Popen(
        ["etcd", "--name", "etcd0", "--data-dir", str(folder / "etcd"),
         "--listen-client-urls", client, "--advertise-client-urls", client,
         "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
         "--initial-cluster", f"etcd0={peer}", "--initial-cluster-state", "new",
         "--log-level", "warn"],
        stdout=log, stderr=log, start_new_session=True,
    )  # fmt: skip
    log.close()
    try:
        _wait("etcd answers", lambda: _get_json(client + "/health").get("health") == "true", 30)
    except BaseException:
        etcd.kill()
        etcd.wait(10)
        raise
    return etcd


@dataclass
class Node:
    name: str
    pg_port: int
    api_port: int
    data: Path
    config: Path
    log: Path
    proc: subprocess.Popen | None = None
    detector: subprocess.Popen | None = None  # deploy/ha/failure_detector.py, its machine's

    @property
    def detector_log(self) -> Path:
        return self.data.parent / "failure_detector.log"

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None


class RestoredPostgres:
    """A PostgreSQL restored from the bucket into its own folder and port (`stop()`)."""

    def __init__(self, cluster: HACluster, data: Path, port: int) -> None:
        self.cluster, self.data, self.port = cluster, data, port
        self.dsn = f"postgres://postgres@127.0.0.1:{port}/{DATABASE}"

    def stop(self) -> None:
        with contextlib.suppress(subprocess.SubprocessError):
            self.cluster._as_user(
                [str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "-t", "30",
                 "stop"], timeout=40,
            )  # fmt: skip


class HACluster:
    """See the module docstring. `start()` (or `with`) brings it up healthy, with a first
    base backup in the bucket."""

    def __init__(
        self,
        s3_endpoint: str,
        bucket: str,
        *,
        nodes: int = 3,
        archive_timeout_s: int = ARCHIVE_TIMEOUT_S,
        fsync: bool = False,
        synchronous_commit: str = "remote_write",
        standby_restore_command: bool = False,
        failure_detector: bool = True,
    ) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="floe-ha-"))
        self.s3_endpoint = s3_endpoint
        self.backup_url = f"s3://{bucket}/metadata"
        self.archive_timeout_s = archive_timeout_s
        self.fsync = fsync
        # "remote_write" (deploy/ha/patroni.yml's too): a commit returns once the primary
        # has flushed it and the synchronous standby has written it (to its OS, flushed
        # within its WAL writer's next round); "on": once the standby has flushed it too.
        self.synchronous_commit = synchronous_commit
        # Standbys replaying the archive through barman-cloud-wal-restore as well as
        # streaming: the shape before, kept to measure what it costs a switchover
        # (bench/metadata_failover.py --standby-restore-command).
        self.standby_restore_command = standby_restore_command
        # deploy/ha/failure_detector.py beside each node, as in docker-compose.yml: a
        # primary whose processes died is replaced in seconds instead of after the ttl.
        # Off: only Patroni's ttl (bench/metadata_failover.py --no-failure-detector).
        self.failure_detector = failure_detector
        self.bin = Path(sys.executable).parent  # the venv's: patroni, barman-cloud-*
        self.as_root = os.geteuid() == 0
        self.etcd_port, self.etcd_peer_port = free_port(), free_port()
        self.etcd: subprocess.Popen | None = None
        self.nodes = [
            Node(
                name=f"pg{n}",
                pg_port=free_port(),
                api_port=free_port(),
                data=self.folder / f"pg{n}" / "data",
                config=self.folder / f"pg{n}" / "patroni.yml",
                log=self.folder / f"pg{n}" / "patroni.log",
            )
            for n in range(1, nodes + 1)
        ]
        self.restored: list[RestoredPostgres] = []

    # -- addresses -------------------------------------------------------------------

    @property
    def dsn(self) -> str:
        """libpq's multi-host URL: a host that is down is skipped, a standby too."""
        hosts = ",".join(f"127.0.0.1:{node.pg_port}" for node in self.nodes)
        return f"postgres://postgres@{hosts}/{DATABASE}?target_session_attrs=read-write"

    def node_dsn(self, name: str, database: str = DATABASE) -> str:
        return f"postgres://postgres@127.0.0.1:{self.node(name).pg_port}/{database}"

    def node(self, name: str) -> Node:
        return next(node for node in self.nodes if node.name == name)

    # -- the environment every process of the cluster runs in -------------------------

    def _env(self) -> dict[str, str]:
        env = {
            "PATH": f"{self.bin}:{PG_BIN}:/usr/bin:/bin",
            "HOME": str(self.folder),
            "LANG": "C.UTF-8",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": "/dev/null",
            "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
            "FLOE_BACKUP_URL": self.backup_url,
            "FLOE_BACKUP_SERVER": SERVER_NAME,
            "FLOE_BACKUP_ENDPOINT": self.s3_endpoint,
            "FLOE_BACKUP_RESTORE_TIMEOUT": "120",
        }
        return env

    def _user_kwargs(self) -> dict:
        if not self.as_root:
            return {}
        entry = pwd.getpwnam(OS_USER)
        return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}

    def _as_user(self, command: list[str], timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run(
            command,
            env=self._env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
            cwd=self.folder,
            **self._user_kwargs(),
        )

    def _chown(self, path: Path) -> None:
        if self.as_root:
            shutil.chown(path, OS_USER, OS_USER)

    # -- configuration -----------------------------------------------------------------

    def _barman(self, tool: str, timeout_s: float = 60) -> str:
        """A barman-cloud command line's start, bounded by `timeout_s` (coreutils' timeout)."""
        return (f"timeout {int(timeout_s)} {self.bin / tool} --cloud-provider aws-s3"
                f" --endpoint-url {self.s3_endpoint}")  # fmt: skip

    def _patroni_config(self, node: Node) -> dict:
        archive = (
            f"{self._barman('barman-cloud-wal-archive')} --gzip {self.backup_url} {SERVER_NAME} %p"
        )
        trust = [
            "local all all trust",
            "host all all 127.0.0.1/32 trust",
            "host replication all 127.0.0.1/32 trust",
        ]
        config = {
            "scope": "floe-metadata",
            "name": node.name,
            "log": {"level": "INFO"},
            "restapi": {
                "listen": f"127.0.0.1:{node.api_port}",
                "connect_address": f"127.0.0.1:{node.api_port}",
            },
            "etcd3": {"hosts": [f"127.0.0.1:{self.etcd_port}"]},
            "bootstrap": {
                "dcs": {
                    # Patroni's smallest: a leader whose machine is lost is replaced ~20 s
                    # later; one whose processes died, sooner (the failure detector).
                    "ttl": 20,
                    "loop_wait": 1,
                    "retry_timeout": 5,
                    "maximum_lag_on_failover": 16 * 1024 * 1024,
                    "synchronous_mode": True,
                    "postgresql": {
                        "use_pg_rewind": True,
                        "use_slots": True,
                        "parameters": {
                            "wal_level": "replica",
                            "wal_log_hints": "on",
                            "hot_standby": "on",
                            "max_wal_senders": 10,
                            "max_replication_slots": 10,
                            "max_connections": 200,
                            "archive_mode": "on",
                            "archive_command": archive,
                            "archive_timeout": self.archive_timeout_s,
                            "synchronous_commit": self.synchronous_commit,
                        },
                    },
                },
                "initdb": [{"encoding": "UTF8"}, "data-checksums"],
            },
            "postgresql": {
                "listen": f"127.0.0.1:{node.pg_port}",
                "connect_address": f"127.0.0.1:{node.pg_port}",
                "data_dir": str(node.data),
                "bin_dir": str(PG_BIN),
                "pgpass": str(node.data.parent / "pgpass"),
                "pg_hba": trust,
                "authentication": {
                    "superuser": {"username": "postgres", "password": "postgres"},
                    "replication": {"username": "postgres", "password": "postgres"},
                },
                "parameters": {
                    "unix_socket_directories": str(node.data.parent),
                    "fsync": "on" if self.fsync else "off",
                    "shared_buffers": "64MB",
                },
                "create_replica_methods": ["barman_cloud", "basebackup"],
                "barman_cloud": {"command": str(REPLICA_FROM_BACKUP), "no_leader": True},
                "basebackup": {"checkpoint": "fast"},
                # No restore_command: a standby streams (the slots keep what it needs), and
                # a promotion does not wait on the archive; a node rebuilt from a backup
                # gets the archived WAL it needs first (replica_from_backup.sh).
            },
        }
        if self.standby_restore_command:
            restore = (
                f"{self._barman('barman-cloud-wal-restore')} {self.backup_url} {SERVER_NAME} %f %p"
            )
            config["postgresql"]["recovery_conf"] = {"restore_command": restore}
        return config

    # -- lifecycle ---------------------------------------------------------------------

    def start(self, timeout_s: float = 120) -> HACluster:
        if self.as_root:
            _let_os_user_in(OS_USER, [Path(sys.executable).resolve(), self.bin, REPO])
        os.chmod(self.folder, 0o755)
        self._chown(self.folder)
        self._start_etcd()
        for node in self.nodes:
            node.data.parent.mkdir(parents=True)
            self._chown(node.data.parent)
            node.config.write_text(json.dumps(self._patroni_config(node), indent=1))
            self.start_node(node.name)
            if self.failure_detector:
                self._start_detector(node)
        self.wait_healthy(timeout_s)
        primary = self.primary()
        import psycopg

        with psycopg.connect(self.node_dsn(primary, "postgres"), autocommit=True,
                             connect_timeout=5) as conn:  # fmt: skip
            conn.execute(f"CREATE DATABASE {DATABASE}")
        self.backup()
        return self

    def _start_etcd(self) -> None:
        self.etcd = start_etcd(self.folder, self.etcd_port, self.etcd_peer_port)

    def start_node(self, name: str) -> None:
        """Start (or start again) a node's Patroni, which starts its PostgreSQL."""
        node = self.node(name)
        log = node.log.open("ab")
        node.proc = subprocess.Popen(
            [str(self.bin / "patroni"), str(node.config)],
            stdout=log,
            stderr=log,
            env=self._env(),
            cwd=node.data.parent,
            start_new_session=True,
            **self._user_kwargs(),
        )
        log.close()

    def _start_detector(self, node: Node) -> None:
        """The node's failure detector: it runs as long as the node's machine, so a node's
        kill (Patroni and PostgreSQL) leaves it running; `kill_all` takes it too."""
        log = node.detector_log.open("ab")
        node.detector = subprocess.Popen(
            [str(self.bin / "python"), str(FAILURE_DETECTOR), str(node.config)],
            stdout=log,
            stderr=log,
            env=self._env(),
            cwd=node.data.parent,
            start_new_session=True,
            **self._user_kwargs(),
        )
        log.close()

    def failure_detector_deletions(self) -> list[str]:
        """The lines in which a detector deleted a leader key, every node's."""
        lines: list[str] = []
        for node in self.nodes:
            with contextlib.suppress(OSError):
                text = node.detector_log.read_text(errors="replace")
                lines += [ln for ln in text.splitlines() if "deleted the leader key" in ln]
        return lines

    def members(self) -> list[dict]:
        """Patroni's view of the cluster (name, role, state, lag), from any node answering."""
        error: Exception | None = None
        for node in self.nodes:
            if node.proc is None or node.proc.poll() is not None:
                continue
            try:
                return _get_json(node.api + "/cluster")["members"]
            except (OSError, ValueError, KeyError) as exc:
                error = exc
        raise ConnectionError(f"no Patroni node answers: {error!r}")

    def roles(self) -> dict[str, str]:
        return {m["name"]: m["role"] for m in self.members()}

    def primary(self) -> str:
        leaders = [m["name"] for m in self.members() if m["role"] == "leader"]
        if not leaders:
            raise LookupError("no leader")
        return leaders[0]

    def replicas(self) -> list[str]:
        return [m["name"] for m in self.members() if m["role"] != "leader"]

    def status(self, name: str) -> dict:
        """What a node's own Patroni says of it (`GET /patroni`: state, role,
        replication_state, …): fresher than the DCS's view."""
        return _get_json(self.node(name).api + "/patroni")

    def healthy(self, nodes: int | None = None) -> bool:
        """Each node, asked itself (the DCS keeps a dead member's last word until its TTL):
        PostgreSQL running, one primary, every other node streaming from it; and one
        synchronous standby named in the DCS."""
        wanted = self.nodes if nodes is None else self.nodes[:nodes]
        states = [self.status(node.name) for node in wanted]
        if any(state.get("state") != "running" for state in states):
            return False
        primaries = [s for s in states if s.get("role") in ("primary", "master")]
        streaming = [s for s in states if s.get("replication_state") == "streaming"]
        if len(primaries) != 1 or len(streaming) != len(wanted) - 1:
            return False
        return len(wanted) == 1 or any(m["role"] == "sync_standby" for m in self.members())

    def wait_healthy(self, timeout_s: float = 90, nodes: int | None = None) -> None:
        try:
            _wait("the cluster is healthy", lambda: self.healthy(nodes), timeout_s, 0.25)
        except TimeoutError as error:
            raise TimeoutError(f"{error}\n{self.describe()}") from None

    def wait_primary(self, timeout_s: float = 60, other_than: str | None = None) -> str:
        """The name of the primary (not `other_than`) once it takes writes."""
        import psycopg

        def check() -> str | None:
            for node in self.nodes:
                if node.name == other_than or node.proc is None or node.proc.poll() is not None:
                    continue
                with contextlib.suppress(OSError, ValueError):
                    status = self.status(node.name)
                    if status.get("role") in ("primary", "master") and status["state"] == "running":
                        with psycopg.connect(self.node_dsn(node.name, "postgres"),
                                             connect_timeout=2) as conn:  # fmt: skip
                            if not conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]:
                                return node.name
            return None

        return _wait("a primary taking writes", check, timeout_s, 0.1)

    def describe(self) -> str:
        """The members and each node's log tail, for a failing assertion's message."""
        parts = []
        with contextlib.suppress(Exception):
            parts.append(json.dumps(self.members(), indent=1))
        for node in self.nodes:
            with contextlib.suppress(OSError):
                parts.append(f"--- {node.name}\n" + node.log.read_text()[-2500:])
            with contextlib.suppress(OSError):
                parts.append(f"--- {node.name}'s failure detector\n"
                             + node.detector_log.read_text()[-800:])  # fmt: skip
        return "\n".join(parts)

    # -- faults ------------------------------------------------------------------------

    def kill_node(self, name: str) -> None:
        """SIGKILL a node's Patroni and its postmaster: its processes gone from a machine
        still up (its ports refuse connections; its failure detector runs on)."""
        node = self.node(name)
        postmaster = node.postmaster_pid()
        if node.proc is not None and node.proc.poll() is None:
            node.proc.kill()
            node.proc.wait(10)
        if postmaster is not None and _pid_alive(postmaster):
            os.kill(postmaster, signal.SIGKILL)
            _wait("the postmaster is gone", lambda: not _pid_alive(postmaster), 10, 0.05)

    def kill_all(self) -> None:
        """Every node's Patroni and postmaster SIGKILLed at once (the primary's first), as
        losing every machine would: nothing more is committed or archived after it."""
        order = sorted(self.nodes, key=lambda node: node.name != self._primary_or_none())
        postmasters = [node.postmaster_pid() for node in order]
        for node, postmaster in zip(order, postmasters, strict=True):
            if postmaster is not None and _pid_alive(postmaster):
                os.kill(postmaster, signal.SIGKILL)
            if node.proc is not None and node.proc.poll() is None:
                node.proc.kill()
            self._kill_detector(node)
        for node in order:
            self.kill_node(node.name)  # waits for each to be gone

    def _kill_detector(self, node: Node) -> None:
        if node.detector is not None and node.detector.poll() is None:
            node.detector.kill()
            node.detector.wait(10)

    def _primary_or_none(self) -> str | None:
        try:
            return self.primary()
        except (LookupError, ConnectionError):
            return None

    def kill_primary(self) -> str:
        """SIGKILL the primary's postmaster and its Patroni; returns the node's name."""
        name = self.primary()
        self.kill_node(name)
        return name

    def switchover(self, candidate: str | None = None, timeout_s: float = 60) -> str:
        """`patronictl switchover --force` (to `candidate`, else a synchronous standby);
        returns the new primary's name once it runs."""
        old = self.primary()
        if candidate is None:
            candidate = next(m["name"] for m in self.members() if m["role"] == "sync_standby")
        command = [str(self.bin / "patronictl"), "-c", str(self.node(old).config),
                   "switchover", "--force", "--leader", old, "--candidate", candidate]  # fmt: skip
        self._as_user(command, timeout=timeout_s)
        return self.wait_primary(timeout_s, other_than=old)

    def destroy_replica(self, name: str | None = None) -> str:
        """A replica's machine replaced: its Patroni and PostgreSQL killed, its data folder
        deleted, and its Patroni started again on the empty folder, as its service manager
        would; returns its name. Patroni rebuilds it by itself (`replica_methods()` says
        how). (Deleting the folder under a running Patroni races its restart of PostgreSQL.)"""
        name = name or self.replicas()[0]
        node = self.node(name)
        self.kill_node(name)
        shutil.rmtree(node.data)
        self.start_node(name)
        return name

    def replica_methods(self, name: str) -> list[str]:
        """The replica creation methods Patroni reported using for `name`, oldest first
        (its log's "replica has been created using …")."""
        marker = "replica has been created using "
        lines = self.node(name).log.read_text(errors="replace").splitlines()
        return [ln.split(marker, 1)[1].strip() for ln in lines if marker in ln]

    # -- backups -----------------------------------------------------------------------

    def backup(self, timeout_s: float = 120) -> str:
        """A base backup of the primary to the bucket (barman-cloud-backup, run on the
        primary's machine: it reads the data folder); returns its id."""
        node = self.node(self.primary())
        self._as_user(
            [*self._barman("barman-cloud-backup", timeout_s).split(),
             "--immediate-checkpoint", "-h", str(node.data.parent), "-p", str(node.pg_port),
             "-U", "postgres", self.backup_url, SERVER_NAME],
            timeout=timeout_s + 10,
        )  # fmt: skip
        return self.backups()[-1]["backup_id"]

    def backups(self) -> list[dict]:
        done = self._as_user(
            [*self._barman("barman-cloud-backup-list").split(), "--format", "json",
             self.backup_url, SERVER_NAME],
            timeout=70,
        )  # fmt: skip
        return json.loads(done.stdout)["backups_list"]

    def archived_wal(self) -> list[str]:
        """The WAL segment names in the bucket, oldest first."""
        import boto3

        bucket, _, prefix = self.backup_url.removeprefix("s3://").partition("/")
        s3 = boto3.client("s3", endpoint_url=self.s3_endpoint, region_name="us-east-1")
        names = []
        for page in s3.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=f"{prefix}/{SERVER_NAME}/wals/"
        ):
            names += [Path(o["Key"]).name.split(".")[0] for o in page.get("Contents", [])]
        return sorted(n for n in names if len(n) == 24)

    def restore_to(
        self, target: str | dt.datetime = "latest", timeout_s: float = 180
    ) -> RestoredPostgres:
        """A new PostgreSQL from the bucket alone: the base backup before `target`, then
        the archived WAL up to `target` ("latest": all of it), promoted; it runs on its
        own port until `stop()` (or this cluster's `close()`)."""
        n = len(self.restored)
        data = self.folder / f"restored{n}" / "data"
        data.parent.mkdir(parents=True)
        self._chown(data.parent)
        if target == "latest":
            chosen, recovery = ["latest"], ""
        elif isinstance(target, dt.datetime):
            when = target.astimezone(dt.UTC).isoformat()
            chosen = ["--target-time", when, "auto"]
            recovery = f"recovery_target_time = '{when}'\nrecovery_target_inclusive = on\n"
        else:
            raise ValueError(f"restore target must be 'latest' or a datetime, not {target!r}")
        tool = self._barman("barman-cloud-restore", timeout_s).split()
        self._as_user([*tool, *chosen[:-1], self.backup_url, SERVER_NAME, chosen[-1], str(data)],
                      timeout=timeout_s + 10)  # fmt: skip
        restore = (
            f"{self._barman('barman-cloud-wal-restore')} {self.backup_url} {SERVER_NAME} %f %p"
        )
        port = free_port()
        with (data / "postgresql.auto.conf").open("a") as conf:
            conf.write(
                f"\n# restored by tests/ha/cluster.py\nrestore_command = '{restore}'\n"
                "recovery_target_action = 'promote'\narchive_mode = off\n" + recovery
            )
        (data / "recovery.signal").touch()
        self._chown(data / "recovery.signal")
        # Patroni's own settings came with the backup: no synchronous standby to wait for.
        options = (f"-p {port} -k {data.parent} -c listen_addresses=127.0.0.1 -c fsync=off"
                   f" -c synchronous_standby_names= -c hba_file={data.parent / 'pg_hba.conf'}")  # fmt: skip
        (data.parent / "pg_hba.conf").write_text(
            "local all all trust\nhost all all 127.0.0.1/32 trust\n"
        )
        self._chown(data.parent / "pg_hba.conf")
        restored = RestoredPostgres(self, data, port)
        self.restored.append(restored)
        self._as_user(
            [str(PG_BIN / "pg_ctl"), "-D", str(data), "-o", options, "-l",
             str(data.parent / "postgres.log"), "-t", str(int(timeout_s)), "-w", "start"],
            timeout=timeout_s + 10,
        )  # fmt: skip
        import psycopg

        def promoted() -> bool:
            with psycopg.connect(restored.dsn, connect_timeout=3) as conn:
                return not conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]

        _wait("the restored PostgreSQL is promoted", promoted, timeout_s, 0.25)
        return restored

    # -- teardown ----------------------------------------------------------------------

    def close(self) -> None:
        for restored in self.restored:
            restored.stop()
        with contextlib.suppress(Exception):
            self.kill_all()  # thrown away: a clean stop would wait on the archive first
        for node in self.nodes:  # the postmaster's children, should any be left
            self._kill_detector(node)
            if node.proc is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(node.proc.pid, signal.SIGKILL)
        if self.etcd is not None and self.etcd.poll() is None:
            self.etcd.kill()
            self.etcd.wait(10)
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> HACluster:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc) -> None:
        self.close()


@contextlib.contextmanager
def ha_cluster(**options) -> Iterator[HACluster]:
    """A moto S3 server, a bucket on it and an `HACluster` backing up to it."""
    from tests.fixtures_s3 import create_bucket, moto_s3_server

    with (
        moto_s3_server() as endpoint,
        HACluster(endpoint, create_bucket(endpoint), **options) as cluster,
    ):
        yield cluster
