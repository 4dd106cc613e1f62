"""The tail feed and tail index (issue 28) with real clients against a real agent and
control plane: consumers at the tail are planned by the agent, not the control plane,
and still get every record once while the partitions change under them."""

from __future__ import annotations

import re
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from metadata_store.models import Agent
from tests.agents.test_confluent_kafka import create_topic
from tests.agents.test_transactions import txn_producer

pytestmark = [pytest.mark.kafka, pytest.mark.django_db(transaction=True)]


def plans(agent) -> dict[str, int]:
    """The agent's fetch plans so far, by source."""
    found = re.findall(r'floe_fetch_plans_total\{source="(\w+)"\} ([0-9.e+]+)', agent.metrics())
    return {source: int(float(value)) for source, value in found}


def shared_answers(agent) -> dict[str, int]:
    """The agent's Fetch answers shared between identical Fetches, by outcome."""
    pattern = r'floe_fetch_shared_answers_total\{outcome="(\w+)"\} ([0-9.e+]+)'
    return {outcome: int(float(value)) for outcome, value in re.findall(pattern, agent.metrics())}


def tailing(bootstrap: str, topic: str, partitions: int, isolation: str = "read_uncommitted"):
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"tail-{isolation}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "fetch.wait.max.ms": 500,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    return consumer


def drain(consumers: list, got: list[list], seconds: float) -> None:
    """Poll every consumer for `seconds`, appending (partition, offset, value)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for consumer, out in zip(consumers, got, strict=True):
            for msg in consumer.consume(500, 0.02):
                if msg.error():
                    raise KafkaException(msg.error())
                out.append((msg.partition(), msg.offset(), msg.value()))


def drain_until(consumers: list, got: list[list], count: int, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while min(len(out) for out in got) < count and time.monotonic() < deadline:
        drain(consumers, got, 0.2)


def test_tailing_consumers_are_planned_by_the_agent_and_get_every_record_once(agent, cluster):
    a = agent(cluster.key)
    create_topic(a.bootstrap, "tail", partitions=3)
    consumers = [tailing(a.bootstrap, "tail", 3, iso) for iso in ("read_uncommitted",) * 3]
    got: list[list] = [[] for _ in consumers]
    drain(consumers, got, 1.0)  # every consumer waits at the (empty) tail
    before, shared_before = plans(a), shared_answers(a)
    producer = Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 5})
    sent = []
    for burst in range(20):
        for i in range(15):
            value = f"v{burst}-{i}".encode()
            producer.produce("tail", value, partition=i % 3)
            sent.append(value)
        producer.flush(10)
        drain(consumers, got, 0.1)
    drain_until(consumers, got, len(sent))
    after, shared_after = plans(a), shared_answers(a)
    for out in consumers:
        out.close()
    for out in got:
        assert sorted(v for _, _, v in out) == sorted(sent)  # every record, once
        for p in range(3):
            offsets = [o for part, o, _ in out if part == p]
            assert offsets == list(range(len(offsets)))
    # Three groups at the same offsets: an answer encoded for one went to the others too.
    hits = shared_after.get("hit", 0) - shared_before.get("hit", 0)
    kept = shared_after.get("kept", 0) - shared_before.get("kept", 0)
    assert hits > 0 and kept > 0, (hits, kept)
    from_index = after.get("tail_index", 0) - before.get("tail_index", 0)
    from_control_plane = after.get("control_plane", 0) - before.get("control_plane", 0)
    # At the tail the agent plans; the control plane saw a few plans at most (the first
    # fetches of a partition before the feed brought its first run).
    assert from_index > 50, (from_index, from_control_plane)
    assert from_control_plane <= from_index // 10, (from_index, from_control_plane)
    # The heartbeat carries the counters to the control plane.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        stats = Agent.objects.get(agent_id=a.agent_id).stats or {}
        if stats.get("tail_plans", 0) >= from_index:
            break
        time.sleep(0.5)
    assert stats.get("tail_plans", 0) >= from_index, stats
    assert stats.get("tail_index_partitions", 0) == 3, stats


def wakes(agent) -> dict[str, int]:
    """The agent's long-poll wakes so far, by what the woken Fetch's re-plan found."""
    found = re.findall(r'floe_fetch_wakes_total\{outcome="(\w+)"\} ([0-9.e+]+)', agent.metrics())
    return {outcome: int(float(value)) for outcome, value in found}


def test_the_committing_agent_wakes_its_tailing_fetches_once_a_commit(agent, cluster):
    """The agent that commits is woken by its own commit and by the feed's run of it; a
    Fetch woken by the commit before the feed's run is applied plans from the index,
    finds nothing new and waits again. With a live feed only the feed wakes: a woken
    Fetch finds records."""
    a = agent(cluster.key)
    create_topic(a.bootstrap, "once", partitions=3)
    consumer = tailing(a.bootstrap, "once", 3)
    got: list[list] = [[]]
    drain([consumer], got, 1.0)
    producer = Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 0})
    before = wakes(a)
    for burst in range(15):
        for i in range(3):
            producer.produce("once", f"w{burst}-{i}".encode(), partition=i)
        producer.flush(10)
        drain_until([consumer], got, 3 * (burst + 1))
    after = wakes(a)
    consumer.close()
    assert len(got[0]) == 45
    with_records = after.get("records", 0) - before.get("records", 0)
    empty = after.get("empty", 0) - before.get("empty", 0)
    assert with_records >= 10, (before, after)
    assert empty <= with_records // 5, (before, after)


def test_delete_records_under_tailing_consumers(agent, cluster):
    """DeleteRecords drops the partition from the index: a consumer that comes after
    starts at the new log start, tailing consumers carry on with every new record."""
    a = agent(cluster.key)
    create_topic(a.bootstrap, "trim", partitions=1)
    consumer = tailing(a.bootstrap, "trim", 1)
    got: list[list] = [[]]
    producer = Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 5})
    for i in range(30):
        producer.produce("trim", f"old-{i}".encode(), partition=0)
    producer.flush(10)
    drain_until([consumer], got, 30)
    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    for future in admin.delete_records(
        [TopicPartition("trim", 0, 20)], request_timeout=10
    ).values():
        future.result(15)
    for i in range(30):
        producer.produce("trim", f"new-{i}".encode(), partition=0)
    producer.flush(10)
    drain_until([consumer], got, 60)
    consumer.close()
    assert [v for _, _, v in got[0]] == [f"old-{i}".encode() for i in range(30)] + [
        f"new-{i}".encode() for i in range(30)
    ]
    late = Consumer(
        {
            "bootstrap.servers": a.bootstrap,
            "group.id": "late",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    late.assign([TopicPartition("trim", 0, 0)])  # below the log start: reset to earliest
    seen: list[list] = [[]]
    drain_until([late], seen, 40)
    late.close()
    assert [o for _, o, _ in seen[0]][:1] == [20]
    assert len(seen[0]) == 40


def test_read_committed_tailing_a_transactional_producer_never_sees_aborts_or_open_ones(
    agent, cluster
):
    """Transactions commit and abort while read_committed and read_uncommitted consumers
    tail: read_committed gets exactly the committed records, never one of an aborted or
    still-open transaction (the LSO holds it back), read_uncommitted gets everything."""
    a = agent(cluster.key)
    create_topic(a.bootstrap, "ledger", partitions=2)
    committed = tailing(a.bootstrap, "ledger", 2, "read_committed")
    everything = tailing(a.bootstrap, "ledger", 2, "read_uncommitted")
    got: list[list] = [[], []]
    drain([committed, everything], got, 1.0)
    producer = txn_producer(a.bootstrap, "ledger-writer")
    plain = Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 5})
    expected_committed, expected_all = [], []
    for round_ in range(6):
        producer.begin_transaction()
        for i in range(6):
            value = f"t{round_}-{i}".encode()
            producer.produce("ledger", value, partition=i % 2)
            expected_all.append(value)
        producer.flush(10)
        # Non-transactional records land after the open transaction's first offset.
        plain.produce("ledger", f"p{round_}".encode(), partition=round_ % 2)
        plain.flush(10)
        expected_all.append(f"p{round_}".encode())
        drain([committed, everything], got, 0.3)
        # While the transaction is open read_committed sees nothing of it, nor past it.
        assert not [v for _, _, v in got[0] if v.startswith(f"t{round_}-".encode())]
        assert not [v for _, _, v in got[0] if v == f"p{round_}".encode()]
        if round_ % 2:
            producer.abort_transaction(10)
        else:
            producer.commit_transaction(10)
            expected_committed += [f"t{round_}-{i}".encode() for i in range(6)]
        expected_committed.append(f"p{round_}".encode())
    producer.begin_transaction()
    producer.produce("ledger", b"open", partition=0)
    producer.flush(10)
    drain_until([committed, everything], got, len(expected_all) + 1)
    drain([committed, everything], got, 1.0)
    values = [v for _, _, v in got[0]]
    assert sorted(values) == sorted(expected_committed)
    assert sorted(v for _, _, v in got[1]) == sorted(expected_all + [b"open"])
    producer.abort_transaction(10)
    assert plans(a).get("tail_index", 0) > 0
    committed.close()
    everything.close()


def test_retention_trimming_the_oldest_runs_under_tailing_consumers(agent, cluster):
    """Retention moves the log start past the oldest runs and drops their index rows
    while consumers tail: they carry on with every new record, and a consumer that
    starts after reads from the new log start, never a dropped run."""
    from metadata_store import retention
    from metadata_store.models import Partition

    a = agent(cluster.key)
    create_topic(a.bootstrap, "aging", partitions=1)
    consumer = tailing(a.bootstrap, "aging", 1)
    got: list[list] = [[]]
    producer = Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 5})
    for i in range(40):
        producer.produce("aging", f"old-{i}".encode(), partition=0)
        if i % 10 == 9:
            producer.flush(10)  # a few runs
    drain_until([consumer], got, 40)
    partition = Partition.objects.get(topic__name="aging", index=0)
    retention.log_start_offsets_advance(moves={partition.pk: 25})
    assert retention.batches_below_log_start_delete(cluster_id=cluster.cluster.pk)[0] > 0
    for i in range(20):
        producer.produce("aging", f"new-{i}".encode(), partition=0)
    producer.flush(10)
    drain_until([consumer], got, 60)
    consumer.close()
    assert [v for _, _, v in got[0]] == [f"old-{i}".encode() for i in range(40)] + [
        f"new-{i}".encode() for i in range(20)
    ]
    late = Consumer(
        {
            "bootstrap.servers": a.bootstrap,
            "group.id": "late",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    late.assign([TopicPartition("aging", 0, 0)])
    seen: list[list] = [[]]
    drain_until([late], seen, 35)
    late.close()
    # The first run kept holds offset 25; nothing before the run that holds it.
    assert seen[0] and seen[0][0][1] >= 20 and seen[0][-1][1] == 59
    assert {o for _, o, _ in seen[0]} >= set(range(25, 60))


def _cut_the_feed(seconds: float) -> int:
    """Kill the relay's database connections (its LISTEN and its naming connection) for
    `seconds`, as often as it reconnects; how many were killed."""
    from django.db import connection

    killed = 0
    deadline = time.monotonic() + seconds
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                " AND (query LIKE 'LISTEN floe_tail%%' OR query LIKE 'SELECT id, topic_id%%')"
            )
            killed += cursor.fetchone()[0]
            time.sleep(0.2)
    connection.close()  # this thread's own: the test database is dropped at the end
    return killed


def feed_resets(agent) -> int:
    """Times the agent dropped its tail index."""
    found = re.search(r"^floe_tail_feed_resets_total ([0-9.e+]+)$", agent.metrics(), re.M)
    return int(float(found.group(1))) if found else 0


def test_a_feed_call_lost_once_is_made_again_and_the_index_kept(agent, cluster, live_server):
    """Every connection to the control plane is reset while the feed's long-poll waits on
    one (as a web server closing its idle connections, or restarting, would): the agent
    polls again at once from where it was, keeps its tail index — no reset, the tailing
    consumers still planned by the agent — and they get every record once."""
    from tests.agents.faults import TcpProxy

    proxy = TcpProxy(live_server.port)
    try:
        a = agent(cluster.key, control_plane_url=proxy.url)
        create_topic(a.bootstrap, "blip", partitions=2)
        consumers = [tailing(a.bootstrap, "blip", 2) for _ in range(2)]
        got: list[list] = [[], []]
        drain(consumers, got, 1.0)
        producer = Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 5})
        sent: list[bytes] = []

        def burst(name: str) -> None:
            for i in range(40):
                value = f"{name}{i}".encode()
                producer.produce("blip", value, partition=i % 2)
                sent.append(value)
            assert producer.flush(20) == 0
            drain_until(consumers, got, len(sent))

        burst("before")
        resets, before = feed_resets(a), plans(a)
        assert before.get("tail_index", 0) > 0, before
        time.sleep(0.5)  # the feed's next long-poll is waiting
        assert proxy.reset_open() >= 1
        for n in range(5):
            burst(f"after{n}-")
        after, resets_after = plans(a), feed_resets(a)
        for consumer in consumers:
            consumer.close()
    finally:
        proxy.close()
    for out in got:
        values = [v for _, _, v in out]
        assert sorted(values) == sorted(sent)  # every record, once
    assert resets_after == resets
    from_index = after.get("tail_index", 0) - before.get("tail_index", 0)
    from_control_plane = after.get("control_plane", 0) - before.get("control_plane", 0)
    assert from_index > 10 and from_control_plane == 0, (from_index, from_control_plane)


def test_a_feed_cut_for_10s_loses_and_repeats_nothing_and_the_agent_catches_up(agent, cluster):
    """The relay's database connection is cut for 10 s, again and again as it
    reconnects, while a producer writes and consumers tail: the agent falls back to the
    control plane (every record once), and once the feed is back it plans from the
    tail index again by itself."""
    import threading

    a = agent(cluster.key)
    create_topic(a.bootstrap, "cut", partitions=2)
    consumers = [tailing(a.bootstrap, "cut", 2) for _ in range(2)]
    got: list[list] = [[], []]
    drain(consumers, got, 1.0)
    sent: list[bytes] = []
    stop = threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 5})
        i = 0
        while not stop.is_set():
            value = f"r{i}".encode()
            producer.produce("cut", value, partition=i % 2)
            sent.append(value)
            i += 1
            producer.poll(0)
            time.sleep(0.01)
        assert producer.flush(20) == 0

    writer = threading.Thread(target=produce)
    writer.start()
    cutter_result: list[int] = []
    cutter = threading.Thread(target=lambda: cutter_result.append(_cut_the_feed(10)))
    try:
        drain(consumers, got, 1.0)
        cutter.start()
        drain(consumers, got, 10.5)
        cutter.join()
        before = plans(a)
        drain(consumers, got, 4.0)  # the feed is back: the agent plans again
        after = plans(a)
    finally:
        stop.set()
        writer.join()
        cutter.join()
    drain_until(consumers, got, len(sent))
    for consumer in consumers:
        consumer.close()
    assert cutter_result and cutter_result[0] >= 1
    for out in got:
        values = [v for _, _, v in out]
        assert len(values) == len(set(values)) == len(sent)  # every record, once
        for p in range(2):
            offsets = [o for part, o, _ in out if part == p]
            assert offsets == list(range(len(offsets)))
    assert after.get("tail_index", 0) - before.get("tail_index", 0) > 20, (before, after)


def test_the_relay_connects_again_when_only_its_naming_connection_is_lost(agent, cluster):
    """The relay names partitions on a second connection; killed while LISTEN's lives,
    every poll that names a new partition failed (503) until the web server restarted,
    and agents planned everything by the control plane. Now the relay connects both
    again and the agent plans the tail from its index once more."""
    from django.db import connection

    a = agent(cluster.key)
    create_topic(a.bootstrap, "named", partitions=1)
    consumer = tailing(a.bootstrap, "named", 1)
    got: list[list] = [[]]
    producer = Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 0})
    naming = (
        "SELECT {} FROM pg_stat_activity WHERE datname = current_database()"
        " AND query LIKE 'SELECT id, topic_id%%'"
    )
    deadline = time.monotonic() + 30
    named = 0
    while not named and time.monotonic() < deadline:
        producer.produce("named", b"first", partition=0)
        producer.flush(10)
        drain([consumer], got, 0.3)
        with connection.cursor() as cursor:  # the relay named the run's partition
            cursor.execute(naming.format("count(*)"))
            named = cursor.fetchone()[0]
    assert got[0] and named
    with connection.cursor() as cursor:
        cursor.execute(naming.format("count(pg_terminate_backend(pid))"))
        assert cursor.fetchone()[0] >= 1
    connection.close()
    create_topic(a.bootstrap, "renamed", partitions=1)  # a partition to name anew
    later = tailing(a.bootstrap, "renamed", 1)
    seen: list[list] = [[]]
    # The index holds the new partition from its creation (issue 44); its first run is
    # what the relay must name, so tail plans count from the first record on.
    deadline = time.monotonic() + 30
    n = 0
    while not seen[0] and time.monotonic() < deadline:
        producer.produce("renamed", f"r{n}".encode(), partition=0)
        producer.flush(10)
        n += 1
        drain([later], seen, 0.3)
    before = plans(a).get("tail_index", 0)
    while plans(a).get("tail_index", 0) - before < 20 and time.monotonic() < deadline:
        producer.produce("renamed", f"r{n}".encode(), partition=0)
        producer.flush(10)
        n += 1
        drain([later], seen, 0.3)
    drain_until([later], seen, n)
    consumer.close()
    later.close()
    assert [v for _, _, v in seen[0]] == [f"r{i}".encode() for i in range(n)]
    assert plans(a).get("tail_index", 0) - before >= 20, n


def control_plane_fetch_plans() -> int:
    """Fetch plans the control plane (this process's live server) answered so far."""
    from prometheus_client import REGISTRY

    value = REGISTRY.get_sample_value(
        "floe_agent_api_calls_total", {"call": "fetch_plan", "outcome": "ok"}
    )
    return int(value or 0)


def test_consumers_waiting_on_a_brand_new_topic_are_planned_by_the_agent(agent, cluster):
    """Issue 44: consumers (each its own group) assigned to a topic created a moment
    earlier, before its first record. The feed announced the partitions' creation, so the
    agent's tail index holds them — empty at offset 0 — and plans their Fetches itself:
    the control plane's fetch plans do not grow with the consumers (before, each
    consumer's Fetches asked it until every partition had had a run), and every consumer
    still gets every record once, in order."""
    a = agent(cluster.key)
    partitions, count = 6, 8
    create_topic(a.bootstrap, "brand-new", partitions=partitions)
    time.sleep(0.5)  # the feed brings the creation (within milliseconds)
    before = control_plane_fetch_plans()
    consumers = []
    try:
        for i in range(count):
            consumer = Consumer(
                {
                    "bootstrap.servers": a.bootstrap,
                    "group.id": f"brand-new-{i}",
                    "enable.auto.commit": False,
                    "fetch.wait.max.ms": 500,
                }
            )
            consumers.append(consumer)
            consumer.assign([TopicPartition("brand-new", p, 0) for p in range(partitions)])
        got: list[list] = [[] for _ in consumers]
        drain(consumers, got, 2.0)  # every consumer waits at the empty tail
        waiting = control_plane_fetch_plans() - before
        producer = Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 5})
        sent = []
        for burst in range(4):  # the first runs come while the consumers wait
            for i in range(3):  # some partitions stay empty for a while
                value = f"v{burst}-{i}".encode()
                producer.produce("brand-new", value, partition=(burst + i) % partitions)
                sent.append(value)
            producer.flush(10)
            drain(consumers, got, 0.3)
        drain_until(consumers, got, len(sent))
        asked = control_plane_fetch_plans() - before
    finally:
        for consumer in consumers:
            consumer.close()
    for out in got:
        assert sorted(v for _, _, v in out) == sorted(sent)  # every record, once
        for p in range(partitions):
            offsets = [o for part, o, _ in out if part == p]
            assert offsets == list(range(len(offsets)))
    # Eight consumers over ~3.5 s: before, tens of plans (each Fetch while a partition
    # had not had its first run); now none, or a couple from a Fetch that raced the feed.
    assert asked <= 2, (waiting, asked)
