"""librdkafka's own integration tests against a fresh playground, one test at a time.

Given a librdkafka source tree (``LIBRDKAFKA_SRC`` or ``--src``), builds its library and
test-runner when they are not built yet (``./configure --disable-lz4-ext``, and
``--disable-zstd`` without libzstd's headers — 0171 produces with zstd — ``make libs``, ``make -C tests build``), starts ``python -m controlplane.playground`` with
its own data folder (embedded PostgreSQL and Redis, so nothing is shared with another run)
and free ports, sets the playground cluster's ``default_partitions`` to 4 over the REST API
(librdkafka's tests expect 4 partitions in an auto-created topic), writes
``<workdir>/test.conf`` (``bootstrap.servers``, ``test.topic.random=true``; the test-runner
reads it through ``RDKAFKA_TEST_CONF``, so two runs from one source tree do not share one
``tests/test.conf``) and runs every test
of ``bench/librdkafka_tests.txt`` alone, in full mode (``TESTS=<n> ./test-runner -p1 -E``,
not ``-Q``), each bounded by ``--timeout`` seconds. Prints a table test → PASS / FAIL /
TIMEOUT with each failure's first assertion line, then one JSON summary line; exits 1 when a
test did not pass. Each test's output is kept in ``<workdir>/logs/<n>.log``, the
playground's logs in ``<workdir>/playground/logs``.

    LIBRDKAFKA_SRC=/path/to/librdkafka make librdkafka-tests
    .venv/bin/python bench/librdkafka_tests.py --src PATH [--tests 0099,0103] [--timeout 1200]

``--flush-age-ms N`` sets the cluster's ``max_flush_age_ms`` too (a latency-tuned cluster:
librdkafka's 0129 needs it, as it produces 112 requests one after another);
``--default-topic-type lightning`` makes the topics the tests create lightning topics
(acknowledged once journaled, without waiting for the control plane).

``--agents N`` starts N - 1 more agents joined to the playground's cluster (an agent key
of their own over the REST API, the same ``file://`` bucket, produce and consume roles, logs
in ``<workdir>/agents``), so that partitions are led by different brokers, as some tests
assume (0172, 0179: one ShareFetch a broker a poll).

``--timeout-multiplier X`` writes ``test.timeout.multiplier=X`` to the test.conf: the
test-runner's own time budgets times X, as librdkafka's CI runs them (``CI`` set: 3). The
share-consumer tests 0170–0186 need it: their budgets are the sums of their own waits (0170
sets 60 s before sub-tests that wait more than that, against any broker).

``--subtests A,B`` runs each test once per name given, with ``SUBTESTS=<name>`` (the
test-runner runs only the sub-tests whose ``function:line`` contains it): one line, log and
result per sub-test (``0174/do_test_1p_1c_1t_1part``), so a long test runs case by case and
a failing case does not end the others.

``--workdir`` on a tmpfs (``/dev/shm/…``) puts the playground's bucket and PostgreSQL there:
no fsync reaches a disk (0174 needs it, see bench/librdkafka_tests.txt).

``TEST_KAFKA_VERSION`` (the broker version librdkafka's tests assume, which gates their
sub-tests) defaults to 3.9.0 here, librdkafka's own default being 2.4.0.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent
LIST = Path(__file__).resolve().parent / "librdkafka_tests.txt"
DEFAULT_PARTITIONS = 4
# The test-runner's own failure banner, then the assertion on the next line.
FAILED_AT = re.compile(r'### Test "([^"]*)" failed at ([^ ]+) at .*###')
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def say(line: str = "") -> None:
    print(line, flush=True)


def read_list(path: Path) -> list[tuple[str, str]]:
    """(number, name) for each test in the list file, in its order."""
    tests = []
    for raw in path.read_text().splitlines():
        number, _, comment = raw.partition("#")
        if number.strip():
            tests.append((number.strip(), comment.strip()))
    return tests


def _has_zstd() -> bool:
    """libzstd's headers are installed (librdkafka then builds with zstd)."""
    found = subprocess.run(["pkg-config", "--exists", "libzstd"], capture_output=True)
    return found.returncode == 0


def build(src: Path, jobs: int) -> None:
    """Build librdkafka's libraries and test-runner unless they are built."""
    if (src / "tests" / "test-runner").exists() and (src / "src" / "librdkafka.so").exists():
        return
    log = Path(tempfile.gettempdir()) / "rdkrun-build.log"
    say(f"building librdkafka in {src} (log: {log})")
    steps = [
        ["./configure", "--disable-lz4-ext", *([] if _has_zstd() else ["--disable-zstd"])],
        ["make", f"-j{jobs}", "libs"],
        ["make", "-C", "tests", f"-j{jobs}", "build"],
    ]
    with log.open("ab") as out:
        for step in steps:
            if step[0] == "./configure" and (src / "Makefile.config").exists():
                continue
            done = subprocess.run(step, cwd=src, stdout=out, stderr=subprocess.STDOUT)
            if done.returncode != 0:
                raise SystemExit(f"librdkafka-tests: {' '.join(step)} failed; see {log}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Playground:
    """``python -m controlplane.playground`` in its own data folder, on free ports."""

    def __init__(self, workdir: Path):
        self.data_dir = workdir / "playground"
        self.lines: dict[str, str] = {}
        self.proc: subprocess.Popen | None = None
        self.agents: list[subprocess.Popen] = []
        self.http_port = free_port()
        self.kafka_port = free_port()

    def start(self, timeout_s: float = 300) -> None:
        env = dict(os.environ)
        # A fresh world: the playground's embedded PostgreSQL and Redis, not the caller's.
        env.pop("DATABASE_URL", None)
        env.pop("REDIS_URL", None)
        env.update(
            FLOE_DATA_DIR=str(self.data_dir),
            FLOE_HTTP_PORT=str(self.http_port),
            FLOE_KAFKA_PORT=str(self.kafka_port),
            FLOE_AGENT_HTTP_PORT=str(free_port()),
            FLOE_SCHEMA_REGISTRY_PORT=str(free_port()),
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "controlplane.playground"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        ready = threading.Event()
        threading.Thread(target=self._read, args=(self.proc.stdout, ready), daemon=True).start()
        if not ready.wait(timeout_s) or "bootstrap" not in self.lines:
            self.stop()
            raise SystemExit(
                f"librdkafka-tests: the playground did not start in {timeout_s:.0f} s; "
                f"see {self.data_dir / 'logs'}"
            )

    def _read(self, stream: IO[str], ready: threading.Event) -> None:
        for line in stream:
            key, sep, value = line.rstrip("\n").partition(": ")
            if sep and key in ("console", "api-key", "cluster", "bootstrap", "logs"):
                self.lines[key] = value.strip()
            if key == "schema-registry" or line.startswith("make run:"):
                if line.startswith("make run:"):
                    sys.stderr.write(line)
                ready.set()
        ready.set()

    def set_config(self, config: dict[str, int]) -> None:
        """PATCH the playground cluster's config (REST API) and check that it took."""
        answer = self._api("PATCH", f"clusters/{self.lines['cluster']}/config/", config)
        if any(answer.get(name) != value for name, value in config.items()):
            raise SystemExit(f"librdkafka-tests: the cluster's config is {answer}")

    def _api(self, method: str, path: str, body: dict) -> dict:
        """One call to the playground's REST API with its API key."""
        request = urllib.request.Request(
            f"{self.lines['console'].rstrip('/')}/api/v1/{path}",
            data=json.dumps(body).encode(),
            method=method,
            headers={
                "Authorization": f"Bearer {self.lines['api-key']}",
                "Content-Type": "application/json",
            },
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)

    def add_agent(self, number: int, timeout_s: float = 120) -> None:
        """Another agent of the playground's cluster (its own agent key, the same bucket),
        ready once its Kafka port answers."""
        key = self._api(
            "POST",
            f"clusters/{self.lines['cluster']}/agent-keys/",
            {"name": f"librdkafka-tests-{number}"},
        )["key"]
        kafka_port = free_port()
        logs = self.data_dir.parent / "agents"
        logs.mkdir(exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLOE_")}
        env.pop("DATABASE_URL", None)
        env.pop("REDIS_URL", None)
        with (logs / f"agent{number}.log").open("ab") as log:
            proc = subprocess.Popen(
                [
                    sys.executable, "-m", "agents",
                    "--control-plane-url", self.lines["console"].rstrip("/"),
                    "--agent-key", key,
                    "--bucket-url", f"file://{self.data_dir / 'bucket'}",
                    "--kafka-port", str(kafka_port),
                    "--http-port", str(free_port()),
                    "--schema-registry-port", "0",
                    "--roles", "produce,consume",
                ],
                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        self.agents.append(proc)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", kafka_port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.5)
        raise SystemExit(f"librdkafka-tests: agent {number} did not listen; see {logs}")

    def wait_brokers(self, count: int, timeout_s: float = 60) -> None:
        """Wait until Metadata lists `count` brokers (the agents' heartbeats)."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.lines["bootstrap"]})
        deadline = time.monotonic() + timeout_s
        seen = 0
        while time.monotonic() < deadline:
            seen = len(admin.list_topics(timeout=10).brokers)
            if seen >= count:
                return
            time.sleep(1)
        raise SystemExit(f"librdkafka-tests: Metadata lists {seen} brokers, not {count}")

    def wait_broker_partitions(self, partitions: int, timeout_s: float = 60) -> None:
        """Wait until the agent answers num.partitions=<partitions> (its next heartbeat)."""
        from confluent_kafka.admin import AdminClient, ConfigResource

        admin = AdminClient({"bootstrap.servers": self.lines["bootstrap"]})
        deadline = time.monotonic() + timeout_s
        seen = None
        while time.monotonic() < deadline:
            broker = next(iter(admin.list_topics(timeout=10).brokers))
            resource = ConfigResource(ConfigResource.Type.BROKER, str(broker))
            configs = admin.describe_configs([resource], request_timeout=10)[resource].result(
                timeout=15
            )
            seen = configs["num.partitions"].value
            if seen == str(partitions):
                return
            time.sleep(1)
        raise SystemExit(f"librdkafka-tests: the agent still answers num.partitions={seen}")

    def stop(self) -> None:
        for agent in self.agents:
            if agent.poll() is None:
                agent.send_signal(signal.SIGTERM)
        for agent in self.agents:
            try:
                agent.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(agent.pid, signal.SIGKILL)
                agent.wait(timeout=10)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


def first_failure(output: str) -> str:
    """The first assertion of a failed run: librdkafka's banner's place and message."""
    lines = [ANSI.sub("", line) for line in output.splitlines()]
    for index, line in enumerate(lines):
        match = FAILED_AT.search(line)
        if match:
            message = lines[index + 1].strip() if index + 1 < len(lines) else ""
            return f"{match.group(1)}: {match.group(2)}: {message}"
    for line in lines:
        if "Assertion" in line or ("assert" in line.lower() and "failed" in line.lower()):
            return line.strip()
    return lines[-1].strip() if lines else "(no output)"


def run_test(
    src: Path, number: str, timeout_s: float, log: Path, env: dict, subtest: str = ""
) -> dict:
    started = time.monotonic()
    only = {"SUBTESTS": subtest} if subtest else {}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            ["./test-runner", "-p1", "-E"],
            cwd=src / "tests",
            env={**env, "TESTS": number, **only},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            code = proc.wait(timeout=timeout_s)
            result = "PASS" if code == 0 else "FAIL"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            code, result = None, "TIMEOUT"
    seconds = round(time.monotonic() - started, 1)
    output = log.read_text(errors="replace")
    detail = ""
    if result == "FAIL":
        detail = first_failure(output)
    elif result == "TIMEOUT":
        running = re.findall(r"\[([0-9]{4}_[^ \]]+)\s*/", ANSI.sub("", output))
        detail = f"killed after {timeout_s:.0f} s" + (f" in {running[-1]}" if running else "")
    test = f"{number}/{subtest}" if subtest else number
    return {"test": test, "result": result, "exit": code, "seconds": seconds, "detail": detail}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", default=os.environ.get("LIBRDKAFKA_SRC"))
    parser.add_argument("--list", default=str(LIST), help="the list file (one number a line)")
    parser.add_argument("--tests", default="", help="comma-separated numbers (default: the list)")
    parser.add_argument(
        "--subtests",
        default="",
        help="comma-separated sub-test names: each test run once per name (SUBTESTS=<name>)",
    )
    parser.add_argument("--timeout", type=float, default=1200, help="seconds per test")
    parser.add_argument("--workdir", default="", help="logs and data (default: a new temp dir)")
    parser.add_argument("--jobs", type=int, default=2, help="make -j for the build")
    parser.add_argument(
        "--flush-age-ms",
        type=int,
        default=0,
        help="the cluster's max_flush_age_ms (default: the playground's, 250)",
    )
    parser.add_argument(
        "--default-topic-type",
        choices=("standard", "lightning"),
        default="",
        help="the cluster's default_topic_type (default: the playground's, standard)",
    )
    parser.add_argument(
        "--agents",
        type=int,
        default=1,
        help="agents in the playground's cluster (default 1: the playground's own)",
    )
    parser.add_argument(
        "--timeout-multiplier",
        type=float,
        default=0,
        help="test.timeout.multiplier in tests/test.conf (librdkafka's CI: 3; default: none)",
    )
    args = parser.parse_args()
    if not args.src:
        parser.error("give librdkafka's source tree: LIBRDKAFKA_SRC=<dir> or --src <dir>")
    src = Path(args.src).resolve()
    if not (src / "tests" / "test.c").exists():
        parser.error(f"{src} is not a librdkafka source tree (no tests/test.c)")
    names = dict(read_list(Path(args.list)))
    numbers = [n.strip() for n in args.tests.split(",") if n.strip()] or list(names)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="rdkrun-librdkafka-tests-"))
    (workdir / "logs").mkdir(parents=True, exist_ok=True)

    build(src, args.jobs)
    version = subprocess.run(
        ["git", "describe", "--tags"], cwd=src, capture_output=True, text=True
    ).stdout.strip()
    playground = Playground(workdir)
    started = time.monotonic()
    results: list[dict] = []
    try:
        playground.start()
        config = {"default_partitions": DEFAULT_PARTITIONS}
        if args.flush_age_ms:
            config["max_flush_age_ms"] = args.flush_age_ms
        if args.default_topic_type:
            config["default_topic_type"] = args.default_topic_type
        playground.set_config(config)
        playground.wait_broker_partitions(DEFAULT_PARTITIONS)
        for number in range(1, args.agents):
            playground.add_agent(number)
        playground.wait_brokers(args.agents)
        bootstrap = playground.lines["bootstrap"]
        conf = f"bootstrap.servers={bootstrap}\ntest.topic.random=true\n"
        if args.timeout_multiplier:
            conf += f"test.timeout.multiplier={args.timeout_multiplier}\n"
        (workdir / "test.conf").write_text(conf)
        env = dict(os.environ)
        env["RDKAFKA_TEST_CONF"] = str(workdir / "test.conf")
        env["LD_LIBRARY_PATH"] = f"{src / 'src'}:{src / 'src-cpp'}"
        env.setdefault("TEST_KAFKA_VERSION", "3.9.0")
        say(f"librdkafka {version or '?'} at {src}; playground {bootstrap}; work dir {workdir}")
        say(f"{'test':<42} {'result':<8} {'seconds':>8}  first assertion")
        subtests = [n.strip() for n in args.subtests.split(",") if n.strip()] or [""]
        for number in numbers:
            for subtest in subtests:
                log = workdir / "logs" / (f"{number}-{subtest}.log" if subtest else f"{number}.log")
                result = run_test(src, number, args.timeout, log, env, subtest)
                result["name"] = names.get(number, "")
                results.append(result)
                label = f"{result['test']} {result['name']}"
                say(f"{label:<42} {result['result']:<8} {result['seconds']:>8}  {result['detail']}")
    finally:
        playground.stop()
    counts = {
        kind: sum(r["result"] == kind for r in results) for kind in ("PASS", "FAIL", "TIMEOUT")
    }
    summary = {
        "librdkafka": version,
        "bootstrap": playground.lines.get("bootstrap"),
        "test_kafka_version": os.environ.get("TEST_KAFKA_VERSION", "3.9.0"),
        "default_partitions": DEFAULT_PARTITIONS,
        "max_flush_age_ms": args.flush_age_ms or 250,
        "default_topic_type": args.default_topic_type or "standard",
        "agents": args.agents,
        "seconds": round(time.monotonic() - started, 1),
        "counts": counts,
        "logs": str(workdir / "logs"),
        "results": results,
    }
    (workdir / "summary.json").write_text(json.dumps(summary, indent=2))
    say(json.dumps(summary))
    return 0 if counts["PASS"] == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
