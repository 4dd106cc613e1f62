"""One Kafka-input pipeline on this agent: a thread of its own (confluent-kafka blocks; the
agent's event loop must not), reading the pipeline's topics in its consumer group and
writing what the engine (`core.pipelines`) makes of each record.

Exactly-once, topic to topic (KIP-98): the consumer reads `read_committed` without auto
commit; each input partition's records go out in transactions that hold the partition's
outputs (dead letters included) and its next input offset (`send_offsets_to_transaction`
with the consumer's group metadata). The thread polls and processes; the records wait
*staged* at their partition until it has no transaction committing, then go out in the
next one, which commits on a pool while the thread reads on
(`agents.pipeline_transactions`). The transactional id is scoped to the input PARTITION
(`floe-pipeline-<id>-<topic>-<partition>`), not to the agent: when a partition moves to
another agent (a rebalance, or its agent died) the new owner's `init_transactions`
aborts whatever the old owner left open and fences it — a zombie's late commit fails
with PRODUCER_FENCED whether or not the broker checks the group's generation in
TxnOffsetCommit (KIP-447; Floe's does not). The cost is one producer per owned
partition.

A new configuration version is taken between two polls: what the old one processed is
committed first, what is read after it is the new version's (no record lost or doubled
across the switch). A version that reads other topics or another group restarts the
consumer. Stopping (paused, deleted) commits what was processed, then leaves the group.
Any error aborts the open transactions, closes the clients and starts again from the
committed offsets after a growing pause (at most `MAX_BACKOFF_S`).

Outputs that are not topics (bucket files, HTTP) cannot join the transaction: a
partition's offset is committed only up to the first record still waiting for its
bucket PUT, and an HTTP output is POSTed before the transaction commits — at-least-once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent import futures
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from agents.metrics import Counter
from agents.pipeline_sinks import BucketFiles, HttpPoster, OutputError, json_line
from agents.pipeline_transactions import (
    CLIENT_TIMEOUT_S,
    TRANSACTION_MAX_RECORDS,
    OpenTransaction,
    PartitionWriter,
    TransactionBudget,
    abort_quietly,
    produce,
)
from core.pipelines import (
    BucketOutput,
    CompiledPipeline,
    Emit,
    HttpOutput,
    InRecord,
    KafkaInput,
    KafkaOutput,
    PipelineSpec,
    RecordError,
    SchemaSource,
    compile_spec,
    parse_config,
)
from core.storage import ObjectStore

log = logging.getLogger(__name__)

BATCH_RECORDS = 5000  # records per poll
LINGER_MS = 1000  # longer than any transaction's writing takes
# Records processed and waiting for their partition's transaction to commit, at most
# (more: the thread waits for a commit before it reads on). About a second of reading
# at 20,000 records/s, so a commit slower than the processing only grows transactions.
STAGED_MAX_RECORDS = 20_000
POLL_S = 0.2
TRANSACTION_TIMEOUT_MS = 30_000
SESSION_TIMEOUT_MS = 6_000  # a dead agent's partitions move within about this
MAX_BACKOFF_S = 10.0
LAG_EVERY_S = 5.0
MAX_RATE_WAIT_S = 5.0  # a rate limit's wait between batches, at most (the group's
# max.poll.interval.ms is far longer)
ERRORS_KEPT = 10

RECORDS = Counter(
    "floe_pipeline_records_total",
    "Records of managed pipelines on this agent, by pipeline and what became of them "
    "(in: read; out: written to an output; dead_lettered; filtered).",
    ("pipeline", "kind"),
)
TRANSACTIONS = Counter(
    "floe_pipeline_transactions_total",
    "Pipeline transactions (each one input partition's records), by outcome.",
    ("pipeline", "outcome"),
)


@dataclass
class Assignment:
    """A running pipeline as the control plane assigns it (`pipelines/assignments`)."""

    id: str
    name: str
    version: int
    config: str
    credentials: dict[str, Any] | None = None

    @classmethod
    def from_answer(cls, item: dict[str, Any]) -> Assignment:
        credentials = item.get("credentials")
        return cls(
            id=str(item["id"]),
            name=str(item["name"]),
            version=int(item["version"]),
            config=str(item["config"]),
            credentials=credentials if isinstance(credentials, dict) else None,
        )


@dataclass
class PipelineStats:
    """Cumulative counters of one pipeline on this agent (what `pipelines/report` sends).
    One thread writes them; the report reads them."""

    pipeline: str
    version: int = 0
    records_in: int = 0
    records_out: int = 0
    records_dead_lettered: int = 0
    records_filtered: int = 0
    lag: int | None = None
    state: str = "running"
    errors: deque[dict[str, str]] = field(default_factory=lambda: deque(maxlen=ERRORS_KEPT))

    def count(self, kind: str, n: int) -> None:
        if n:
            setattr(self, f"records_{kind}", getattr(self, f"records_{kind}") + n)
            RECORDS.inc(n, self.pipeline, kind)

    def error(self, message: str) -> None:
        at = datetime.now(UTC).isoformat(timespec="seconds")
        self.errors.append({"at": at, "message": message[:1000]})

    def report(self, pipeline_id: str) -> dict[str, Any]:
        return {
            "id": pipeline_id,
            "version": self.version,
            "records_in": self.records_in,
            "records_out": self.records_out,
            "records_dead_lettered": self.records_dead_lettered,
            "records_filtered": self.records_filtered,
            "errors": list(self.errors),
            "lag": self.lag,
            "state": self.state,
        }


def kafka_login(credentials: dict[str, Any] | None, protocol: str) -> dict[str, Any]:
    """confluent-kafka settings that log in as the pipeline's principal on a listener of
    `protocol` (its SASL/SCRAM user; nothing when the cluster asks for none)."""
    settings: dict[str, Any] = {}
    if credentials and protocol.upper().startswith("SASL_"):
        settings["sasl.mechanism"] = str(credentials.get("mechanism") or "SCRAM-SHA-256")
        settings["sasl.username"] = str(credentials.get("username") or "")
        settings["sasl.password"] = str(credentials.get("password") or "")
    return settings


def client_settings(
    assignment: Assignment, bootstrap: Callable[[bool], dict[str, Any]]
) -> dict[str, Any]:
    """Settings every Kafka client of the pipeline shares: where, and as whom."""
    credentials = assignment.credentials
    where = bootstrap(bool(credentials))
    return {
        **where,
        "client.id": f"floe-pipeline-{assignment.name}",
        "socket.timeout.ms": 10_000,
        "reconnect.backoff.max.ms": 1000,
        "topic.metadata.refresh.interval.ms": 5000,
        "logger": log,  # librdkafka's lines go to the agent's log, not raw stderr
        **kafka_login(credentials, str(where.get("security.protocol", ""))),
    }


def to_in_record(msg: Message) -> InRecord:
    _, timestamp = msg.timestamp()
    raw = msg.headers()  # confluent-kafka: [(name, bytes or None)], None without headers
    headers: tuple[tuple[str, bytes | None], ...] = ()
    if raw:
        headers = tuple((str(h[0]), h[1] if isinstance(h[1], bytes) else None) for h in raw)
    return InRecord(
        topic=msg.topic() or "",
        partition=msg.partition() or 0,
        offset=msg.offset() or 0,
        timestamp_ms=timestamp,
        key=msg.key(),
        value=msg.value(),
        headers=headers,
    )


class _Compiled:
    """One configuration version, compiled, with its non-topic outputs opened."""

    def __init__(
        self,
        assignment: Assignment,
        store: ObjectStore | None,
        stopping: threading.Event,
        schemas: SchemaSource | None,
    ) -> None:
        self.version = assignment.version
        self.spec: PipelineSpec = parse_config(assignment.config)
        self.pipeline: CompiledPipeline = compile_spec(self.spec, schemas)
        self.buckets: dict[str, BucketFiles] = {}
        self.posters: dict[str, HttpPoster] = {}
        self.topics: dict[str, str] = {}  # Kafka outputs: name → topic (the hot path)
        for name, output in self.spec.outputs.items():
            if isinstance(output, KafkaOutput):
                self.topics[name] = output.topic
            elif isinstance(output, BucketOutput):
                if store is None:
                    raise OutputError("this agent has no bucket for a bucket output")
                self.buckets[name] = BucketFiles(
                    store,
                    prefix=output.prefix,
                    pipeline=assignment.name,
                    max_records=output.max_records,
                    max_age_s=output.max_age_seconds,
                )
            elif isinstance(output, HttpOutput):
                self.posters[name] = HttpPoster(
                    output.url, timeout_s=output.timeout_seconds, stopping=stopping
                )

    def input_key(self) -> tuple[tuple[str, ...], str, str]:
        source = self.spec.input
        assert isinstance(source, KafkaInput)
        return (tuple(sorted(source.topics)), source.group or "", source.start)

    def close(self) -> None:
        for poster in self.posters.values():
            poster.close()


class KafkaPipelineWorker(threading.Thread):
    """Runs one Kafka-input pipeline until `stop()`; `update()` hands it a new version."""

    def __init__(
        self,
        assignment: Assignment,
        *,
        bootstrap: Callable[[bool], dict[str, Any]],
        store: ObjectStore | None,
        agent_id: str,
        schemas: SchemaSource | None = None,
    ) -> None:
        super().__init__(name=f"floe-pipeline-{assignment.name}", daemon=True)
        self.schemas = schemas
        self.assignment = assignment
        # confluent-kafka's bootstrap.servers and security.protocol (SASL or not?)
        self.bootstrap = bootstrap
        self.store = store
        self.agent_id = agent_id
        self.stats = PipelineStats(assignment.name, version=assignment.version)
        self._stopping = threading.Event()
        self._pending: Assignment | None = None
        self._lock = threading.Lock()
        self._writers: dict[tuple[str, int], PartitionWriter] = {}
        self._staged = 0  # records staged in all of them
        self._partition_counts: dict[str, int] = {}  # output topics' (a session's)
        # Each partition's transaction commits here while the thread reads on.
        self._committer = ThreadPoolExecutor(max_workers=8, thread_name_prefix="floe-pipeline-txn")
        self._lag_at = 0.0

    # -- control, from the agent's loop ---------------------------------------------------
    def update(self, assignment: Assignment) -> None:
        """Take `assignment` (a new version or new credentials) between two batches."""
        with self._lock:
            self._pending = assignment

    def stop(self) -> None:
        self._stopping.set()

    def latest_assignment(self) -> Assignment:
        """What it was last given: running, or about to be taken between two batches."""
        with self._lock:
            return self._pending or self.assignment

    # -- the thread -------------------------------------------------------------------------
    def run(self) -> None:
        backoff = 0.5
        compiled: _Compiled | None = None
        while not self._stopping.is_set():
            try:
                if compiled is None:
                    compiled = _Compiled(self.assignment, self.store, self._stopping, self.schemas)
                    self.stats.version = compiled.version
                compiled = self._session(compiled)
                backoff = 0.5
            except Exception as exc:  # reported; started again from the committed offsets
                log.warning("pipeline %s: %s", self.assignment.name, exc)
                self.stats.error(f"{type(exc).__name__}: {exc}")
                self.stats.state = "failing"
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_S)
        if compiled is not None:
            compiled.close()
        self._committer.shutdown(wait=False)
        self.stats.state = "stopped"

    def _take_pending(self) -> Assignment | None:
        with self._lock:
            pending, self._pending = self._pending, None
        return pending

    def _client_settings(self) -> dict[str, Any]:
        return client_settings(self.assignment, self.bootstrap)

    def _session(self, compiled: _Compiled) -> _Compiled:
        """Consume until stopped, failed, or a version that needs another consumer;
        returns the version to go on with."""
        source = compiled.spec.input
        assert isinstance(source, KafkaInput)
        settings = self._client_settings()
        group = source.group or f"floe-pipeline-{self.assignment.name}"
        consumer = Consumer(
            {
                **settings,
                "group.id": group,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "latest" if source.start == "latest" else "earliest",
                "session.timeout.ms": SESSION_TIMEOUT_MS,
                "heartbeat.interval.ms": 1000,
                "max.poll.interval.ms": 120_000,
                "fetch.wait.max.ms": 100,
            }
        )
        state = _SessionState(compiled)
        self._partition_counts.clear()

        def assigned(c: Consumer, partitions: list[TopicPartition]) -> None:
            for tp in partitions:
                self._writer_for(settings, tp.topic, tp.partition)

        def revoked(c: Consumer, partitions: list[TopicPartition]) -> None:
            for tp in partitions:
                for bucket in state.compiled.buckets.values():
                    bucket.drop(tp.topic, tp.partition)
                writer = self._writers.pop((tp.topic, tp.partition), None)
                if writer is not None:  # its staged records: its next owner reads them
                    self._staged -= len(writer.staged_records)
                    self._count_settled(writer.abandon())

        consumer.subscribe(
            list(source.topics), on_assign=assigned, on_revoke=revoked, on_lost=revoked
        )
        try:
            self.stats.state = "running"
            while not self._stopping.is_set():
                pending = self._take_pending()
                if pending is not None:
                    # What the old version processed is committed before the new one runs.
                    self._drain(consumer, state.compiled)
                    self._flush_buckets(consumer, state)  # what the old version buffered
                    try:
                        new = _Compiled(pending, self.store, self._stopping, self.schemas)
                    except Exception:
                        self.update(pending)  # tried again after the pause
                        raise
                    restart = new.input_key() != state.compiled.input_key() or (
                        pending.credentials != self.assignment.credentials
                    )
                    self.assignment = pending
                    state.compiled.close()
                    state.compiled = new
                    self.stats.version = new.version
                    log.info("pipeline %s: version %d", pending.name, new.version)
                    if restart:  # other topics, group or principal: another consumer
                        return new
                # While records wait for their partition's commit, take what the
                # consumer has now and go on writing rather than wait for more.
                waiting = self._staged > 0
                messages = consumer.consume(BATCH_RECORDS, 0 if waiting else POLL_S)
                records = []
                for msg in messages:
                    error = msg.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            continue
                        raise KafkaException(error)
                    records.append(to_in_record(msg))
                if records:
                    self._stage(state.compiled, records)
                self._write(consumer, state.compiled, wait=waiting and not records)
                if records:
                    # rate_limit: the engine says how long before more records (bounded).
                    wait = min(state.compiled.pipeline.wait_seconds(), MAX_RATE_WAIT_S)
                    if wait > 0:
                        self._stopping.wait(wait)
                if any(b.flush_due() for b in state.compiled.buckets.values()):
                    self._commit_offsets_only(consumer, state)
                self._measure_lag(consumer)
            self._drain(consumer, state.compiled)
            self._flush_buckets(consumer, state)
            return state.compiled
        finally:
            for writer in self._writers.values():
                self._count_settled(writer.abandon())  # anything still open aborts
            self._writers.clear()
            self._staged = 0
            consumer.close()  # leaves the group: its partitions move at once

    def _writer_for(self, settings: dict[str, Any], topic: str, partition: int) -> None:
        key = (topic, partition)
        if key in self._writers:
            return
        producer = Producer(
            {
                **settings,
                "transactional.id": f"floe-pipeline-{self.assignment.id}-{topic}-{partition}",
                "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
                "message.timeout.ms": TRANSACTION_TIMEOUT_MS,
                # The records go out when the transaction's commit flushes them (see
                # agents.pipeline_transactions), spread over the output partitions.
                "linger.ms": LINGER_MS,
                "sticky.partitioning.linger.ms": 0,
                "queue.buffering.max.messages": 500_000,
            }
        )
        # Fences the partition's previous owner and aborts what it left open.
        producer.init_transactions(CLIENT_TIMEOUT_S)
        self._writers[key] = PartitionWriter(producer, topic, partition)

    def _stage(self, compiled: _Compiled, records: Sequence[InRecord]) -> None:
        """Run the engine over `records`; each record and its result wait with their
        input partition for its next transaction."""
        self.stats.count("in", len(records))
        results = compiled.pipeline.process_batch(records)
        writers = self._writers
        writer: PartitionWriter | None = None
        for rec, result in zip(records, results):
            if writer is None or writer.partition != rec.partition or writer.topic != rec.topic:
                writer = writers.get((rec.topic, rec.partition))
                if writer is None:  # revoked meanwhile: its next owner reads it again
                    continue
            writer.stage(rec, result)
            self._staged += 1

    def _write(self, consumer: Consumer, compiled: _Compiled, *, wait: bool) -> None:
        """Settle the commits that ended, and write each partition's staged records in
        a transaction of their own where none is committing. With `wait`, or over
        `STAGED_MAX_RECORDS` staged, first wait for a commit to end."""
        while True:
            if wait or self._staged >= STAGED_MAX_RECORDS:
                committing = [w.committing for w in self._writers.values() if w.committing]
                if committing:
                    futures.wait(committing, CLIENT_TIMEOUT_S * 3, futures.FIRST_COMPLETED)
            group = None
            for writer in self._writers.values():
                if not writer.may_begin():
                    continue
                self._count_settled(writer.settle(0))
                if writer.staged_records:
                    if group is None:
                        group = consumer.consumer_group_metadata()
                    self._write_partition(compiled, writer, group)
            if self._staged < STAGED_MAX_RECORDS:
                return
            wait = False

    def _drain(self, consumer: Consumer, compiled: _Compiled) -> None:
        """Write everything staged and wait until every transaction has committed."""
        while self._staged or any(w.committing for w in self._writers.values()):
            self._write(consumer, compiled, wait=True)
            for writer in self._writers.values():
                if not writer.staged_records:
                    self._count_settled(writer.settle(CLIENT_TIMEOUT_S * 3))

    def _count_settled(self, txn: OpenTransaction | None) -> None:
        if txn is None:
            return
        TRANSACTIONS.inc(1, self.assignment.name, "committed")
        self.stats.count("out", txn.out)
        self.stats.count("dead_lettered", txn.dead)
        self.stats.count("filtered", txn.filtered)

    def _write_partition(self, compiled: _Compiled, writer: PartitionWriter, group: Any) -> None:
        """One transaction: the partition's first staged records (as many as its budget
        takes) and its next input offset, committing on the pool when this returns."""
        records, results = writer.staged_records, writer.staged_results
        spec = compiled.spec
        topics = compiled.topics
        producer = writer.producer
        budget = TransactionBudget(lambda topic: self._partition_count(producer, topic))
        txn = writer.begin()
        written = 0
        try:
            for rec, result in zip(records, results):
                written += 1
                if isinstance(result, RecordError):
                    if spec.dead_letter is None:
                        self.stats.error(
                            f"{rec.topic}/{rec.partition}/{rec.offset}: processor "
                            f"{result.processor}: {result.message}"
                        )
                        txn.filtered += 1
                    else:
                        letter = compiled.pipeline.dead_letter_record(rec, result)
                        produce(producer, spec.dead_letter.topic, letter)
                        budget.spend(spec.dead_letter.topic, letter)
                        txn.dead += 1
                else:
                    if not result:
                        txn.filtered += 1
                    for emit in result:
                        topic_out = topics.get(emit.output)
                        if topic_out is not None:
                            produce(producer, topic_out, emit)
                            budget.spend(topic_out, emit)
                        else:
                            self._emit(producer, compiled, rec, emit)
                        txn.out += 1
                if budget.full or written >= TRANSACTION_MAX_RECORDS:
                    break
            end = records[written - 1].offset + 1
            pending = self._pending_bucket_offsets(compiled, writer.topic, writer.partition)
            txn.offset = min([end, *pending])
            writer.unstage(written)
            self._staged -= written
            writer.commit_in(self._committer, txn, group)
        except BaseException:
            TRANSACTIONS.inc(1, self.assignment.name, "aborted")
            abort_quietly(producer)
            raise

    def _partition_count(self, producer: Producer, topic: str) -> int:
        """Partitions of output topic `topic` (1 when the cluster does not say)."""
        count = self._partition_counts.get(topic)
        if count is None:
            try:
                found = producer.list_topics(topic, CLIENT_TIMEOUT_S).topics.get(topic)
                count = max(1, len(found.partitions)) if found and not found.error else 1
            except KafkaException as exc:
                log.info("pipeline %s: no metadata of %s: %s", self.assignment.name, topic, exc)
                count = 1
            self._partition_counts[topic] = count
        return count

    def _pending_bucket_offsets(self, compiled: _Compiled, topic: str, partition: int) -> list[int]:
        found = [b.pending_from(topic, partition) for b in compiled.buckets.values()]
        return [f for f in found if f is not None]

    def _emit(self, producer: Producer, compiled: _Compiled, rec: InRecord, emit: Emit) -> None:
        output = compiled.spec.outputs.get(emit.output)
        if isinstance(output, KafkaOutput):
            produce(producer, output.topic, emit)
        elif isinstance(output, BucketOutput):
            compiled.buckets[emit.output].add(
                rec.topic,
                rec.partition,
                rec.offset,
                json_line(
                    topic=rec.topic,
                    partition=rec.partition,
                    offset=rec.offset,
                    timestamp_ms=emit.timestamp_ms,
                    key=emit.key,
                    value=emit.value,
                    headers=emit.headers,
                ),
            )
        elif isinstance(output, HttpOutput):
            headers = {
                "Content-Type": "application/json",
                "Floe-Source": f"{rec.topic}/{rec.partition}/{rec.offset}",
            }
            if emit.key is not None:
                headers["Floe-Key"] = emit.key.decode("utf-8", "replace")
            compiled.posters[emit.output].post(emit.value or b"", headers)
        else:
            raise OutputError(f"no output named {emit.output!r}")

    def _commit_offsets_only(self, consumer: Consumer, state: _SessionState) -> None:
        """After bucket PUTs: commit each owned partition's offset up to what is in the
        bucket now (a transaction with no records), once everything read is written."""
        self._drain(consumer, state.compiled)
        for (topic, partition), writer in list(self._writers.items()):
            position = _position(consumer, topic, partition)
            if position is None:
                continue
            offset = min(
                [position, *self._pending_bucket_offsets(state.compiled, topic, partition)]
            )
            producer = writer.producer
            producer.begin_transaction()
            try:
                producer.send_offsets_to_transaction(
                    [TopicPartition(topic, partition, offset)],
                    consumer.consumer_group_metadata(),
                    CLIENT_TIMEOUT_S,
                )
                producer.commit_transaction(CLIENT_TIMEOUT_S)
            except BaseException:
                abort_quietly(producer)
                raise

    def _flush_buckets(self, consumer: Consumer, state: _SessionState) -> None:
        if state.compiled.buckets:
            for bucket in state.compiled.buckets.values():
                bucket.flush_all()
            self._commit_offsets_only(consumer, state)

    def _measure_lag(self, consumer: Consumer) -> None:
        now = time.monotonic()
        if now - self._lag_at < LAG_EVERY_S:
            return
        self._lag_at = now
        lag = 0
        try:
            for tp in consumer.assignment():
                low, high = consumer.get_watermark_offsets(tp, timeout=2, cached=False)
                position = _position(consumer, tp.topic, tp.partition)
                lag += max(0, high - (position if position is not None else low))
        except KafkaException:
            return
        self.stats.lag = lag


@dataclass
class _SessionState:
    compiled: _Compiled


def _position(consumer: Consumer, topic: str, partition: int) -> int | None:
    (tp,) = consumer.position([TopicPartition(topic, partition)])
    return tp.offset if tp.offset >= 0 else None
