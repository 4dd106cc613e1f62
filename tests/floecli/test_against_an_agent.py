"""Every floe subcommand against a live agent (a real process, its bucket a folder),
compared with what a confluent-kafka client sees."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from core.segment import SegmentCorrupt, read_index
from tests import factories
from tests.agents.groups.test_clients import create_topic
from tests.floecli.run import floe

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.kafka, pytest.mark.timeout(60)]


def read_all(bootstrap: str, topic: str, n: int, *, isolation: str = "read_uncommitted") -> list:
    """`n` records of `topic` as librdkafka reads them: (partition, offset, key, value,
    headers)."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{time.monotonic_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    got = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 20
        while len(got) < n and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append((m.partition(), m.offset(), m.key(), m.value(), m.headers() or []))
    finally:
        consumer.close()
    return sorted(got)


def test_console_producer_and_consumer_agree_with_librdkafka(agent, cluster):
    from confluent_kafka import Producer

    a = agent(cluster.key)
    create_topic(a.bootstrap, "lines", 1)
    written = floe(
        "console-producer", "-b", a.bootstrap, "-t", "lines",
        "--key-separator", ":", "--header", "source=cli",
        stdin="k1:hello\nk2:world\nk3:a:b\n",
    )  # fmt: skip
    assert written.returncode == 0, written.stderr
    assert read_all(a.bootstrap, "lines", 3) == [
        (0, 0, b"k1", b"hello", [("source", b"cli")]),
        (0, 1, b"k2", b"world", [("source", b"cli")]),
        (0, 2, b"k3", b"a:b", [("source", b"cli")]),
    ]

    producer = Producer({"bootstrap.servers": a.bootstrap})
    producer.produce("lines", key=b"k4", value=b"from librdkafka")
    assert producer.flush(10) == 0
    read = floe(
        "console-consumer", "-b", a.bootstrap, "-t", "lines", "--from-beginning",
        "--max-messages", "4", "--print-key", "--print-offset", "--timeout-ms", "10000",
    )  # fmt: skip
    assert read.returncode == 0, read.stderr
    assert read.stdout.splitlines() == [
        "0:0\tk1\thello",
        "0:1\tk2\tworld",
        "0:2\tk3\ta:b",
        "0:3\tk4\tfrom librdkafka",
    ]
    # Nothing more arrives: --timeout-ms ends it.
    idle = floe("console-consumer", "-b", a.bootstrap, "-t", "lines", "--timeout-ms", "1500")
    assert (idle.returncode, idle.stdout, idle.stderr) == (0, "", "0 records\n")


def test_consumer_group_lag_matches_what_librdkafka_computes(agent, cluster, live_server):
    from confluent_kafka import Consumer, Producer, TopicPartition

    a = agent(cluster.key)
    create_topic(a.bootstrap, "orders", 2)
    producer = Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 5})
    for i in range(20):
        producer.produce("orders", value=b"%d" % i, partition=i % 2)
    assert producer.flush(10) == 0
    # A group that read 6 records through the command and committed them, 3 a partition.
    read = floe(
        "console-consumer", "-b", a.bootstrap, "-t", "orders", "-g", "auditors",
        "--from-beginning", "--max-messages", "6", "--timeout-ms", "15000",
        "-X", "auto.commit.interval.ms=100",
    )  # fmt: skip
    assert read.returncode == 0, read.stderr
    checker = Consumer({"bootstrap.servers": a.bootstrap, "group.id": "auditors"})
    try:
        committed = checker.committed([TopicPartition("orders", p) for p in (0, 1)], timeout=10)
        expected = [
            {
                "group": "auditors",
                "topic": "orders",
                "partition": tp.partition,
                "committed_offset": tp.offset,
                "high_watermark": 10,
                "lag": 10 - tp.offset,
            }
            for tp in committed
            if tp.offset >= 0
        ]
        for tp in committed:
            assert checker.get_watermark_offsets(tp, timeout=10)[1] == 10
    finally:
        checker.close()
    assert sum(10 - row["lag"] for row in expected) >= 6

    lag = floe("consumer-group-lag", "-b", a.bootstrap, "--json")
    assert lag.returncode == 0, lag.stderr
    assert json.loads(lag.stdout) == expected
    # The same rows from the control plane's REST API, each with its lag in seconds.
    key = factories.make_api_key(cluster.cluster.organization, role="member")
    rest_args = ("--api-url", live_server.url, "--cluster", cluster.public_id, "--json")
    deadline = time.monotonic() + 10
    while True:
        rest = floe("consumer-group-lag", *rest_args, "--api-key", key)
        assert rest.returncode == 0, rest.stderr
        rows = json.loads(rest.stdout)
        if [{k: v for k, v in r.items() if k != "lag_seconds"} for r in rows] == expected:
            break
        assert time.monotonic() < deadline, (rows, expected)
        time.sleep(0.5)
    assert all(r["lag_seconds"] is not None and r["lag_seconds"] >= 0 for r in rows)
    refused = floe("consumer-group-lag", *rest_args, "--api-key", "not-a-key")
    assert refused.returncode == 1 and "HTTP 401" in refused.stderr
    assert len(refused.stderr.splitlines()) == 1

    table = floe("consumer-group-lag", "-b", a.bootstrap, "-g", "auditors").stdout.splitlines()
    assert table[0].split() == ["GROUP", "TOPIC", "PARTITION", "COMMITTED", "HIGH-WATERMARK", "LAG"]
    assert [line.split() for line in table[1:]] == [
        [r["group"], r["topic"], str(r["partition"]), str(r["committed_offset"]), "10",
         str(r["lag"])]
        for r in expected
    ]  # fmt: skip


def test_the_benchmarks_report_what_they_moved(agent, cluster):
    a = agent(cluster.key)
    create_topic(a.bootstrap, "bench", 2)
    produced = floe(
        "benchmark-producer", "-b", a.bootstrap, "-t", "bench", "-n", "3000", "-s", "512",
        "--json",
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    result = json.loads(produced.stdout)
    assert (result["records"], result["bytes"]) == (3000, 3000 * 512)
    assert result["records_per_s"] > 0 and result["mib_per_s"] > 0
    assert 0 < result["latency_ms_p50"] <= result["latency_ms_p99"] <= result["latency_ms_max"]
    from confluent_kafka import Consumer, TopicPartition

    checker = Consumer({"bootstrap.servers": a.bootstrap, "group.id": "hw"})
    try:
        high = sum(
            checker.get_watermark_offsets(TopicPartition("bench", p), timeout=10)[1] for p in (0, 1)
        )
    finally:
        checker.close()
    assert high == 3000

    consumed = floe("benchmark-consumer", "-b", a.bootstrap, "-t", "bench", "-n", "3000")
    assert consumed.returncode == 0, consumed.stderr
    print("benchmark-producer:", produced.stdout, "benchmark-consumer:", consumed.stdout)
    assert consumed.stdout.startswith("3000 records in ")
    assert "records/s" in consumed.stdout and "MiB/s" in consumed.stdout
    assert "p99" in consumed.stdout
    short = floe(
        "benchmark-consumer", "-b", a.bootstrap, "-t", "bench", "-n", "3001", "--timeout-ms", "1500"
    )
    assert short.returncode == 1
    assert short.stderr.splitlines()[-1] == (
        "floe benchmark-consumer: 3000 of 3001 records, then none for 1500 ms"
    )
    # The progress line, once a second while it ran (waiting for the 3001st).
    assert any(line.startswith("3000/3001 records, ") for line in short.stderr.splitlines())


def segment_files(bucket: Path) -> list[Path]:
    found = []
    for path in sorted(bucket.rglob("*")):
        if path.is_file():
            try:
                read_index(path.read_bytes())
            except SegmentCorrupt:
                continue
            found.append(path)
    return found


def test_file_reader_decodes_a_transactional_file_as_librdkafka_reads_it(
    agent, cluster, bucket_url
):
    from confluent_kafka import Producer

    a = agent(cluster.key)
    create_topic(a.bootstrap, "ledger", 1)
    producer = Producer({"bootstrap.servers": a.bootstrap, "transactional.id": "cli-tx"})
    producer.init_transactions(10)
    producer.begin_transaction()
    for i in range(3):
        producer.produce("ledger", key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"%d" % i)])
    producer.commit_transaction(10)
    seen = read_all(a.bootstrap, "ledger", 3, isolation="read_committed")
    assert len(seen) == 3

    bucket = Path(bucket_url.removeprefix("file://"))
    records, flags = [], set()
    for path in segment_files(bucket):
        done = floe("file-reader", path.as_uri(), "--json")
        assert done.returncode == 0, done.stderr
        doc = json.loads(done.stdout)
        assert doc["problems"] == []
        for batch in doc["batches"]:
            assert batch["crc_ok"]
            if batch["transactional"]:
                flags.add("control" if batch["control"] else "data")
            if not batch["control"]:
                records += [(r["key"], r["value"], r["headers"]) for r in batch["records"]]
    # The batches are transactional; the commit marker is a row of the metadata store,
    # not file bytes (the agent writes the control batch when it serves a fetch).
    assert flags == {"data"}
    assert sorted(records) == [
        (key.decode(), value.decode(), {k: v.decode() for k, v in headers})
        for _, _, key, value, headers in seen
    ]
    text = floe("file-reader", segment_files(bucket)[0].as_uri())
    assert text.returncode == 0 and "index and footer CRC ok" in text.stdout

    corrupt = bucket / "corrupt-copy"
    data = bytearray(segment_files(bucket)[0].read_bytes())
    data[70] ^= 0xFF  # inside the first batch: its CRC no longer matches
    corrupt.write_bytes(bytes(data))
    broken = floe("file-reader", corrupt.as_uri())
    assert broken.returncode == 1
    assert "CRC" in broken.stderr and len(broken.stderr.splitlines()) == 1
