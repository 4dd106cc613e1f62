"""Killing every agent of one agent group while the other group's clients work: a
producer and two consumer groups on `east` — one used only from east (so coordinated
there), one with a member in each agent group whose lease a `west` agent holds — go on
without an error and lose nothing while both west agents are SIGKILLed; the lease of the
group coordinated in west passes to an east agent within the lease time, and the east
member then owns every partition."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import pytest

from agents.groups.leases import LEASE_TTL_S, RENEW_INTERVAL_S
from tests.agents.test_agent_groups import wait_for_views

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka]

TOPIC = "steady"
PARTITIONS = 4
HEARTBEAT_MS = 500
SESSION_MS = 6000
# A lease outlives its holder by at most its ttl; the survivors' next group request
# (one heartbeat interval) then takes it.
TAKEOVER_BOUND_S = LEASE_TTL_S + HEARTBEAT_MS / 1000 + RENEW_INTERVAL_S


@dataclass
class Client:
    """A client running in its own thread until `stop`; what it received and every
    error librdkafka reported to it (error callback, delivery reports, messages)."""

    name: str
    stop: threading.Event = field(default_factory=threading.Event)
    received: list[tuple[float, bytes]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    assigned: int = 0
    thread: threading.Thread | None = None

    def error_cb(self, error) -> None:
        self.errors.append(f"{self.name}: {error}")

    def values(self) -> list[bytes]:
        return [v for _, v in self.received]


def run_member(client: Client, bootstrap: str, group: str, **config) -> Client:
    """A consumer group member polling until stopped (auto commit every 500 ms)."""
    from confluent_kafka import Consumer

    def body() -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "client.id": client.name,
                "auto.offset.reset": "earliest",
                "auto.commit.interval.ms": 500,
                "fetch.wait.max.ms": 100,
                "heartbeat.interval.ms": HEARTBEAT_MS,
                "session.timeout.ms": SESSION_MS,
                "error_cb": client.error_cb,
                **config,
            }
        )
        try:
            consumer.subscribe([TOPIC])
            while not client.stop.is_set():
                message = consumer.poll(0.1)
                client.assigned = len(consumer.assignment())
                if message is None:
                    continue
                if message.error():
                    client.errors.append(f"{client.name}: {message.error()}")
                else:
                    client.received.append((time.monotonic(), message.value()))
        finally:
            consumer.close()

    client.thread = threading.Thread(target=body, daemon=True)
    client.thread.start()
    return client


def run_producer(client: Client, bootstrap: str, sent: list[bytes]) -> Client:
    """A record every 20 ms until stopped, then a flush; `sent` gets each delivered one."""
    from confluent_kafka import Producer

    def on_delivery(error, message) -> None:
        if error is not None:
            client.errors.append(f"{client.name}: {error}")
        else:
            sent.append(message.value())

    def body() -> None:
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "linger.ms": 5,
                "acks": "all",
                "message.timeout.ms": 30000,
                "error_cb": client.error_cb,
            }
        )
        n = 0
        while not client.stop.is_set():
            producer.produce(TOPIC, f"r{n}".encode(), on_delivery=on_delivery)
            producer.poll(0.02)
            n += 1
        if producer.flush(30):
            client.errors.append(f"{client.name}: records left unsent")

    client.thread = threading.Thread(target=body, daemon=True)
    client.thread.start()
    return client


def wait_until(check, timeout_s: float, what: str) -> float:
    """Poll `check` until true; returns when it became true (time.monotonic())."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s}s: {what}")
        time.sleep(0.05)
    return time.monotonic()


def largest_gap(times: list[float], start: float, end: float) -> float:
    """The longest stretch within [start, end] with nothing received."""
    inside = [start, *sorted(t for t in times if start <= t <= end), end]
    return max(b - a for a, b in zip(inside, inside[1:]))


@pytest.mark.timeout(180)  # ~30 s of calls, ~60 s with four agents' start on a busy machine
def test_killing_one_group_leaves_the_other_groups_clients_working(agent, cluster):
    from confluent_kafka.admin import AdminClient, NewTopic

    from metadata_store.models import GroupLease

    starting = {
        name: [agent(cluster.key, extra=["--agent-group", name], wait=False) for _ in range(2)]
        for name in ("east", "west")
    }
    for process in [*starting["east"], *starting["west"]]:
        process.wait_ready()
    wait_for_views(starting)
    east, west = starting["east"], starting["west"]
    east_ids, west_ids = {a.agent_id for a in east}, {a.agent_id for a in west}
    admin = AdminClient({"bootstrap.servers": east[0].bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS)])[TOPIC].result(30)

    def holder(group: str) -> str:
        lease = GroupLease.objects.filter(cluster=cluster.cluster, group_id=group).first()
        return lease.agent_id if lease else ""

    # "across": its first member joins through west, so a west agent takes its lease;
    # the east member joins through east, whose agents relay to that holder.
    west_member = run_member(
        Client("west-member"), west[0].bootstrap, "across", log_level=0
    )  # quiet once its agents are gone
    wait_until(lambda: west_member.assigned == PARTITIONS, 30, "the west member's assignment")
    assert holder("across") in west_ids
    east_member = run_member(Client("east-member"), east[1].bootstrap, "across")
    wait_until(
        lambda: east_member.assigned == west_member.assigned == PARTITIONS // 2,
        30,
        "the partitions shared across the agent groups",
    )
    # "east-only": used from east alone, so coordinated there.
    east_only = run_member(Client("east-only"), east[0].bootstrap, "east-only")
    wait_until(lambda: east_only.assigned == PARTITIONS, 30, "the east-only assignment")
    assert holder("east-only") in east_ids
    sent: list[bytes] = []
    producer = run_producer(Client("producer"), east[1].bootstrap, sent)

    wait_until(lambda: len(east_only.received) >= 50, 20, "records flowing")
    killed = time.monotonic()
    for process in west:
        process.kill()
    taken = wait_until(
        lambda: holder("across") in east_ids, 3 * TAKEOVER_BOUND_S, "an east agent takes 'across'"
    )
    owns_all = wait_until(
        lambda: east_member.assigned == PARTITIONS,
        TAKEOVER_BOUND_S + 2 * SESSION_MS / 1000,
        "the east member owning every partition",
    )
    time.sleep(2)
    producer.stop.set()
    producer.thread.join(40)
    west_member.stop.set()  # its agents are gone: only its thread is left to end
    assert not producer.thread.is_alive()
    wait_until(lambda: set(sent) <= set(east_only.values()), 20, "east-only reads every record")
    wait_until(
        lambda: set(sent) <= set(east_member.values()) | set(west_member.values()),
        20,
        "'across' reads every record",
    )
    resumed = min(t for t, _ in east_member.received if t > owns_all) - killed
    for client in (east_only, east_member):
        client.stop.set()
    for client in (east_only, east_member, west_member):
        client.thread.join(30)

    print(
        f"takeover {taken - killed:.2f}s after the kill (bound {TAKEOVER_BOUND_S}s), east "
        f"member owned every partition after {owns_all - killed:.2f}s and read from them "
        f"after {resumed:.2f}s; east-only's longest silence "
        f"{largest_gap([t for t, _ in east_only.received], killed, owns_all):.2f}s, the east "
        f"member's {largest_gap([t for t, _ in east_member.received], killed, owns_all):.2f}s; "
        f"{len(sent)} records"
    )
    assert taken - killed <= TAKEOVER_BOUND_S
    # The east clients saw no error at all, and east-only read each record exactly once.
    assert producer.errors == east_only.errors == east_member.errors == []
    assert sorted(east_only.values()) == sorted(sent)
    assert len(sent) > 100
