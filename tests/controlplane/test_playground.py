"""`make run`: the README's playground, with embedded parts only, end to end."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from datetime import datetime
from pathlib import Path

import pytest

from tests.serving import free_port

ROOT = Path(__file__).resolve().parents[2]
LINES = ("console", "login", "api-key", "cluster", "bootstrap", "schema-registry")


@pytest.fixture(scope="module")
def playground(tmp_path_factory):
    """``python -m controlplane.playground`` as ``make run`` starts it, on free ports,
    with no DATABASE_URL / REDIS_URL: only embedded parts."""
    data_dir = tmp_path_factory.mktemp("playground")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "PYTEST_VERSION")
    }
    env.update(
        FLOE_DATA_DIR=str(data_dir),
        FLOE_HTTP_PORT=str(free_port()),
        FLOE_KAFKA_PORT=str(free_port()),
        FLOE_AGENT_HTTP_PORT=str(free_port()),
        FLOE_SCHEMA_REGISTRY_PORT=str(free_port()),
        FLOE_ORPHAN_CLEANUP_CHECK_S="2",  # a job soon: the agent runs it
        FLOE_RETENTION_CHECK_S="2",  # retention soon after a topic's retention.ms shrinks
        # Billing's "hour" made short: meters every second, files counted at once.
        FLOE_BILLING_METER_S="1",
        FLOE_BILLING_METER_LAG_S="0",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "controlplane.playground"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    found: dict[str, str] = {}
    output: list[str] = []
    started = time.monotonic()
    try:
        while not set(LINES) <= set(found) and time.monotonic() - started < 120:
            line = proc.stdout.readline()
            if not line:
                break
            output.append(line)
            match = re.match(r"^([a-z-]+): (.+)$", line.strip())
            if match and match.group(1) in LINES:
                found[match.group(1)] = match.group(2)
                if match.group(1) in ("console", "bootstrap", "schema-registry"):  # answers now?
                    port = int(match.group(2).rstrip("/").rsplit(":", 1)[1])
                    with socket.socket() as sock:
                        sock.settimeout(1)
                        found[f"{match.group(1)}-answered"] = sock.connect_ex(("127.0.0.1", port))
        assert set(LINES) <= set(found), "".join(output)
        found["seconds"] = time.monotonic() - started
        found["data_dir"] = str(data_dir)
        yield found, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_make_run_prints_a_console_that_answers_within_60_seconds(playground):
    found, _ = playground
    assert found["seconds"] < 60
    assert re.match(r"^http://127\.0\.0\.1:\d+/$", found["console"])
    assert found["cluster"].startswith("vci_") and found["api-key"].startswith("floe_api_")
    assert re.match(r"^\S+@\S+ \S+$", found["login"])
    with urllib.request.urlopen(found["console"], timeout=10) as response:
        assert response.status == 200
    request = urllib.request.Request(
        found["console"] + "api/v1/clusters/",
        headers={"Authorization": f"Bearer {found['api-key']}"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert found["cluster"] in response.read().decode()


def test_each_line_is_printed_only_once_what_it_names_answers(playground):
    found, _ = playground
    assert found["console-answered"] == 0
    assert found["bootstrap-answered"] == 0  # a client started on this line connects
    assert found["schema-registry-answered"] == 0


def test_a_taken_port_fails_at_once_with_one_line_naming_it(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if k != "PYTEST_VERSION"}
        env.update(FLOE_DATA_DIR=str(tmp_path), FLOE_HTTP_PORT=str(port))
        done = subprocess.run(
            [sys.executable, "-m", "controlplane.playground"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=30,
        )  # fmt: skip
    assert done.returncode != 0
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert f"port {port}" in line and "already in use" in line and "FLOE_HTTP_PORT" in line


def test_a_kafka_client_produces_and_consumes_through_the_playground(playground):
    from confluent_kafka import Consumer, Producer, TopicPartition

    found, _ = playground
    bootstrap = found["bootstrap"]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    delivered = []
    for i in range(20):
        producer.produce(
            "playground-demo",
            value=f"m{i}".encode(),
            partition=0,
            on_delivery=lambda err, msg: delivered.append(err or msg.offset()),
        )
    assert producer.flush(30) == 0
    assert sorted(delivered) == list(range(20))
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "playground-test", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition("playground-demo", 0, 0)])
    values = []
    deadline = time.monotonic() + 30
    while len(values) < 20 and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and not message.error():
            values.append(message.value().decode())
    consumer.close()
    assert values == [f"m{i}" for i in range(20)]


def test_the_readmes_avro_producer_and_consumer_use_the_playgrounds_schema_registry(playground):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    found, _ = playground
    assert re.match(r"^http://127\.0\.0\.1:\d+$", found["schema-registry"])
    registry = SchemaRegistryClient({"url": found["schema-registry"]})
    schema = json.dumps(
        {"type": "record", "name": "Click", "fields": [{"name": "page", "type": "string"}]}
    )
    context = SerializationContext("playground-clicks", MessageField.VALUE)
    producer = Producer({"bootstrap.servers": found["bootstrap"]})
    producer.produce(
        "playground-clicks", value=AvroSerializer(registry, schema)({"page": "/home"}, context)
    )
    assert producer.flush(20) == 0
    assert registry.get_latest_version("playground-clicks-value").version == 1

    consumer = Consumer(
        {
            "bootstrap.servers": found["bootstrap"],
            "group.id": "clicks",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["playground-clicks"])
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": found["schema-registry"]}))
    deadline, value = time.monotonic() + 30, None
    while value is None and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is not None and not message.error():
            value = deserialize(message.value(), context)
    consumer.close()
    assert value == {"page": "/home"}


def test_the_playgrounds_agent_runs_the_jobs_beat_plans(playground):
    found, _ = playground
    url = found["console"] + f"api/v1/clusters/{found['cluster']}/job-runs/?kind=orphan_cleanup"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {found['api-key']}"})
    deadline, runs = time.monotonic() + 120, []
    while time.monotonic() < deadline:
        with urllib.request.urlopen(request, timeout=10) as response:
            runs = json.loads(response.read())
        if any(r["state"] in ("succeeded", "failed") for r in runs):
            break
        time.sleep(1)
    finished = [r for r in runs if r["state"] in ("succeeded", "failed")]
    assert finished, runs
    assert finished[0]["state"] == "succeeded", finished[0]["error"]
    assert finished[0]["lease_agent"].startswith("agt-")


def _api(found: dict, path: str) -> dict:
    request = urllib.request.Request(
        found["console"] + "api/v1/" + path,
        headers={"Authorization": f"Bearer {found['api-key']}"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def test_the_usage_api_shows_the_bytes_written_to_the_byte(playground):
    """Celery beat in the playground meters what the previous test produced: the usage
    API's bytes written equal the record batches in the bucket's committed files."""
    from confluent_kafka import Producer

    from core.segment import read_index

    found, _ = playground
    producer = Producer(
        {"bootstrap.servers": found["bootstrap"], "linger.ms": 5, "compression.type": "lz4"}
    )
    for i in range(200):
        producer.produce("playground-metered", value=f"metered {i}".encode() * 10)
    assert producer.flush(30) == 0
    bucket = Path(found["data_dir"]) / "bucket"
    expected = sum(
        entry.length
        for path in bucket.rglob("*.seg")  # not the schema registry's texts
        for entry in read_index(path.read_bytes())
    )
    written, deadline = None, time.monotonic() + 30
    while written != expected and time.monotonic() < deadline:
        time.sleep(0.5)
        written = _api(found, "billing/usage/")["totals"]["bytes_written"]
    assert written == expected > 0


def _level0_batches(found: dict) -> tuple[int, int, int]:
    """(record-batch bytes, their uncompressed size, file bytes) of the segment files the
    agent wrote to the bucket, read from the files themselves."""
    from core.kafka.records import iter_batches, uncompressed_size
    from core.segment import read_index

    written = uncompressed = files = 0
    for path in (Path(found["data_dir"]) / "bucket").rglob("*.seg"):
        if "/segments/" not in path.as_posix():
            continue  # a compacted file holds records already counted
        data = path.read_bytes()
        files += len(data)
        for entry in read_index(data):
            batch = data[entry.position : entry.end]
            _, _, header = next(iter_batches(batch))
            written += entry.length
            uncompressed += uncompressed_size(batch, header)
    return written, uncompressed, files


def _stored_rate(found: dict, seconds: float = 6.0) -> float:
    """Stored bytes as the meter sees them: the growth of stored byte-seconds per second."""
    start = _api(found, "billing/usage/")["totals"]["stored_byte_seconds"]
    began = time.monotonic()
    time.sleep(seconds)
    end = _api(found, "billing/usage/")["totals"]["stored_byte_seconds"]
    return (end - start) / (time.monotonic() - began)


def test_usage_shows_logical_bytes_stored_bytes_after_retention_and_cluster_time(playground):
    """kbench-like traffic, compressed and not, through the playground: the usage API and
    page show the record-batch bytes and their uncompressed size to the byte, the stored
    bytes fall once retention expires a topic, and cluster-minutes cover the agent's life."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
    )

    found, _ = playground
    admin = AdminClient({"bootstrap.servers": found["bootstrap"]})
    futures = admin.create_topics(
        [NewTopic("playground-expiring", 3), NewTopic("playground-kept", 1)], request_timeout=30
    )
    for future in futures.values():
        future.result(30)
    rng = random.Random(14)
    traffic = [
        ("playground-expiring", "none", 4096, lambda: rng.randbytes(1024)),  # incompressible
        ("playground-kept", "lz4", 600, lambda: b"log line %d " % rng.randrange(10**6) * 40),
        ("playground-kept", "zstd", 400, lambda: b'{"user": %d, "ok": true}' % rng.randrange(99)),
    ]
    for topic, codec, count, value in traffic:
        producer = Producer(
            {"bootstrap.servers": found["bootstrap"], "linger.ms": 20, "compression.type": codec}
        )
        for i in range(count):
            producer.produce(topic, key=b"k%d" % i, value=value(), headers={"n": str(i)})
            producer.poll(0)
        assert producer.flush(30) == 0
        del producer  # no client left knocking once the playground stops

    written, uncompressed, file_bytes = _level0_batches(found)
    assert uncompressed > written  # some of it was compressed
    totals, deadline = {}, time.monotonic() + 30
    while time.monotonic() < deadline and (
        totals.get("bytes_written"),
        totals.get("bytes_written_uncompressed"),
    ) != (written, uncompressed):
        time.sleep(0.5)
        totals = _api(found, "billing/usage/")["totals"]
    assert (totals["bytes_written"], totals["bytes_written_uncompressed"]) == (
        written,
        uncompressed,
    )

    # The page says the same, to the byte.
    jar = urllib.request.HTTPCookieProcessor()
    browser = urllib.request.build_opener(jar)
    with browser.open(found["console"] + "login", timeout=10) as response:
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', response.read().decode())
    email, password = found["login"].split()[:2]
    form = urllib.parse.urlencode(
        {"csrfmiddlewaretoken": token.group(1), "username": email, "password": password}
    ).encode()
    login = urllib.request.Request(
        found["console"] + "login", data=form, headers={"Referer": found["console"] + "login"}
    )
    with browser.open(login, timeout=10):
        pass
    with browser.open(found["console"] + "billing", timeout=10) as response:
        page = response.read().decode()
    assert f'id="bytes-written" data-bytes="{written}"' in page

    # Stored bytes: every live file, then without the expired topic's.
    before = _stored_rate(found)
    assert 0.7 * file_bytes < before < 1.3 * file_bytes, (before, file_bytes)
    resource = ConfigResource(
        "topic",
        "playground-expiring",
        incremental_configs=[
            ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    for future in admin.incremental_alter_configs([resource], request_timeout=30).values():
        future.result(30)
    consumer = Consumer({"bootstrap.servers": found["bootstrap"], "group.id": "usage-check"})
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        marks = [
            consumer.get_watermark_offsets(TopicPartition("playground-expiring", p), timeout=10)
            for p in range(3)
        ]
        if all(low == high > 0 for low, high in marks):
            break
        time.sleep(1)
    consumer.close()
    assert all(low == high > 0 for low, high in marks), marks
    after = _stored_rate(found)
    assert after < 0.5 * before, (after, before)  # the expiring topic held most of it

    # Cluster time: each 15-minute interval of the agent's life, from its own record.
    cluster = found["cluster"].split()[0]
    agents = _api(found, f"clusters/{cluster}/agents/")
    assert len(agents) == 1, agents
    started = datetime.fromisoformat(agents[0]["started_at"]).timestamp()
    minutes, deadline = None, time.monotonic() + 30
    while time.monotonic() < deadline:
        expected = 15 * (int(time.time() // 900) - int(started // 900) + 1)
        minutes = _api(found, "billing/usage/")["totals"]["cluster_minutes"]
        if minutes == expected:
            break
        time.sleep(0.5)
    assert minutes == expected


def test_sigint_stops_everything_it_started(playground):
    found, proc = playground
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 0
    for name in ("console", "bootstrap"):
        port = int(found[name].rstrip("/").rsplit(":", 1)[1])
        with socket.socket() as sock:
            sock.settimeout(1)
            assert sock.connect_ex(("127.0.0.1", port)) != 0, f"{name} is still listening"
