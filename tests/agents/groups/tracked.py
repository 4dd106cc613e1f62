"""Group members that record every assignment with the generation it came in, and one
run of the multi-agent scenario (issue 24): N members share a topic, one joins, one
leaves; each step must settle within the session timeout, no partition may be held by
two members of one generation, every record is read, and the group's committed offsets
end at the last consumed offset + 1.

Each client's generation comes from where that client keeps it: librdkafka's cgrp debug
line ("JoinGroup response: GenerationId N"), kafka-python's and aiokafka's coordinator,
kafkajs's 'Received assignment' debug line. Every member writes its client's debug log to
`log_dir`, so a failed run shows the clients' side beside the agents' stderr.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import subprocess
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

from tests.agents.groups.members import (
    HEARTBEAT_MS,
    REBALANCE_TIMEOUT_MS,
    SESSION_TIMEOUT_MS,
    AiokafkaMember,
    BackgroundProducer,
    ConfluentMember,
    KafkaPythonMember,
    Member,
    wait_until,
)

HERE = Path(__file__).resolve().parent
JS_DIR = HERE.parents[1] / "js"
# The Python clients' own loggers, into each member's log: INFO (joins, errors) unless
# FLOE_GROUP_CLIENT_LOG=DEBUG asks for their whole story (why a member rejoined).
CLIENT_LOG_LEVEL = os.environ.get("FLOE_GROUP_CLIENT_LOG", "INFO").upper()
_JOIN_LINE = re.compile(r"JoinGroup response: GenerationId (-?\d+)")


class TrackedMember(Member):
    """A member whose `history` holds (generation, partitions) for every assignment."""

    def __init__(
        self, name: str, brokers: str, group: str, topic: str, log_dir: Path, zone: str | None
    ) -> None:
        super().__init__(name, brokers, group, topic)
        # A client names its zone in client.id (docs/ARCHITECTURE.md, "Metadata, zones").
        self.client_id = name if zone is None else f"{name},floe_az={zone}"
        self.log_path = log_dir / f"{name}.log"
        self.generation = -1
        self.history: list[tuple[int, frozenset[int]]] = []

    def note(self, generation: int, partitions) -> None:
        held = frozenset(partitions)
        self.generation, self.assigned = generation, held
        if not self.history or self.history[-1] != (generation, held):
            self.history.append((generation, held))

    def _file_handler(self) -> logging.Handler:
        handler = logging.FileHandler(self.log_path)
        handler.setFormatter(logging.Formatter("%(asctime)s %(threadName)s %(message)s"))
        return handler

    @contextlib.contextmanager
    def _client_log(self, name: str):
        """The client library's logger `name` (kafka-python, aiokafka: their group
        coordinators log joins and errors at INFO) also writes to this member's log while
        it runs (with the other members' lines of that run: the thread names tell them
        apart)."""
        logger, handler = logging.getLogger(name), self._file_handler()
        logger.addHandler(handler)
        logger.setLevel(CLIENT_LOG_LEVEL)
        try:
            yield
        finally:
            logger.removeHandler(handler)
            handler.close()


class ConfluentTracked(TrackedMember, ConfluentMember):
    """librdkafka says the generation in its cgrp debug log ("JoinGroup response:
    GenerationId N"), read here from the log callback before the assignment arrives."""

    def consume(self) -> None:
        self.options = {"debug": "cgrp"}
        self.join_generation = -1
        member = self

        class Parse(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                found = _JOIN_LINE.search(record.getMessage())
                if found:
                    member.join_generation = int(found.group(1))

        self.logger = logging.getLogger(f"floe.test.{self.name}")
        self.logger.propagate = False
        self.logger.setLevel(logging.DEBUG)
        self.logger.handlers[:] = [self._file_handler(), Parse()]
        try:
            super().consume()
        finally:
            self.logger.handlers[0].close()

    def consumer_kwargs(self) -> dict:
        return {"logger": self.logger}

    def assigned_to(self, consumer, partitions: list[int]) -> None:
        self.note(self.join_generation, partitions)


class KafkaPythonTracked(TrackedMember, KafkaPythonMember):
    def consume(self) -> None:
        with self._client_log("kafka.coordinator"):
            super().consume()

    def assigned_to(self, consumer, partitions: list[int]) -> None:
        self.note(consumer._coordinator._generation.generation_id, partitions)


class AiokafkaTracked(TrackedMember, AiokafkaMember):
    def consume(self) -> None:
        with self._client_log("aiokafka.consumer.group_coordinator"):
            super().consume()

    def assigned_to(self, consumer, partitions: list[int]) -> None:
        self.note(consumer._coordinator.generation, partitions)


class KafkajsTracked(TrackedMember):
    """kafkajs in a Node.js process (kafkajs_member.js), read line by line."""

    proc: subprocess.Popen | None = None

    def consume(self) -> None:
        env = {
            **os.environ,
            "NODE_PATH": str(JS_DIR / "node_modules"),
            "BROKERS": self.bootstrap,
            "TOPIC": self.topic,
            "GROUP": self.group,
            "CLIENT_ID": self.client_id,
            "SESSION_TIMEOUT_MS": str(SESSION_TIMEOUT_MS),
            "HEARTBEAT_MS": str(HEARTBEAT_MS),
            "REBALANCE_TIMEOUT_MS": str(REBALANCE_TIMEOUT_MS),
        }
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                ["node", str(HERE / "kafkajs_member.js")],
                cwd=JS_DIR,
                env=env,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        try:
            for line in self.proc.stdout:
                event = json.loads(line)
                if "join" in event:
                    self.note(int(event["join"]), event["partitions"])
                elif "records" in event:
                    self.records.extend((p, o) for p, o in event["records"])
                elif "error" in event:
                    self.errors.append(event["error"])
        finally:
            if self.proc.wait(20) != 0:
                self.errors.append(f"kafkajs exited with {self.proc.returncode}")

    def stop(self, timeout_s: float = 20.0) -> None:
        self.stopping.set()
        deadline = time.monotonic() + 5
        while self.proc is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self.join(timeout_s)
        if self.is_alive() and self.proc is not None:
            self.proc.kill()
        assert not self.is_alive(), f"{self.name} did not close"


CLIENTS: dict[str, type[TrackedMember]] = {
    "kafkajs": KafkajsTracked,
    "confluent-kafka": ConfluentTracked,
    "kafka-python": KafkaPythonTracked,
    "aiokafka": AiokafkaTracked,
}


def settled(members: list[TrackedMember], partitions: int, after: int) -> bool:
    """Every member is in one generation newer than `after`, and together they hold each
    partition exactly once."""
    if not members or any(not m.is_alive() for m in members):
        return False
    generations = {m.generation for m in members}
    if len(generations) != 1 or min(generations) <= after:
        return False
    held = [p for m in members for p in m.assigned]
    return len(held) == partitions and set(held) == set(range(partitions))


def _repeated(history: list[tuple[int, frozenset[int]]]) -> set[int]:
    """Generations a member was given two different assignments in."""
    seen: dict[int, frozenset[int]] = {}
    return {g for g, held in history if seen.setdefault(g, held) != held}


def double_owners(members: list[TrackedMember]) -> list[str]:
    """Partitions that two members held in one generation."""
    owners: dict[tuple[int, int], set[str]] = defaultdict(set)
    for m in members:
        for generation, held in m.history:
            for partition in held:
                owners[generation, partition].add(m.name)
    return [
        f"generation {g} partition {p}: {sorted(n)}" for (g, p), n in owners.items() if len(n) > 1
    ]


def committed_offsets(brokers: str, group: str, topic: str) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": brokers})
    request = [ConsumerGroupTopicPartitions(group)]
    answer = admin.list_consumer_group_offsets(request, request_timeout=15)[group].result(20)
    return {tp.partition: tp.offset for tp in answer.topic_partitions if tp.topic == topic}


def create_topic(brokers: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": brokers})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


class GroupRun:
    """One run: `members` members of `group` (each bootstrapped at `bootstrap_for(i)`),
    then one more joins, then the first leaves; `fault()`, when given, is called once the
    group first settled and must return when it struck (the kill or cut), and the group
    must settle again after it (in a new generation if `fault_rebalances`) within
    `fault_settle_s`.

    Produces into the topic meanwhile and checks the issue's invariants; `report` holds
    the numbers."""

    def __init__(
        self,
        client: str,
        members: int,
        *,
        topic: str,
        group: str,
        brokers: str,
        bootstrap_for: Callable[[int], tuple[str, str | None]],
        log_dir: Path,
        partitions: int = 6,
        fault: Callable[[], None] | None = None,
        fault_rebalances: bool = True,
        fault_settle_s: float = SESSION_TIMEOUT_MS / 1000,
    ) -> None:
        self.client, self.count, self.topic, self.group = client, members, topic, group
        self.brokers, self.bootstrap_for, self.log_dir = brokers, bootstrap_for, log_dir
        self.partitions, self.fault, self.fault_rebalances = partitions, fault, fault_rebalances
        self.fault_settle_s = fault_settle_s
        self.everyone: list[TrackedMember] = []
        self.report: dict[str, object] = {"client": client, "members": members}

    def _new(self, i: int) -> TrackedMember:
        bootstrap, zone = self.bootstrap_for(i)
        member = CLIENTS[self.client](
            f"{self.group}-m{i}", bootstrap, self.group, self.topic, self.log_dir, zone
        )
        self.everyone.append(member)
        member.start()
        return member

    def _settle(
        self, live: list[TrackedMember], what: str, timeout_s: float, *, rebalanced: bool = True
    ) -> float:
        after = max([-1, *(m.generation for m in live if m.history)]) if rebalanced else 0
        try:
            took = wait_until(lambda: settled(live, self.partitions, after), timeout_s, what)
        except AssertionError:
            held = {m.name: (m.generation, sorted(m.assigned)) for m in live}
            reused = sorted((m.name, g) for m in live for g in _repeated(m.history))
            raise AssertionError(
                f"{self.client}, {self.count} members: no settled generation newer than "
                f"{after} within {timeout_s:.1f}s after {what}"
                f"{f' (generations reused for another assignment: {reused})' if reused else ''}; "
                f"(generation, partitions) by member: {held}; "
                f"errors: {[e for m in live for e in m.errors][:3]}; logs in {self.log_dir}"
            ) from None
        self.report[what] = round(took, 2)
        return took

    def run(self) -> dict[str, object]:
        session_s = SESSION_TIMEOUT_MS / 1000
        create_topic(self.brokers, self.topic, self.partitions)
        producer = BackgroundProducer(self.brokers, self.topic, self.partitions, per_tick=6)
        live = [self._new(i) for i in range(self.count)]
        try:
            producer.start()
            # From the start of the last member: the group's first rebalance waits for
            # the initial delay and for each client's own start-up.
            self._settle(live, "first assignment", 3 * session_s, rebalanced=False)
            if self.fault is not None:
                self.fault()
                self._settle(live, "fault", self.fault_settle_s, rebalanced=self.fault_rebalances)
            live.append(self._new(self.count))
            self._settle(live, "join", session_s)
            leaving = live.pop(0)
            started = time.monotonic()
            leaving.stop()
            self._settle(live, "leave", session_s - (time.monotonic() - started))
            self.report["leave"] = round(time.monotonic() - started, 2)
            produced = producer.finish()
            wait_until(
                lambda: {r for m in self.everyone for r in m.records} >= produced,
                30,
                f"{self.client}: every produced record consumed",
            )
            for m in live:
                m.stop()
        finally:
            producer.stopping.set()
            for m in self.everyone:
                if m.is_alive():
                    m.stop()
        self.check(produced)
        return self.report

    def check(self, produced: set[tuple[int, int]]) -> None:
        everyone = self.everyone
        twice = double_owners(everyone)
        assert not twice, f"{self.client}: partitions held twice in one generation: {twice[:5]}"
        seen = Counter(r for m in everyone for r in m.records)
        assert produced <= set(seen), f"{len(produced - set(seen))} records never read"
        last: dict[int, int] = {}
        for partition, offset in seen:
            last[partition] = max(offset, last.get(partition, -1))
        committed = committed_offsets(self.brokers, self.group, self.topic)
        assert committed == {p: o + 1 for p, o in last.items()}, (committed, last)
        generations = {g for m in everyone for g, _ in m.history}
        errors = [e for m in everyone for e in m.errors]
        # A commit racing a fault's rebalance is refused, and the next one covers it.
        races = ("ILLEGAL_GENERATION", "REBALANCE_IN_PROGRESS", "UNKNOWN_MEMBER", "COORDINATOR")
        bad = [e for e in errors if self.fault is None or not any(r in e for r in races)]
        assert not bad, f"{self.client}: {bad[:3]}"
        self.report.update(
            records=len(produced),
            read_twice=sum(1 for n in seen.values() if n > 1),
            rebalances=len(generations),
            errors=errors[:3],
        )
