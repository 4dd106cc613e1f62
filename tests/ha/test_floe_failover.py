"""Issue 39's fault cases on the replicated metadata store: every Floe process — the web
server (console, REST, agent API and its commit pool), Celery's worker and beat, two
agents — runs on `HACluster`'s multi-host DSN, with an idempotent producer at a steady
rate and a consumer group reading everything back, while the primary is killed (SIGKILL
to its postmaster and its Patroni) and while the primary is switched over. Nobody
restarts a Floe process; each finds the new primary by itself.

Each case prints its row of the fault table (tests/faults/probe.py). Long: the module
takes 1–1.5 minutes (the cluster's start with its first backup and Floe's processes
35–80 s, the kill case ~15 s, the switchover ~11–20 s).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections import Counter, deque

import pytest

from tests.agents.conftest import AgentProcess
from tests.faults.probe import FAULT_ROW, Probe
from tests.faults.services import CeleryProcess, RedisServer, agent_start, floe_env, wait_until
from tests.faults.world import WebServer, prepare_database

pytestmark = [pytest.mark.ha, pytest.mark.faults, pytest.mark.kafka]

PARTITIONS = 2
EXPIRE_TASK = "metadata_store.tasks.transactions_expire"  # beat sends it every second here
# Issue 39 asks produce acknowledged again (and the console answering) within 15 s of the
# primary's kill, and a planned switchover's longest produce pause within 5 s; both are
# asserted whole. Patroni alone replaces a leader that died silently only when its leader
# key expires — `ttl`, 20 s at the least (Patroni raises anything lower) —; the failure
# detector beside each node (deploy/ha/failure_detector.py) deletes the key of a leader
# whose processes are gone within seconds. Floe's own part, from the database taking
# writes again through the multi-host DSN, is bounded too.
KILL_BOUND_S = 15.0
FLOE_BOUND_S = 5.0
SWITCHOVER_PAUSE_BOUND_S = 5.0


class FloeOnHA:
    """Web, worker, beat (with a Redis of their own) and two agents on `ha.dsn`."""

    def __init__(self, ha, folder) -> None:
        self.folder = folder
        self.redis = RedisServer(folder / "redis")
        env = floe_env(database_url=ha.dsn, redis_url=self.redis.url, folder=folder)
        self.env = env
        self.agent_key, self.api_key = prepare_database(env)
        self.web = WebServer(env, folder)
        self.web.start()
        self.worker = CeleryProcess("worker", env, folder)
        self.beat = CeleryProcess("beat", env, folder)
        self.agents = [self._start_agent(n) for n in range(2)]

    def _start_agent(self, n: int) -> AgentProcess:
        return agent_start(
            self.env, self.folder, f"agent{n}", control_plane_url=self.web.url, key=self.agent_key
        )

    @property
    def bootstrap(self) -> str:
        return ",".join(agent.bootstrap for agent in self.agents)

    def all_alive(self) -> bool:
        return (
            self.web.proc is not None
            and self.web.proc.poll() is None
            and self.worker.alive()
            and self.beat.alive()
            and all(agent.proc.poll() is None for agent in self.agents)
        )

    def status(self, path: str, *, api: bool = False) -> int:
        """The HTTP status of a GET of the web server's `path` (0: no answer)."""
        headers = {"Authorization": f"Bearer {self.api_key}"} if api else {}
        return _status(urllib.request.Request(self.web.url + path, headers=headers))

    def healthz(self) -> dict:
        try:
            with urllib.request.urlopen(self.web.url + "/healthz", timeout=5) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return json.loads(exc.read())

    def logs_tail(self, lines: int = 40) -> str:
        """The last lines each agent wrote: what a failed wait shows."""
        return "\n".join(
            f"--- agent{n} ---\n" + "\n".join(agent.logs().splitlines()[-lines:])
            for n, agent in enumerate(self.agents)
        )

    def close(self) -> None:
        """Everything killed: thrown away, a clean stop would only wait."""
        for agent in self.agents:
            agent.kill()
        self.beat.kill()
        self.worker.kill()
        self.web.kill()
        self.redis.kill()


@pytest.fixture(scope="module")
def floe(ha, tmp_path_factory):
    running = FloeOnHA(ha, tmp_path_factory.mktemp("floe-on-ha"))
    try:
        yield running
    finally:
        running.close()


class _LinesTo(logging.Logger):
    """A logger for librdkafka's `logger` setting that keeps its lines in `lines`."""

    def __init__(self, lines: deque[str]) -> None:
        super().__init__("librdkafka-group", logging.DEBUG)
        self.propagate = False
        self._lines = lines

    def log(self, level, msg, *args, **kwargs) -> None:  # type: ignore[override]
        self._lines.append(f"{time.strftime('%H:%M:%S')} {msg % args if args else msg}")


class GroupReader:
    """A consumer group member reading the topic from the start, committing every 200 ms,
    in a thread; `committed()` asks the group's committed offsets from outside."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        self.seen: Counter = Counter()
        self.errors: list[str] = []  # what the consumer reported (shown when it never joins)
        # librdkafka's own account of its group (FindCoordinator, JoinGroup, …): its last
        # lines are shown when the group never commits.
        self.group_log: deque[str] = deque(maxlen=150)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from confluent_kafka import Consumer

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 200,
                "debug": "cgrp,topic,metadata",
                "log_level": 7,
                "logger": _LinesTo(self.group_log),
            }
        )
        consumer.subscribe([self.topic])
        try:
            while not self._stop.is_set():
                for msg in consumer.consume(500, 0.2):
                    if not msg.error():
                        self.seen[(msg.partition(), msg.offset())] += 1
                    elif len(self.errors) < 20:
                        self.errors.append(msg.error().str())
        finally:
            consumer.close()

    def committed(self, retry_s: float = 30) -> dict[int, int]:
        """The group's committed offsets. Asked again, for up to `retry_s`, while the
        answer is a coordinator's retriable error (NOT_COORDINATOR while the group's
        coordinator moves between agents after a fault), as a Kafka client would."""
        from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

        moving = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                  KafkaError.COORDINATOR_NOT_AVAILABLE}  # fmt: skip
        deadline = time.monotonic() + retry_s
        while True:
            asker = Consumer(
                {"bootstrap.servers": self.bootstrap, "group.id": self.group, "log_level": 0}
            )
            try:
                wanted = [TopicPartition(self.topic, p) for p in range(PARTITIONS)]
                return {tp.partition: tp.offset for tp in asker.committed(wanted, timeout=10)}
            except KafkaException as exc:
                error = exc.args[0]
                if error.code() not in moving or time.monotonic() > deadline:
                    raise
                print(f"\ncommitted offsets: {error.str()}; asking again")
            finally:
                asker.close()
            time.sleep(0.5)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


class Watch:
    """Samples, every 0.2 s in a thread, the web's /healthz, a REST API read (the console's
    data) and the agents' /healthz: what each said while the fault lasted."""

    def __init__(self, floe: FloeOnHA) -> None:
        self.floe = floe
        self.samples: list[tuple[float, int, int, int]] = []  # (t, healthz, api, agent)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            t = time.monotonic()
            health = self.floe.status("/healthz")
            api = self.floe.status("/api/v1/clusters/", api=True)
            # An agent says 503 while its commits are stuck: the worst of the two (one
            # that leads no partition of the probe's topic commits nothing).
            agents = [_status(agent.http_url + "/healthz") for agent in self.floe.agents]
            self.samples.append((t, health, api, 503 if 503 in agents else max(agents)))
            time.sleep(0.2)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def back_after(self, since: float, column: int) -> float | None:
        """Seconds from `since` to the first 200 after the last failure in `column`."""
        failed = [t for t, *codes in self.samples if t >= since and codes[column - 1] != 200]
        if not failed:
            return 0.0
        after = [t for t, *codes in self.samples if t > failed[-1] and codes[column - 1] == 200]
        return after[0] - since if after else None

    def saw(self, since: float, column: int, status: int) -> bool:
        return any(t >= since and codes[column - 1] == status for t, *codes in self.samples)


def _status(url: str | urllib.request.Request) -> int:
    """The HTTP status of a GET (0: no answer)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def _create_topic(bootstrap: str, topic: str) -> None:
    """The topic, asked again (for up to 60 s) when the request is lost with its broker
    handle: on a loaded machine an agent can drop out of the live list for a moment, and
    librdkafka then fails what it had in flight to it (_DESTROY_BROKER, _TRANSPORT)."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    deadline = time.monotonic() + 60
    while True:
        try:
            admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
            return
        except KafkaException as exc:
            code = exc.args[0].code()
            if code == KafkaError.TOPIC_ALREADY_EXISTS:
                return  # an earlier try's request was served
            lost = code in (KafkaError._DESTROY_BROKER, KafkaError._TRANSPORT)
            if not lost or time.monotonic() > deadline:
                raise
            print(f"CreateTopics {topic}: {exc.args[0].str()}; asking again")
            time.sleep(1)


def _through_a_fault(floe, ha, request, name: str, inject) -> dict:
    """The probe and a group through `inject()`; returns the figures (and records the
    fault table's row)."""
    _create_topic(floe.bootstrap, name)
    reader = GroupReader(floe.bootstrap, name, f"{name}-readers")
    try:
        with Probe(floe.bootstrap, name) as probe:
            assert probe.wait_acked(50, 30), "the probe did not get going"
            # The group has joined and committed on every partition (-1001: nothing yet).
            joined = wait_until(lambda: min(reader.committed().values()) > 0, 90)
            assert joined is not None, (
                f"the group never committed: {reader.committed()}, {len(reader.seen)} read,"
                f" the consumer's errors {reader.errors}\n"
                + "--- the consumer's group log ---\n"
                + "\n".join(reader.group_log)
                + "\n"
                + floe.logs_tail()
            )
            before = reader.committed()
            watch = Watch(floe)
            at = time.monotonic()
            try:
                detail = inject()
                probe.fault_ended()
                assert probe.wait_acked(100, 90), "produce did not come back\n" + ha.describe()
                time.sleep(2)
            finally:
                watch.stop()
            pause, resumed = probe.longest_pause(at)
            after_fault = reader.committed()
            # beat → worker → the metadata store: a task that reads and writes it ran
            # again after the fault, on the worker's own new connection.
            runs = floe.worker.task_runs(EXPIRE_TASK)
            worker_back = wait_until(lambda: floe.worker.task_runs(EXPIRE_TASK) > runs, 30)
        time.sleep(1.5)  # an agent's learned last stable offset goes stale (test_redis_outage)
        outcome = probe.outcome(name, manual_restart=not floe.all_alive())
        # Every acknowledged record reached the group, and its committed offsets reach the
        # end: none went back (no group offset lost) and the group went on committing.
        ends = probe_ends(floe.bootstrap, name)
        caught_up = wait_until(lambda: reader.committed() == ends, 60)
        final = reader.committed()
    finally:
        reader.stop()
    outcome.recovered_s = resumed - at  # from the fault's start: produce acknowledged again
    request.node.user_properties.append((FAULT_ROW, outcome.row()))
    figures = {
        "outcome": outcome,
        "pause_s": pause,
        "produce_back_s": resumed - at,
        "healthz_back_s": watch.back_after(at, 1),
        "api_back_s": watch.back_after(at, 2),
        "healthz_said_503": watch.saw(at, 1, 503),
        "agent_said_503": watch.saw(at, 3, 503),
        "before": before,
        "after_fault": after_fault,
        "final": final,
        "ends": ends,
        "worker_ran_again_in_s": worker_back,
        "detail": detail,
    }
    print(f"\n{name}: " + ", ".join(f"{k}={v}" for k, v in figures.items() if k != "outcome"))
    assert outcome.lost == 0 and outcome.duplicates == 0 and outcome.failed == 0, outcome
    assert not outcome.manual_restart, "a Floe process died"
    assert all(after_fault[p] >= before[p] for p in before), (before, after_fault)
    assert caught_up is not None, (final, ends)
    assert worker_back is not None, "the Celery worker ran no task after the fault"
    return figures


def probe_ends(bootstrap: str, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ends", "log_level": 0})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(PARTITIONS)
        }
    finally:
        consumer.close()


def test_the_primary_killed_loses_nothing_and_every_process_finds_the_new_one(floe, ha, request):
    ha.wait_healthy(90)

    def inject():
        killed = time.monotonic()
        old = ha.kill_primary()
        new = ha.wait_primary(60, other_than=old)
        leader_s = time.monotonic() - killed
        writable_s = _writable_after(ha, killed)
        # Health says which node is primary now, and the web server reached it by itself.
        assert wait_until(lambda: floe.healthz().get("status") == "ok", 30) is not None
        return {"old": old, "new": new, "leader_after_s": leader_s, "writable_after_s": writable_s}

    figures = _through_a_fault(floe, ha, request, "ha-primary-killed", inject)
    writable_s = figures["detail"]["writable_after_s"]
    ha.start_node(figures["detail"]["old"])  # the machine is back: it may rejoin as a replica
    _wait_sync_standby(ha)
    health = floe.healthz()["database"]
    assert health["role"] == "primary" and health["writable"], health
    assert "sync" in {r["sync_state"] for r in health["replicas"]}, health
    assert figures["healthz_said_503"], "healthz never said unhealthy while there was no primary"
    assert figures["agent_said_503"], "the agent's healthz never said commits were stuck"
    assert figures["produce_back_s"] - writable_s <= FLOE_BOUND_S, figures
    assert figures["api_back_s"] is not None, figures
    assert figures["api_back_s"] - writable_s <= FLOE_BOUND_S, figures
    # The whole, from the kill: produce acknowledged, the console's data (the REST API)
    # and its health answering again — the leader key deleted by the failure detector,
    # not left to its ttl.
    assert figures["produce_back_s"] <= KILL_BOUND_S, figures
    assert figures["api_back_s"] <= KILL_BOUND_S, figures
    assert figures["healthz_back_s"] is not None, figures
    assert figures["healthz_back_s"] <= KILL_BOUND_S, figures
    assert ha.failure_detector_deletions(), "no failure detector deleted the leader key"


def test_a_planned_switchover_pauses_produce_briefly_and_loses_nothing(floe, ha, request):
    _wait_sync_standby(ha)

    def inject():
        started = time.monotonic()
        old = ha.primary()
        # A clean stop archives every WAL segment still waiting for it first: the backlog
        # is part of the switchover's pause.
        backlog = _archive_backlog(ha, old)
        new = ha.switchover()
        return {
            "old": old,
            "new": new,
            "writable_after_s": _writable_after(ha, started),
            "wal_segments_waiting_for_archive": backlog,
        }

    figures = _through_a_fault(floe, ha, request, "ha-switchover", inject)
    assert figures["produce_back_s"] - figures["detail"]["writable_after_s"] <= FLOE_BOUND_S
    assert figures["pause_s"] <= SWITCHOVER_PAUSE_BOUND_S, figures
    assert floe.healthz()["database"]["role"] == "primary"


def _writable_after(ha, since: float) -> float:
    """Seconds from `since` until a fresh connection through the multi-host DSN writes."""
    import psycopg

    def writes() -> bool:
        try:
            with psycopg.connect(ha.dsn, connect_timeout=3) as conn:
                conn.execute("SELECT txid_current()")
            return True
        except psycopg.Error:
            return False

    assert wait_until(writes, 60, 0.1) is not None, "the database never took writes\n" + (
        ha.describe()
    )
    return time.monotonic() - since


def _archive_backlog(ha, node: str) -> int:
    """WAL segments of `node` written but not archived yet."""
    import psycopg

    with psycopg.connect(ha.node_dsn(node), connect_timeout=3) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_ls_archive_statusdir() WHERE name LIKE '%.ready'"
        ).fetchone()
    return int(row[0]) if row else 0


def _wait_sync_standby(ha, timeout_s: float = 120) -> None:
    """A running leader with a streaming synchronous standby (a switchover's candidate)."""

    def ready() -> bool:
        try:
            members = ha.members()
        except ConnectionError:
            return False
        leader = any(m["role"] == "leader" and m["state"] == "running" for m in members)
        sync = any(m["role"] == "sync_standby" and m["state"] == "streaming" for m in members)
        return leader and sync

    assert wait_until(ready, timeout_s, 0.25) is not None, ha.describe()
