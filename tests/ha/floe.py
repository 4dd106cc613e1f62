"""Floe on a given metadata PostgreSQL: its migrations applied, the control plane's web
server and one agent (real processes, started as the fault suite starts them:
tests/faults/services.py), and the Kafka client side the restore tests use — a producer
that keeps each acknowledged record's place, and a reader of everything a topic serves."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from tests.agents.conftest import AgentProcess
from tests.faults.services import agent_start, floe_env
from tests.faults.world import WebServer, prepare_database


class FloeOn:
    """`prepare()` (migrate; with `make_cluster`, a virtual cluster whose agent key it
    returns), then `start(key)` and `stop()`."""

    def __init__(self, database_url: str, bucket_url: str, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.bucket_url = bucket_url
        self.env = floe_env(database_url=database_url, folder=folder)
        self.web: WebServer | None = None
        self.agent: AgentProcess | None = None

    def prepare(self, *, make_cluster: bool) -> str | None:
        agent_key, _ = prepare_database(self.env, make_cluster=make_cluster)
        return agent_key or None

    def start(self, key: str) -> str:
        """The web server and one agent; returns the agent's bootstrap address."""
        self.web = WebServer(self.env, self.folder)
        self.web.start()
        self.agent = agent_start(
            self.env, self.folder, "agent", control_plane_url=self.web.url, key=key,
            bucket_url=self.bucket_url,
        )  # fmt: skip
        return self.agent.bootstrap

    def stop(self) -> None:
        if self.agent is not None:
            self.agent.kill()
        if self.web is not None:
            self.web.kill()


@dataclass(frozen=True)
class Acked:
    partition: int
    offset: int
    at: float  # time.time() when the acknowledgement arrived


def produce_steadily(
    bootstrap: str, topic: str, seconds: float, rate: int, prefix: str = "r"
) -> dict[str, Acked]:
    """An idempotent producer (acks=all) sending `rate` records a second for `seconds`, the
    values `prefix` and a number; returns each acknowledged record's value → where it was
    stored and when it was acknowledged."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 30000,
            "log_level": 0,
        }
    )
    acked: dict[str, Acked] = {}

    def on_delivery(error, message) -> None:
        if error is None:
            acked[message.value().decode()] = Acked(
                message.partition(), message.offset(), time.time()
            )

    started, n = time.monotonic(), 0
    while time.monotonic() - started < seconds:
        producer.produce(topic, value=f"{prefix}{n:06d}".encode(), on_delivery=on_delivery)
        n += 1
        producer.poll(0)
        time.sleep(max(0.0, started + n / rate - time.monotonic()))
    producer.flush(30)
    return acked


def read_everything(bootstrap: str, topic: str, partitions: int) -> dict[str, tuple[int, int]]:
    """Every record the topic serves, value → (partition, offset), read to the high
    watermarks (bounded in time)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"ha-reader-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "log_level": 0,
        }
    )
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in range(partitions)}  # fmt: skip
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        served: dict[str, tuple[int, int]] = {}
        positions = {p: 0 for p in range(partitions)}
        deadline = time.monotonic() + 60
        while any(positions[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None or message.error():
                continue
            served[message.value().decode()] = (message.partition(), message.offset())
            positions[message.partition()] = message.offset() + 1
        if any(positions[p] < ends[p] for p in ends):
            raise TimeoutError(f"read {positions} of {ends} in 60 s")
        return served
    finally:
        consumer.close()
