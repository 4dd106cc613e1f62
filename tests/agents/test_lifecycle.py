"""Starting, refusing to start, health, metrics and clean shutdown of the agent process."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from tests.agents.conftest import REPO, ClusterUnderTest
from tests.factories import make_cluster

pytestmark = [pytest.mark.kafka]


def sample(metrics: str, series: str) -> float:
    """The value of one series in a `/metrics` text."""
    (line,) = [line for line in metrics.splitlines() if line.startswith(series + " ")]
    return float(line.rsplit(" ", 1)[1])


def run_agent_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "agents", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--bogus"], "unrecognized arguments: --bogus"),
        ([], "--control-plane-url (or FLOE_CONTROL_PLANE_URL) is required"),
        (["--batch-timeout", "1"], "must be at least 5"),
        (["--kafka-port", "70000"], "not a TCP port"),
        (["--bucket-url", "ftp://x"], "--bucket-url must be file://, mem:// or s3://"),
        (["--agent-id", "a/b"], "--agent-id must be"),
    ],
)
def test_bad_flags_exit_2_with_one_line(flags, message):
    base = ["--control-plane-url", "http://127.0.0.1:1", "--agent-key", "k"]
    base += ["--bucket-url", "file:///tmp/floe-never-used"]
    if not flags:
        base = []
    result = run_agent_cli(*base, *flags, env={"PATH": "/usr/bin"})
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and message in result.stderr
    assert result.stdout == ""


@pytest.mark.django_db(transaction=True)
def test_a_rejected_key_exits_1_with_one_line(agent, cluster):
    rejected = agent("floe_agent_not-a-real-key", wait=False)
    assert rejected.proc.wait(20) == 1
    last_line = rejected.logs().strip().splitlines()[-1]
    assert last_line == (
        "floe-agent: the control plane rejected the agent key (missing, unknown or revoked)"
    )


@pytest.mark.django_db(transaction=True)
def test_health_and_metrics(agent, cluster):
    a = agent(cluster.key)
    with urllib.request.urlopen(a.http_url + "/healthz", timeout=5) as resp:
        assert (resp.status, resp.read()) == (200, b"ok\n")
    producer = Producer({"bootstrap.servers": a.bootstrap})
    producer.produce("metered", b"x" * 100)
    assert producer.flush(15) == 0

    # A Fetch that long-polls 600 ms for records that never come.
    consumer = Consumer(
        {"bootstrap.servers": a.bootstrap, "group.id": "unused", "fetch.wait.max.ms": 600}
    )
    consumer.assign([TopicPartition("metered", 0, 1)])  # past the one record
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and 'floe_request_seconds_count{api="FETCH"}' not in (
        a.metrics()
    ):
        consumer.poll(0.3)
    consumer.poll(1.5)  # a few more long polls
    consumer.close()

    metrics = a.metrics()
    assert 'floe_requests_total{api="PRODUCE",error="NONE"} 1' in metrics  # names, not numbers
    assert "floe_segment_put_seconds_bucket" in metrics
    assert 'floe_segment_commit_seconds_count{outcome="ok"}' in metrics
    assert "floe_open_connections" in metrics
    assert "floe_produce_bytes_total" in metrics
    assert 'floe_build_info{python_version="' in metrics and 'version="0.1.0"' in metrics
    assert "process_cpu_seconds_total" in metrics and "process_resident_memory_bytes" in metrics
    assert "\nfloe_fetch_read_errors_total 0.0\n" in metrics  # label-less: 0 from the start
    assert "_created" not in metrics
    fetches = sample(metrics, 'floe_request_seconds_count{api="FETCH"}')
    waited = sample(metrics, 'floe_request_seconds_sum{api="FETCH"}')
    assert fetches >= 2 and waited / fetches < 0.3  # the 600 ms waits are not handling time


@pytest.mark.django_db(transaction=True)
def test_sigterm_flushes_the_open_segment_and_answers_parked_produces(agent):
    created, key = make_cluster("slow-flush", max_flush_age_ms=60_000)
    cluster = ClusterUnderTest(created, key)
    first = agent(cluster.key, batch_timeout_ms=30_000)  # nothing flushes by age here
    reports = []
    producer = Producer({"bootstrap.servers": first.bootstrap, "acks": "all", "linger.ms": 0})
    producer.produce(
        "parked", b"survives shutdown", on_delivery=lambda e, m: reports.append((e, m.offset()))
    )
    deadline = time.monotonic() + 10
    while "floe_produce_batches_total 1" not in first.metrics() and time.monotonic() < deadline:
        producer.poll(0.1)  # until the batch is parked in the open segment
    producer.poll(0.2)
    assert reports == []

    assert first.stop() == 0
    producer.flush(10)
    assert reports == [(None, 0)]
    assert "shutting down" in first.logs()

    second = agent(cluster.key)
    consumer = Consumer(
        {"bootstrap.servers": second.bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition("parked", 0, OFFSET_BEGINNING)])
    msg = None
    deadline = time.monotonic() + 15
    while msg is None and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
    consumer.close()
    assert msg is not None and msg.value() == b"survives shutdown"
