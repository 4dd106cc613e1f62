"""The outside probe: a producer at a steady rate, then a consumer that checks every
acknowledged message is read back exactly once. It knows nothing of Floe's insides."""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass

# The user property of a fault test's report that carries its row of the table.
FAULT_ROW = "fault outcome"


@dataclass
class Outcome:
    """One fault's figures (the table the suite prints)."""

    fault: str
    sent: int
    acked: int
    failed: int
    lost: int  # acknowledged, never read back
    duplicates: int  # read back more than once
    longest_ack_s: float
    recovered_s: float | None  # from the fault's end to the next acknowledged message
    manual_restart: bool
    errors: tuple[str, ...] = ()  # the distinct errors of failed messages
    # A few duplicates' (value, [(partition, offset), ...]): where each copy is stored.
    duplicate_at: tuple = ()

    ROW = "{:<34} {:>5} {:>5} {:>6} {:>5} {:>5} {:>11} {:>12} {:>8}"

    @classmethod
    def header(cls) -> str:
        return cls.ROW.format(
            "fault", "sent", "acked", "failed", "lost", "dups", "max ack s", "back after s",
            "restart",
        )  # fmt: skip

    def row(self) -> str:
        recovered = "never" if self.recovered_s is None else f"{self.recovered_s:.1f}"
        errors = f"\n    failed with: {'; '.join(self.errors)}" if self.errors else ""
        return errors and self._row(recovered) + errors or self._row(recovered)

    def _row(self, recovered: str) -> str:
        return self.ROW.format(
            self.fault, self.sent, self.acked, self.failed, self.lost, self.duplicates,
            f"{self.longest_ack_s:.1f}", recovered, "yes" if self.manual_restart else "no",
        )  # fmt: skip


class Probe:
    """`with Probe(bootstrap, topic) as probe: ... probe.fault_ended()` then `outcome()`."""

    def __init__(
        self, bootstrap: str, topic: str, *, rate: int = 100, idempotent: bool = True
    ) -> None:
        from confluent_kafka import Producer

        self.bootstrap = bootstrap
        self.topic = topic
        self.interval = 1 / rate
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": idempotent,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 120000,
                "retry.backoff.ms": 100,
                "retry.backoff.max.ms": 1000,
                "reconnect.backoff.max.ms": 1000,
                "topic.metadata.refresh.interval.ms": 2000,
                "log_level": 0,
            }
        )
        self.sent_at: dict[int, float] = {}
        self.acked_at: dict[int, float] = {}
        self.failed: dict[int, str] = {}
        self.ended_at: float | None = None
        self.out_of_order = 0  # records read back after a later one of their partition
        # The producer's thread writes sent_at and acked_at while the test reads them: a
        # read copies under this lock (a copy without it can meet a write mid-way when a
        # garbage collection in the copy runs Python code that lets the other thread in).
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Probe:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)
        self.producer.flush(130)

    def _run(self) -> None:
        seq = 0
        next_at = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            if now < next_at:
                self.producer.poll(min(next_at - now, 0.05))
                continue
            with self._lock:
                self.sent_at[seq] = now
            try:
                self.producer.produce(
                    self.topic, value=b"%d" % seq, on_delivery=self._delivered(seq)
                )
            except BufferError:
                self.producer.poll(0.1)
            seq += 1
            next_at += self.interval
            self.producer.poll(0)

    def _delivered(self, seq: int):
        def done(err, msg) -> None:
            with self._lock:
                if err is None:
                    self.acked_at[seq] = time.monotonic()
                else:
                    self.failed[seq] = str(err)

        return done

    def wait_acked(self, count: int = 20, timeout_s: float = 60) -> bool:
        """Wait until `count` messages sent from now on are acknowledged."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            first = len(self.sent_at)  # sequence numbers are given in order from 0
        while time.monotonic() < deadline:
            # Only the records sent since, under the lock: copying every record under it
            # (hundreds of thousands) held the delivery reports for a good part of a
            # second each time on a loaded machine, delaying the acks being timed.
            with self._lock:
                sent = len(self.sent_at)
                fresh = sum(1 for s in range(first, sent) if s in self.acked_at)
            if fresh >= count:
                return True
            time.sleep(0.05)
        return False

    def fault_ended(self) -> None:
        self.ended_at = time.monotonic()

    def recovered_s(self) -> float | None:
        """From the fault's end to the first acknowledgement after it."""
        assert self.ended_at is not None
        with self._lock:
            acked = list(self.acked_at.values())
        after = [t for t in acked if t >= self.ended_at]
        return (min(after) - self.ended_at) if after else None

    def longest_pause(self, since: float) -> tuple[float, float]:
        """The longest wait between one acknowledgement and the next from `since` on (the
        moment of a fault: `since` itself counts as one), and when that wait ended: how
        long produce stopped, and when it worked again."""
        with self._lock:
            times = sorted(t for t in self.acked_at.values() if t >= since)
        longest, ended = 0.0, since
        previous = since
        for t in times:
            if t - previous > longest:
                longest, ended = t - previous, t
            previous = t
        return longest, ended

    def read_back(self, timeout_s: float = 60) -> Counter:
        """Every message of the topic, counted by sequence number."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"probe-{self.topic}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "log_level": 0,
            }
        )
        try:
            metadata = consumer.list_topics(self.topic, timeout=30)
            partitions = sorted(metadata.topics[self.topic].partitions)
            ends = {p: _high_watermark(consumer, TopicPartition(self.topic, p)) for p in partitions}
            consumer.assign([TopicPartition(self.topic, p, 0) for p in partitions])
            seen: Counter = Counter()
            where: dict[int, list[tuple[int, int]]] = {}
            read: set[tuple[int, int]] = set()
            positions = dict.fromkeys(partitions, 0)
            last: dict[int, int] = {}
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline and any(positions[p] < ends[p] for p in partitions):
                msg = consumer.poll(0.5)
                if msg is None or msg.error():
                    continue
                at = (msg.partition(), msg.offset())
                if at in read:  # the consumer fetched it again: one stored record, not two
                    continue
                read.add(at)
                value = int(msg.value())
                # One producer: a partition holds its records in the order sent.
                if value < last.get(msg.partition(), -1):
                    self.out_of_order += 1
                last[msg.partition()] = value
                seen[value] += 1
                where.setdefault(value, []).append(at)
                positions[msg.partition()] = msg.offset() + 1
            self.stored_twice = {v: where[v] for v, n in seen.items() if n > 1}
            return seen
        finally:
            consumer.close()

    def outcome(self, fault: str, *, manual_restart: bool = False) -> Outcome:
        seen = self.read_back()
        latencies = [self.acked_at[s] - self.sent_at[s] for s in self.acked_at]
        return Outcome(
            fault=fault,
            sent=len(self.sent_at),
            acked=len(self.acked_at),
            failed=len(self.failed),
            lost=sum(1 for s in self.acked_at if seen[s] == 0),
            duplicates=sum(n - 1 for n in seen.values() if n > 1),
            longest_ack_s=max(latencies, default=0.0),
            recovered_s=self.recovered_s(),
            manual_restart=manual_restart,
            errors=tuple(sorted(set(self.failed.values()))),
            duplicate_at=tuple(sorted(self.stored_twice.items())[:5]),
        )


def _high_watermark(consumer, partition, timeout_s: float = 30) -> int:
    """The partition's high watermark, asked again on the errors a client retries: after a
    fault librdkafka may still be swapping its broker handles (a fresh Metadata can retire
    one mid-call: _DESTROY_BROKER, _TRANSPORT), which says nothing about the data."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return consumer.get_watermark_offsets(partition, timeout=10)[1]
        except KafkaException as exc:
            if (
                time.monotonic() > deadline
                or not exc.args[0].retriable()
                and exc.args[0].code() >= 0
            ):
                raise
            time.sleep(0.5)
