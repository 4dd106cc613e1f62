"""One Kafka-input pipeline on this agent: a thread of its own (confluent-kafka blocks; the
agent's event loop must not), reading the pipeline's topics in its consumer group and
writing what the engine (`core.pipelines`) makes of each record.

Exactly-once, topic to topic (KIP-98): the consumer reads `read_committed` without auto
commit; per poll batch and input partition, one transaction holds the partition's
outputs (dead letters included) and its next input offset (`send_offsets_to_transaction`
with the consumer's group metadata), then commits. The transactional id is scoped to
the input PARTITION (`floe-pipeline-<id>-<topic>-<partition>`), not to the agent: when a
partition moves to another agent (a rebalance, or its agent died) the new owner's
`init_transactions` aborts whatever the old owner left open and fences it — a zombie's
late commit fails with PRODUCER_FENCED whether or not the broker checks the group's
generation in TxnOffsetCommit (KIP-447; Floe's does not). The cost is one producer per
owned partition.

A new configuration version is taken between two batches: the batch before it is
committed whole, the batch after it is the new version's (no record lost or doubled
across the switch). A version that reads other topics or another group restarts the
consumer. Stopping (paused, deleted) commits what was processed, then leaves the group.
Any error aborts the open transaction, closes the clients and starts again from the
committed offsets after a growing pause (at most `MAX_BACKOFF_S`).

Outputs that are not topics (bucket files, HTTP) cannot join the transaction: a
partition's offset is committed only up to the first record still waiting for its
bucket PUT, and an HTTP output is POSTed before the batch commits — at-least-once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from agents.metrics import Counter
from agents.pipeline_sinks import BucketFiles, HttpPoster, OutputError, json_line
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

BATCH_RECORDS = 5000  # records per poll (and so, at most, per transaction)
POLL_S = 0.2
CLIENT_TIMEOUT_S = 30.0  # init/commit/abort of a transaction, offsets sent
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
    "Pipeline transactions (one per input partition and poll batch), by outcome.",
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
        self._producers: dict[tuple[str, int], Producer] = {}
        # Commits of a batch's transactions, one per input partition, side by side.
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

        def assigned(c: Consumer, partitions: list[TopicPartition]) -> None:
            for tp in partitions:
                self._producer_for(settings, tp.topic, tp.partition)

        def revoked(c: Consumer, partitions: list[TopicPartition]) -> None:
            for tp in partitions:
                for bucket in state.compiled.buckets.values():
                    bucket.drop(tp.topic, tp.partition)
                producer = self._producers.pop((tp.topic, tp.partition), None)
                if producer is not None:
                    producer.flush(5)

        consumer.subscribe(
            list(source.topics), on_assign=assigned, on_revoke=revoked, on_lost=revoked
        )
        try:
            self.stats.state = "running"
            while not self._stopping.is_set():
                pending = self._take_pending()
                if pending is not None:
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
                messages = consumer.consume(BATCH_RECORDS, POLL_S)
                records = []
                for msg in messages:
                    error = msg.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            continue
                        raise KafkaException(error)
                    records.append(to_in_record(msg))
                if records:
                    self._process(consumer, state, records)
                    # rate_limit: the engine says how long before more records (bounded).
                    wait = min(state.compiled.pipeline.wait_seconds(), MAX_RATE_WAIT_S)
                    if wait > 0:
                        self._stopping.wait(wait)
                if any(b.flush_due() for b in state.compiled.buckets.values()):
                    self._commit_offsets_only(consumer, state)
                self._measure_lag(consumer)
            self._flush_buckets(consumer, state)
            return state.compiled
        finally:
            for producer in self._producers.values():
                try:
                    producer.abort_transaction(1)
                except KafkaException:
                    pass  # nothing open: the usual case
            self._producers.clear()
            consumer.close()  # leaves the group: its partitions move at once

    def _producer_for(self, settings: dict[str, Any], topic: str, partition: int) -> Producer:
        key = (topic, partition)
        producer = self._producers.get(key)
        if producer is None:
            producer = Producer(
                {
                    **settings,
                    "transactional.id": f"floe-pipeline-{self.assignment.id}-{topic}-{partition}",
                    "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
                    "message.timeout.ms": TRANSACTION_TIMEOUT_MS,
                    "linger.ms": 5,
                    "queue.buffering.max.messages": 500_000,
                }
            )
            # Fences the partition's previous owner and aborts what it left open.
            producer.init_transactions(CLIENT_TIMEOUT_S)
            self._producers[key] = producer
        return producer

    def _process(
        self, consumer: Consumer, state: _SessionState, records: Sequence[InRecord]
    ) -> None:
        compiled = state.compiled
        self.stats.count("in", len(records))
        results = compiled.pipeline.process_batch(records)
        by_partition: dict[tuple[str, int], list[int]] = {}
        for i, rec in enumerate(records):
            by_partition.setdefault((rec.topic, rec.partition), []).append(i)
        spec = compiled.spec
        topics = compiled.topics
        group = consumer.consumer_group_metadata()
        opened: list[_OpenTransaction] = []
        try:
            for (topic, partition), indexes in by_partition.items():
                producer = self._producers.get((topic, partition))
                if producer is None:  # revoked meanwhile: its next owner reads these again
                    continue
                txn = _OpenTransaction(producer, topic, partition)
                producer.begin_transaction()
                opened.append(txn)
                for i in indexes:
                    rec, result = records[i], results[i]
                    if isinstance(result, RecordError):
                        if spec.dead_letter is None:
                            self.stats.error(
                                f"{rec.topic}/{rec.partition}/{rec.offset}: processor "
                                f"{result.processor}: {result.message}"
                            )
                            txn.filtered += 1
                            continue
                        letter = compiled.pipeline.dead_letter_record(rec, result)
                        _produce(producer, spec.dead_letter.topic, letter)
                        txn.dead += 1
                        continue
                    if not result:
                        txn.filtered += 1
                    for emit in result:
                        topic_out = topics.get(emit.output)
                        if topic_out is not None:
                            _produce(producer, topic_out, emit)
                        else:
                            self._emit(producer, compiled, rec, emit)
                        txn.out += 1
                end = records[indexes[-1]].offset + 1
                txn.offset = min([end, *self._pending_bucket_offsets(compiled, topic, partition)])
        except BaseException:
            for txn in opened:
                TRANSACTIONS.inc(1, self.assignment.name, "aborted")
                _abort_quietly(txn.producer)
            raise
        # Each partition's transaction commits on its own producer: all at once (each
        # commit waits on the cluster; librdkafka releases the GIL meanwhile).
        done = [(txn, self._committer.submit(txn.commit, group)) for txn in opened]
        failed: BaseException | None = None
        for txn, future in done:
            error = future.exception(CLIENT_TIMEOUT_S * 3)
            if error is None:
                TRANSACTIONS.inc(1, self.assignment.name, "committed")
                self.stats.count("out", txn.out)
                self.stats.count("dead_lettered", txn.dead)
                self.stats.count("filtered", txn.filtered)
                continue
            TRANSACTIONS.inc(1, self.assignment.name, "aborted")
            _abort_quietly(txn.producer)
            failed = failed or error
        if failed is not None:
            raise failed

    def _pending_bucket_offsets(self, compiled: _Compiled, topic: str, partition: int) -> list[int]:
        found = [b.pending_from(topic, partition) for b in compiled.buckets.values()]
        return [f for f in found if f is not None]

    def _emit(self, producer: Producer, compiled: _Compiled, rec: InRecord, emit: Emit) -> None:
        output = compiled.spec.outputs.get(emit.output)
        if isinstance(output, KafkaOutput):
            _produce(producer, output.topic, emit)
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
        bucket now (a transaction with no records)."""
        for (topic, partition), producer in list(self._producers.items()):
            position = _position(consumer, topic, partition)
            if position is None:
                continue
            offset = min(
                [position, *self._pending_bucket_offsets(state.compiled, topic, partition)]
            )
            producer.begin_transaction()
            try:
                producer.send_offsets_to_transaction(
                    [TopicPartition(topic, partition, offset)],
                    consumer.consumer_group_metadata(),
                    CLIENT_TIMEOUT_S,
                )
                producer.commit_transaction(CLIENT_TIMEOUT_S)
            except BaseException:
                _abort_quietly(producer)
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


@dataclass
class _OpenTransaction:
    """One input partition's transaction of a batch, records produced, not committed."""

    producer: Producer
    topic: str
    partition: int
    offset: int = -1  # the partition's next input offset, committed with it
    out: int = 0
    dead: int = 0
    filtered: int = 0

    def commit(self, group: Any) -> None:
        self.producer.send_offsets_to_transaction(
            [TopicPartition(self.topic, self.partition, self.offset)], group, CLIENT_TIMEOUT_S
        )
        self.producer.commit_transaction(CLIENT_TIMEOUT_S)


def _position(consumer: Consumer, topic: str, partition: int) -> int | None:
    (tp,) = consumer.position([TopicPartition(topic, partition)])
    return tp.offset if tp.offset >= 0 else None


def _produce(producer: Producer, topic: str, emit: Emit) -> None:
    while True:
        try:
            producer.produce(
                topic,
                value=emit.value,
                key=emit.key,
                headers=list(emit.headers) if emit.headers else None,
                timestamp=emit.timestamp_ms,
            )
            return
        except BufferError:
            producer.poll(0.05)


def _abort_quietly(producer: Producer) -> None:
    try:
        producer.abort_transaction(CLIENT_TIMEOUT_S)
    except KafkaException as exc:
        log.info("abort_transaction: %s", exc)
