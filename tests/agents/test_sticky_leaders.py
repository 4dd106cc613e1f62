"""Partition leaders stay put under a steady producer load: two agents, producers for
each partition of a 12-partition topic (so each agent's requests follow the partitions it
leads, as under tests/faults' load; one agent's partitions get three times the records of
the other's) and a consumer per partition at the tail, thousands of records a second, and Metadata asked
of both agents four times a second — the leaders they name must not move
(agents/zone_routing.py's `LeaderWeights`)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from tests.agents.zone_cluster import start_zones

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka]

PARTITIONS = 12
WATCH_S = float(os.environ.get("FLOE_STICKY_WATCH_S", "15"))  # longer to measure moves/min


def _leaders(admin, topic: str) -> tuple[int, ...] | None:
    try:
        found = admin.list_topics(topic, timeout=5).topics.get(topic)
    except Exception:
        return None
    if found is None or found.error is not None or len(found.partitions) != PARTITIONS:
        return None
    return tuple(found.partitions[p].leader for p in range(PARTITIONS))


def _topic(admin) -> tuple[str, tuple[int, ...]]:
    """A new topic and its leaders (bounded loads split it 6:6 between two agents)."""
    from confluent_kafka.admin import NewTopic

    admin.create_topics([NewTopic("steady", PARTITIONS)])["steady"].result(30)
    leaders = None
    deadline = time.monotonic() + 10
    while leaders is None and time.monotonic() < deadline:
        leaders = _leaders(admin, "steady")
    assert leaders is not None
    return "steady", leaders


def test_leaders_do_not_flap_under_a_steady_load(agent, cluster):
    from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient

    zones = start_zones(agent, cluster.key, {"a": 2})
    agents = zones["a"]
    bootstrap = ",".join(a.bootstrap for a in agents)
    creator = AdminClient({"bootstrap.servers": bootstrap})
    topic, first = _topic(creator)
    # The partitions one agent leads get three producers each, the other's one: that
    # agent's requests alone would call it overloaded (3:1) and move its leaders.
    hot = [p for p in range(PARTITIONS) if first[p] == first[0]]
    turns = [(p, k) for p in range(PARTITIONS) for k in range(3 if p in hot else 1)]

    stop = threading.Event()
    sent = [0]

    def produce() -> None:
        # A consumer per partition at the tail, too: fetches, like produces, go to leaders.
        consumers = [
            Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": "unused",
                    "enable.auto.commit": False,
                    "fetch.wait.max.ms": 10,
                }
            )
            for _ in range(PARTITIONS)
        ]
        for p, consumer in enumerate(consumers):
            consumer.assign([TopicPartition(topic, p, OFFSET_END)])
        producers = {
            turn: Producer(
                {
                    "bootstrap.servers": bootstrap,
                    "enable.idempotence": True,
                    "linger.ms": 0,  # a request per few records: load follows leaders
                    "message.timeout.ms": 20_000,
                }
            )
            for turn in turns
        }
        try:
            n = 0
            while not stop.is_set():
                started = time.monotonic()
                for _ in range(25):  # 5,000 records a second, 1 ms apart on average
                    p, k = turns[n % len(turns)]
                    try:
                        producers[p, k].produce(topic, b"x" * 100, partition=p)
                    except BufferError:
                        producers[p, k].poll(0.05)
                    n += 1
                for producer in producers.values():
                    producer.poll(0)
                for consumer in consumers:
                    consumer.consume(1000, timeout=0)
                time.sleep(max(0.0, 0.005 - (time.monotonic() - started)))
            sent[0] = n
        finally:
            for producer in producers.values():
                producer.flush(5)
            for consumer in consumers:
                consumer.close()

    admins = [AdminClient({"bootstrap.servers": a.bootstrap}) for a in agents]
    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    try:
        time.sleep(7.0)  # two heartbeats: both agents have reported the load
        views: list[tuple[int, ...] | None] = [None, None]
        moves, disagreements = 0, 0
        deadline = time.monotonic() + WATCH_S
        while time.monotonic() < deadline:
            now = [_leaders(admin, topic) for admin in admins]
            for i, leaders in enumerate(now):
                if leaders is None:
                    continue
                before = views[i]
                if before is not None:
                    moves += sum(x != y for x, y in zip(before, leaders))
                views[i] = leaders
            if now[0] and now[1] and now[0] != now[1]:
                disagreements += 1
            time.sleep(0.25)
    finally:
        stop.set()
        thread.join(30)
    print(f"sent={sent[0]} moves={moves} disagreements={disagreements} in {WATCH_S:.0f} s")
    # A real load, uneven 3:1 between the agents whatever its size (the loop offers 5,000
    # records a second; on a loaded CI machine it got 7,100 out in 22 s, and once 2,725,
    # with 0 moves both times): what the leaders are weighed by is the agents' shares.
    assert sent[0] > 1_000
    assert moves <= 1 and disagreements <= 1, (moves, disagreements)
