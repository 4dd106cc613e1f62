"""Transactions and exactly-once (KIP-98) with real clients against real agents."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from tests.agents.test_confluent_kafka import create_topic

pytestmark = [pytest.mark.kafka, pytest.mark.django_db(transaction=True)]


def read(bootstrap: str, topic: str, isolation: str, *, partitions: int = 1, settle_s=1.5):
    """Values of the topic from offset 0 under `isolation`, polled until quiet."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "reader",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "fetch.wait.max.ms": 50,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    values, quiet_since = [], time.monotonic()
    while time.monotonic() - quiet_since < settle_s:
        msg = consumer.poll(0.1)
        if msg is None:
            continue
        if msg.error():
            raise KafkaException(msg.error())
        values.append(msg.value().decode())
        quiet_since = time.monotonic()
    consumer.close()
    return values


def txn_producer(bootstrap: str, transactional_id: str, **config) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "linger.ms": 5,
            **config,
        }
    )
    producer.init_transactions(20)
    return producer


def test_read_committed_sees_commits_whole_and_never_aborts_or_open_transactions(agent, cluster):
    a = agent(cluster.key)
    create_topic(a.bootstrap, "ledger", partitions=2)
    producer = txn_producer(a.bootstrap, "ledger-writer")

    producer.begin_transaction()
    for i in range(10):
        producer.produce("ledger", f"committed-{i}".encode(), partition=i % 2)
    producer.commit_transaction(20)

    producer.begin_transaction()
    for i in range(5):
        producer.produce("ledger", f"aborted-{i}".encode(), partition=i % 2)
    producer.flush(20)
    producer.abort_transaction(20)

    producer.begin_transaction()
    producer.produce("ledger", b"open", partition=0)
    producer.flush(20)
    # The open transaction holds the LSO: read_committed stops before it.
    committed = read(a.bootstrap, "ledger", "read_committed", partitions=2)
    assert sorted(committed) == sorted(f"committed-{i}" for i in range(10))
    everything = read(a.bootstrap, "ledger", "read_uncommitted", partitions=2)
    assert sorted(everything) == sorted(
        [f"committed-{i}" for i in range(10)] + [f"aborted-{i}" for i in range(5)] + ["open"]
    )
    producer.commit_transaction(20)
    assert "open" in read(a.bootstrap, "ledger", "read_committed", partitions=2, settle_s=1)


def test_consume_transform_produce_commits_outputs_and_offsets_atomically(agent, cluster):
    a = agent(cluster.key)
    create_topic(a.bootstrap, "in", partitions=1)
    create_topic(a.bootstrap, "out", partitions=1)
    source = Producer({"bootstrap.servers": a.bootstrap})
    for i in range(20):
        source.produce("in", str(i).encode())
    assert source.flush(20) == 0

    def consumer() -> Consumer:
        c = Consumer(
            {
                "bootstrap.servers": a.bootstrap,
                "group.id": "doubler",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            }
        )
        c.subscribe(["in"])
        return c

    def step(c: Consumer, producer: Producer, count: int, commit: bool) -> None:
        got = []
        deadline = time.monotonic() + 20
        while len(got) < count and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and not msg.error():
                got.append(msg)
        assert len(got) == count
        producer.begin_transaction()
        for msg in got:
            producer.produce("out", str(int(msg.value()) * 2).encode())
        producer.send_offsets_to_transaction(
            c.position(c.assignment()), c.consumer_group_metadata(), 20
        )
        if commit:
            producer.commit_transaction(20)
        else:
            producer.abort_transaction(20)

    producer = txn_producer(a.bootstrap, "doubler-1")
    c = consumer()
    step(c, producer, 10, commit=True)
    step(c, producer, 10, commit=False)  # the group's offsets stay at 10
    c.close()

    c = consumer()  # a restart resumes from the committed offset
    step(c, producer, 10, commit=True)
    c.close()
    out = read(a.bootstrap, "out", "read_committed")
    assert out == [str(i * 2) for i in range(20)]
    check = Consumer({"bootstrap.servers": a.bootstrap, "group.id": "doubler"})
    assert check.committed([TopicPartition("in", 0)], 10)[0].offset == 20
    check.close()


def test_a_restarted_producer_fences_its_zombie(agent, cluster):
    a = agent(cluster.key)
    create_topic(a.bootstrap, "fenced", partitions=1)
    zombie = txn_producer(a.bootstrap, "singleton")
    zombie.begin_transaction()
    zombie.produce("fenced", b"zombie")
    zombie.flush(20)

    fresh = txn_producer(a.bootstrap, "singleton")  # aborts the zombie's transaction
    fresh.begin_transaction()
    fresh.produce("fenced", b"fresh")
    fresh.commit_transaction(20)

    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(10)
    error = raised.value.args[0]
    # librdkafka turns the broker's PRODUCER_FENCED / INVALID_PRODUCER_EPOCH into its
    # fatal local _FENCED; any of the three says the zombie was fenced, nothing else does.
    fenced = (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)
    assert error.fatal() and error.code() in fenced, error
    assert read(a.bootstrap, "fenced", "read_committed") == ["fresh"]


def test_aiokafka_zombie_is_fenced_and_an_open_transaction_stays_invisible(agent, cluster):
    import asyncio

    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import InvalidProducerEpoch, ProducerFenced

    a = agent(cluster.key)
    create_topic(a.bootstrap, "aio-fenced", partitions=1)

    async def go() -> type[Exception]:
        zombie = AIOKafkaProducer(bootstrap_servers=a.bootstrap, transactional_id="aio-one")
        fresh = AIOKafkaProducer(bootstrap_servers=a.bootstrap, transactional_id="aio-one")
        await zombie.start()
        try:
            await zombie.begin_transaction()
            await zombie.send_and_wait("aio-fenced", b"zombie", partition=0)
            # Open: read_committed sees nothing of it (the LSO holds at its first offset).
            assert read(a.bootstrap, "aio-fenced", "read_committed") == []
            await fresh.start()  # InitProducerId: the epoch moves on, the zombie's txn aborts
            async with fresh.transaction():
                await fresh.send_and_wait("aio-fenced", b"fresh", partition=0)
            try:
                await zombie.commit_transaction()
            except (ProducerFenced, InvalidProducerEpoch) as exc:
                return type(exc)
            raise AssertionError("the zombie committed")
        finally:
            await fresh.stop()
            await zombie.stop()

    assert asyncio.run(go()) in (ProducerFenced, InvalidProducerEpoch)
    assert read(a.bootstrap, "aio-fenced", "read_committed") == ["fresh"]
    assert read(a.bootstrap, "aio-fenced", "read_uncommitted") == ["zombie", "fresh"]


def _committed_reads_after_commit_and_abort(bootstrap: str, topic: str, writer: str) -> None:
    """What every client's transactional run below must leave: the committed value only
    for read_committed, both for read_uncommitted."""
    assert read(bootstrap, topic, "read_committed", settle_s=1) == [f"{writer}-commit"]
    assert read(bootstrap, topic, "read_uncommitted") == [
        f"{writer}-commit",
        f"{writer}-abort",
    ]


def test_aiokafka_commits_aborts_and_reads_committed(agent, cluster):
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    a = agent(cluster.key)
    create_topic(a.bootstrap, "aio", partitions=1)

    async def go() -> list[str]:
        producer = AIOKafkaProducer(bootstrap_servers=a.bootstrap, transactional_id="aio-tx")
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait("aio", b"aio-commit", partition=0)
            await producer.begin_transaction()
            await producer.send_and_wait("aio", b"aio-abort", partition=0)
            await producer.abort_transaction()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            "aio",
            bootstrap_servers=a.bootstrap,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            batches = await consumer.getmany(timeout_ms=3000)
            return [m.value.decode() for msgs in batches.values() for m in msgs]
        finally:
            await consumer.stop()

    assert asyncio.run(go()) == ["aio-commit"]
    _committed_reads_after_commit_and_abort(a.bootstrap, "aio", "aio")


def test_kafka_python_sends_offsets_to_its_transactions(agent, cluster):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KafkaTopicPartition
    from kafka.structs import OffsetAndMetadata

    a = agent(cluster.key)
    create_topic(a.bootstrap, "kp", partitions=1)
    create_topic(a.bootstrap, "kp-in", partitions=1)
    producer = KafkaProducer(bootstrap_servers=a.bootstrap, transactional_id="kp-tx")
    try:
        producer.init_transactions()
        for value, offset, commit in ((b"kp-commit", 3, True), (b"kp-abort", 7, False)):
            producer.begin_transaction()
            producer.send("kp", value, partition=0)
            producer.send_offsets_to_transaction(
                {KafkaTopicPartition("kp-in", 0): OffsetAndMetadata(offset, "", -1)}, "kp-group"
            )
            producer.flush()  # an abort drops what is not yet sent
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
    finally:
        producer.close(5)
    consumer = KafkaConsumer(
        "kp",
        bootstrap_servers=a.bootstrap,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        consumer_timeout_ms=3000,
    )
    try:
        assert [m.value for m in consumer] == [b"kp-commit"]
    finally:
        consumer.close()
    _committed_reads_after_commit_and_abort(a.bootstrap, "kp", "kp")
    check = Consumer({"bootstrap.servers": a.bootstrap, "group.id": "kp-group"})
    try:
        assert check.committed([TopicPartition("kp-in", 0)], 10)[0].offset == 3
    finally:
        check.close()


def test_kafkajs_commits_aborts_and_reads_committed(agent, cluster):
    import os

    from tests.agents.clients import kafkajs

    a = agent(cluster.key)
    create_topic(a.bootstrap, "js", partitions=1)
    script = """
const { Kafka, logLevel } = require('kafkajs');
(async () => {
  const kafka = new Kafka({ clientId: 'js', brokers: [process.env.BOOTSTRAP], logLevel: logLevel.NOTHING });
  const producer = kafka.producer({ transactionalId: 'js-tx', idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const ok = await producer.transaction();
  await ok.send({ topic: 'js', messages: [{ value: 'js-commit', partition: 0 }] });
  await ok.sendOffsets({ consumerGroupId: 'js-group',
    topics: [{ topic: 'js', partitions: [{ partition: 0, offset: '1' }] }] });
  await ok.commit();
  const no = await producer.transaction();
  await no.send({ topic: 'js', messages: [{ value: 'js-abort', partition: 0 }] });
  await no.abort();
  await producer.disconnect();
  const consumer = kafka.consumer({ groupId: 'js-reader', readUncommitted: false });
  const got = [];
  await consumer.connect();
  await consumer.subscribe({ topic: 'js', fromBeginning: true });
  await consumer.run({ eachMessage: async ({ message }) => { got.push(message.value.toString()); } });
  await new Promise(resolve => setTimeout(resolve, 4000));
  await consumer.disconnect();
  const admin = kafka.admin(); await admin.connect();
  const offsets = await admin.fetchOffsets({ groupId: 'js-group', topics: ['js'] });
  await admin.disconnect();
  console.log(JSON.stringify({ got, offset: offsets[0].partitions[0].offset }));
})().catch(e => { console.error(e); process.exit(1); });
"""
    result = kafkajs(script, {**os.environ, "BOOTSTRAP": a.bootstrap}, timeout=90)
    assert result == {"got": ["js-commit"], "offset": "1"}
    _committed_reads_after_commit_and_abort(a.bootstrap, "js", "js")


def test_transactions_through_two_agents_survive_killing_one(agent, cluster):
    """A transactional producer writes through two agents; one is SIGKILLed. Committed
    transactions are seen whole by read_committed consumers, aborted ones not at all."""
    import threading

    first, second = agent(cluster.key), agent(cluster.key)
    create_topic(second.bootstrap, "survive-tx", partitions=4)
    producer = txn_producer(
        f"{first.bootstrap},{second.bootstrap}",
        "survivor",
        **{
            "topic.metadata.refresh.interval.ms": 1000,
            "reconnect.backoff.max.ms": 500,
            "transaction.timeout.ms": 30000,
        },
    )
    outcome: dict[int, str] = {}
    killer = threading.Timer(1.0, first.kill)
    killer.start()
    deadline = time.monotonic() + 5
    txn = 0
    while time.monotonic() < deadline:
        txn += 1
        try:
            producer.begin_transaction()
            for i in range(20):
                producer.produce("survive-tx", f"{txn}:{i}".encode(), partition=i % 4)
            if txn % 5 == 0:
                producer.abort_transaction(30)
                outcome[txn] = "aborted"
                continue
            while True:
                try:
                    producer.commit_transaction(30)
                    outcome[txn] = "committed"
                    break
                except KafkaException as exc:
                    if not exc.args[0].retriable():
                        raise
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            assert not error.fatal(), error
            assert error.txn_requires_abort(), error
            producer.abort_transaction(30)
            outcome[txn] = "aborted"
    killer.join()
    assert first.proc.poll() is not None, "the first agent was killed"
    committed = {t for t, o in outcome.items() if o == "committed"}
    print("outcomes:", sorted(outcome.items()))
    assert len(committed) > 5, outcome
    seen: dict[int, set[int]] = {}
    for value in read(second.bootstrap, "survive-tx", "read_committed", partitions=4):
        t, i = map(int, value.split(":"))
        seen.setdefault(t, set()).add(i)
    assert committed <= set(seen), "a committed transaction is missing"
    assert all(len(indexes) == 20 for indexes in seen.values()), "a transaction was cut"
    assert not {t for t, o in outcome.items() if o == "aborted"} & set(seen)


def test_a_transaction_left_open_past_its_timeout_is_aborted(agent, cluster):
    from metadata_store.tasks import transactions_expire

    a = agent(cluster.key)
    create_topic(a.bootstrap, "slow", partitions=1)
    producer = txn_producer(a.bootstrap, "slowpoke", **{"transaction.timeout.ms": 1000})
    producer.begin_transaction()
    producer.produce("slow", b"too-late")
    producer.flush(20)
    time.sleep(1.2)
    assert transactions_expire() == 1  # what Celery beat runs
    with pytest.raises(KafkaException):
        producer.commit_transaction(10)
    assert read(a.bootstrap, "slow", "read_committed", settle_s=1) == []
    assert read(a.bootstrap, "slow", "read_uncommitted") == ["too-late"]


def test_admin_tools_describe_and_list_transactions_and_brokers_verify_partitions(agent, cluster):
    from core.kafka import ApiKey, ErrorCode
    from tests.agents.test_wire import Wire

    a = agent(cluster.key)
    create_topic(a.bootstrap, "watched", partitions=2)
    producer = txn_producer(a.bootstrap, "admin-tx")
    producer.begin_transaction()
    producer.produce("watched", b"x", partition=1)
    producer.flush(20)
    wire = Wire(a.bootstrap)
    try:
        described = wire.call(
            ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["admin-tx", "nope"]}
        )["transaction_states"]
        assert [(d["transactional_id"], d["error_code"]) for d in described] == [
            ("admin-tx", 0),
            ("nope", ErrorCode.TRANSACTIONAL_ID_NOT_FOUND),
        ]
        ongoing = described[0]
        assert ongoing["transaction_state"] == "Ongoing"
        assert ongoing["topics"] == [{"topic": "watched", "partitions": [1]}]
        listed = wire.call(
            ApiKey.LIST_TRANSACTIONS,
            1,
            {
                "state_filters": ["Ongoing", "Bogus"],
                "producer_id_filters": [],
                "duration_filter": -1,
            },
        )
        assert [t["transactional_id"] for t in listed["transaction_states"]] == ["admin-tx"]
        assert listed["unknown_state_filters"] == ["Bogus"]
        verified = wire.call(  # KIP-890: the brokers' form, verify only
            ApiKey.ADD_PARTITIONS_TO_TXN,
            4,
            {
                "transactions": [
                    {
                        "transactional_id": "admin-tx",
                        "producer_id": ongoing["producer_id"],
                        "producer_epoch": ongoing["producer_epoch"],
                        "verify_only": True,
                        "topics": [{"name": "watched", "partitions": [0, 1]}],
                    }
                ]
            },
        )
        results = verified["results_by_transaction"][0]["topic_results"][0]
        assert [r["partition_error_code"] for r in results["results_by_partition"]] == [
            ErrorCode.INVALID_TXN_STATE,
            0,
        ]
    finally:
        wire.close()
    producer.commit_transaction(20)
