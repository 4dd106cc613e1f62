"""A Kafka-input pipeline's exactly-once output, one input partition at a time.

Each input partition this agent owns has a `PartitionWriter`: its transactional producer
(`floe-pipeline-<id>-<topic>-<partition>`, see `agents.pipeline_worker`), the records
the engine has processed but that are not written yet (*staged*), and the transaction
committing now. A transaction holds the partition's outputs and its next input offset;
its commit (`flush`, `send_offsets_to_transaction`, `commit_transaction`: the produce
acks a segment commit later, AddOffsetsToTxn, TxnOffsetCommit and EndTxn, each a round
trip through the cluster) runs on a thread of the worker's pool while the pipeline
thread reads and processes what comes next. Those
records wait staged until the commit before them is done, then go out in the next
transaction together: a partition has at most one transaction committing, so its
transactions (and offsets) commit in order, and the slower the commits, the larger the
transactions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from core.pipelines import Emit, InRecord, RecordError

log = logging.getLogger(__name__)

CLIENT_TIMEOUT_S = 30.0  # init/commit/abort of a transaction, offsets sent

# How much one transaction writes. librdkafka keeps one Produce request in flight per
# partition for an idempotent producer (its cap of 5 counts messages, not requests),
# and while more records wait behind that request, ready to go, its broker thread
# polls without pause until the answer — a segment commit later. So a transaction
# gives each output partition no more than one request carries: at most
# TRANSACTION_MAX_RECORDS records (librdkafka's batch.num.messages) and, per output
# topic, a share of REQUEST_BYTES (its batch.size, and an agent's default
# max.message.bytes) for each of the topic's partitions (keyless records are spread
# at random, so the partitions' shares vary a little).
TRANSACTION_MAX_RECORDS = 10_000
REQUEST_BYTES = 1_000_000
PARTITION_SHARE_BYTES = REQUEST_BYTES * 4 // 5
RECORD_OVERHEAD_BYTES = 64  # a record's framing in its batch, about

# What the engine made of one input record: its outputs ([] when filtered out), or why
# it failed.
Result = list[Emit] | RecordError


@dataclass
class OpenTransaction:
    """One input partition's transaction: records produced, the offset to commit with
    them, and what became of its input records (counted once it commits)."""

    producer: Producer
    topic: str
    partition: int
    offset: int = -1  # the partition's next input offset, committed with it
    out: int = 0
    dead: int = 0
    filtered: int = 0

    def commit(self, group: Any) -> None:
        # The records first, all at once (linger.ms is long): one Produce request per
        # output partition, see TRANSACTION_MAX_RECORDS.
        if self.producer.flush(CLIENT_TIMEOUT_S):
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "records not acknowledged"))
        self.producer.send_offsets_to_transaction(
            [TopicPartition(self.topic, self.partition, self.offset)], group, CLIENT_TIMEOUT_S
        )
        self.producer.commit_transaction(CLIENT_TIMEOUT_S)


class TransactionBudget:
    """What one transaction may still write to each output topic (see REQUEST_BYTES);
    `full` once one of them is spent."""

    __slots__ = ("left", "partitions", "full")

    def __init__(self, partitions: Callable[[str], int]) -> None:
        self.partitions = partitions  # an output topic's partition count
        self.left: dict[str, int] = {}
        self.full = False

    def spend(self, topic: str, emit: Emit) -> None:
        left = self.left.get(topic)
        if left is None:
            left = self.partitions(topic) * PARTITION_SHARE_BYTES
        left -= RECORD_OVERHEAD_BYTES + len(emit.value or b"") + len(emit.key or b"")
        self.left[topic] = left
        if left <= 0:
            self.full = True


class PartitionWriter:
    """One owned input partition: its producer, its staged records and the transaction
    committing (`committing`, a future of the commit pool). Used by the pipeline
    thread only; the commit itself runs on the pool."""

    def __init__(self, producer: Producer, topic: str, partition: int) -> None:
        self.producer = producer
        self.topic = topic
        self.partition = partition
        self.staged_records: list[InRecord] = []
        self.staged_results: list[Result] = []
        self.committing: Future[None] | None = None
        self.transaction: OpenTransaction | None = None  # the one committing

    def stage(self, record: InRecord, result: Result) -> None:
        self.staged_records.append(record)
        self.staged_results.append(result)

    def unstage(self, count: int) -> None:
        """The first `count` staged records are written: no longer staged."""
        if count >= len(self.staged_records):
            self.staged_records, self.staged_results = [], []
        else:
            del self.staged_records[:count], self.staged_results[:count]

    def drop_staged(self) -> None:
        """Forget the staged records: the partition's next reader reads them again from
        the committed offset."""
        self.staged_records, self.staged_results = [], []

    def may_begin(self) -> bool:
        """No transaction of this partition is committing (or its commit has ended and
        waits only to be settled)."""
        return self.committing is None or self.committing.done()

    def begin(self) -> OpenTransaction:
        """A new transaction; the one before must be settled."""
        assert self.committing is None, "the previous transaction is not settled"
        self.producer.begin_transaction()
        return OpenTransaction(self.producer, self.topic, self.partition)

    def commit_in(self, pool: Executor, transaction: OpenTransaction, group: Any) -> None:
        """Commit `transaction` (its records produced, its offset set) on `pool`."""
        self.transaction = transaction
        self.committing = pool.submit(transaction.commit, group)

    def settle(self, timeout_s: float) -> OpenTransaction | None:
        """Wait (at most `timeout_s`) for the transaction committing: it, committed, or
        None when there is none. Raises its error, the transaction aborted, if it failed
        or did not finish in time."""
        future, transaction = self.committing, self.transaction
        if future is None or transaction is None:
            return None
        try:
            error = future.exception(timeout_s)
        except TimeoutError as exc:
            error = exc
        self.committing, self.transaction = None, None
        if error is not None:
            abort_quietly(self.producer)
            raise error
        return transaction

    def abandon(self) -> OpenTransaction | None:
        """The partition is given up (revoked, or the session ends): its staged records
        dropped, the commit in flight waited for (returned if it committed), any open
        transaction aborted. One left open is aborted by the partition's next owner."""
        self.drop_staged()
        committed = None
        if self.committing is not None:
            try:
                committed = self.settle(CLIENT_TIMEOUT_S * 3)
            except Exception as exc:  # its next owner reads the records again
                log.info("%s/%d: the last commit failed: %s", self.topic, self.partition, exc)
        abort_quietly(self.producer, timeout_s=1, say=False)
        return committed


def produce(producer: Producer, topic: str, emit: Emit) -> None:
    """`emit` to `topic` in the producer's open transaction (waiting while its queue
    is full)."""
    headers = emit.headers
    while True:
        try:
            producer.produce(
                topic,
                value=emit.value,
                key=emit.key,
                headers=list(headers) if headers else None,
                timestamp=emit.timestamp_ms,
            )
            return
        except BufferError:
            producer.poll(0.05)


def abort_quietly(
    producer: Producer, timeout_s: float = CLIENT_TIMEOUT_S, say: bool = True
) -> None:
    """Abort the producer's open transaction, if any (nothing open is the usual case)."""
    try:
        producer.abort_transaction(timeout_s)
    except KafkaException as exc:
        if say:
            log.info("abort_transaction: %s", exc)
