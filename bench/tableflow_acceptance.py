"""Issue 29's acceptance at scale, against the playground: topics as Iceberg tables.

Starts ``python -m controlplane.playground`` (its own data folder and free ports, a fresh
bench database as ``bench/common.py`` makes one), creates a raw and an Avro topic of
``--partitions`` (3) partitions over REST, produces ``--records`` (100,000) to each with
confluent-kafka (the Avro values through confluent_kafka.schema_registry's
AvroSerializer against the agent's Schema Registry port the playground prints), switches
both on as tables over REST (``freshness_seconds`` ``--freshness``, default 60), and
waits until each table holds every record (the playground's beat plans the appends, its
agent runs them on Spark). Then reads both with PyIceberg (RestCatalog with the printed
API key) and DuckDB (its Iceberg extension loaded from the installed package's files):
counts, every (partition, offset) once, and every row equal to what a consumer reads
(Kafka columns and, for Avro, the decoded fields). Prints one JSON object: the times
(produce, until the table held everything) and the checks. Not part of the test suite.

    .venv/bin/python bench/tableflow_acceptance.py [--records 100000] [--freshness 60]
"""

from __future__ import annotations

import argparse
import json
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from common import ROOT, bench_env, free_port

LINES = ("console", "api-key", "cluster", "bootstrap", "schema-registry")
SCHEMA = {
    "type": "record",
    "name": "Payment",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "payer", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--freshness", type=int, default=60, help="the tables' freshness_seconds")
    parser.add_argument("--wait", type=float, default=900, help="give up after this long")
    parser.add_argument("--keep", action="store_true", help="keep the data folder")
    return parser.parse_args()


def start_playground(env: dict) -> tuple[subprocess.Popen, dict[str, str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "controlplane.playground"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()
    found: dict[str, str] = {}
    output: list[str] = []
    deadline = time.monotonic() + 180
    while not set(LINES) <= set(found):
        try:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            break
        output.append(line)
        match = re.match(r"^([a-z-]+): (.+)$", line.strip())
        if match:
            found[match.group(1)] = match.group(2)
    if not set(LINES) <= set(found):
        proc.terminate()
        raise SystemExit("the playground did not start:\n" + "".join(output))
    return proc, found


def rest(found: dict, method: str, path: str, body: dict | None = None) -> dict:
    request = urllib.request.Request(
        found["console"].rstrip("/") + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {found['api-key']}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read() or b"{}")


def produce(found: dict, topic: str, records: int, partitions: int, avro: bool) -> float:
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serialize = AvroSerializer(
        SchemaRegistryClient({"url": found["schema-registry"]}), json.dumps(SCHEMA)
    )
    context = SerializationContext(topic, MessageField.VALUE)
    producer = Producer(
        {"bootstrap.servers": found["bootstrap"], "linger.ms": 20, "batch.size": 262144}
    )
    began = time.perf_counter()
    for n in range(records):
        if avro:
            value = serialize(
                {
                    "id": n,
                    "payer": f"payer-{n}",
                    "amount": n * 1.5,
                    "note": None if n % 3 else f"note {n}",
                },
                context,
            )
        else:
            value = f"value {n} ".encode() * 8
        headers = [("n", str(n).encode())] if n % 2 else None
        while True:
            try:
                producer.produce(
                    topic, key=f"k{n}".encode(), value=value, partition=n % partitions,
                    headers=headers,
                )  # fmt: skip
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    if producer.flush(120) != 0:
        raise SystemExit(f"{topic}: records left unsent")
    return time.perf_counter() - began


def consumed(found: dict, topic: str, partitions: int, avro: bool) -> dict:
    """(partition, offset) → (timestamp ms, key, value, headers), as a consumer reads."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    decode = AvroDeserializer(SchemaRegistryClient({"url": found["schema-registry"]}))
    context = SerializationContext(topic, MessageField.VALUE)
    consumer = Consumer(
        {"bootstrap.servers": found["bootstrap"], "group.id": "acceptance",
         "enable.auto.commit": False}
    )  # fmt: skip
    ends = {
        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
        for p in range(partitions)
    }
    assigned = [TopicPartition(topic, p, 0) for p in range(partitions)]
    consumer.assign(assigned)
    out: dict = {}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        positions = {tp.partition: tp.offset for tp in consumer.position(assigned)}
        if all(positions[p] >= end for p, end in ends.items()):
            break
        for msg in consumer.consume(1000, 0.5):
            if msg.error():
                raise KafkaException(msg.error())
            value = decode(msg.value(), context) if avro else msg.value()
            headers = [(k, v) for k, v in (msg.headers() or [])]
            out[(msg.partition(), msg.offset())] = (
                msg.timestamp()[1], msg.key(), value, headers
            )  # fmt: skip
    consumer.close()
    return out


def table_rows(found: dict, catalog_url: str, table: str, avro: bool) -> tuple[dict, int]:
    """(partition, offset) → the same tuple as `consumed`, read with PyIceberg; rows read."""
    from pyiceberg.catalog.rest import RestCatalog

    loaded = RestCatalog("floe", uri=catalog_url, token=found["api-key"]).load_table(
        ("topics", table)
    )
    rows = loaded.scan().to_arrow().to_pylist()
    out = {}
    for r in rows:
        kafka = r["kafka"] if avro else r
        value = {f["name"]: r[f["name"]] for f in SCHEMA["fields"]} if avro else r["value"]
        out[(kafka["partition"], kafka["offset"])] = (
            int(kafka["timestamp"].timestamp() * 1000),
            kafka["key"],
            value,
            [(h["key"], h["value"]) for h in kafka["headers"]],
        )
    return out, len(rows)


def main() -> None:
    args = parse_args()
    work = Path(tempfile.mkdtemp(prefix="floe-tableflow-acceptance-"))
    env = bench_env(work / "data", database=None)
    env.update(
        DEBUG="1",
        FLOE_HTTP_PORT=str(free_port()),
        FLOE_KAFKA_PORT=str(free_port()),
        FLOE_AGENT_HTTP_PORT=str(free_port()),
        FLOE_SCHEMA_REGISTRY_PORT=str(free_port()),
    )
    began = time.perf_counter()
    proc, found = start_playground(env)
    result: dict = {"playground_start_s": round(time.perf_counter() - began, 1)}
    try:
        result.update(run(args, found))
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    print(json.dumps(result))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    if not result.get("ok"):
        raise SystemExit(1)


def run(args: argparse.Namespace, found: dict) -> dict:
    sys.path.insert(0, str(ROOT))
    from tests.virtualclusters.tables.readers import duckdb_rows

    cluster = f"/api/v1/clusters/{found['cluster']}"
    topics = {"raw": "acceptance-raw", "avro": "acceptance-avro"}
    result: dict = {"records": args.records, "partitions": args.partitions}
    for kind, topic in topics.items():
        rest(
            found, "POST", f"{cluster}/topics/", {"name": topic, "num_partitions": args.partitions}
        )
        seconds = produce(found, topic, args.records, args.partitions, kind == "avro")
        result[f"{kind}_produce_s"] = round(seconds, 1)
    switched_at = {}
    for kind, topic in topics.items():
        schema = "raw" if kind == "raw" else {"subject": f"{topic}-value", "version": "latest"}
        rest(found, "PUT", f"{cluster}/topics/{topic}/table/",
             {"schema": schema, "freshness_seconds": args.freshness})  # fmt: skip
        switched_at[kind] = time.perf_counter()
    waiting = set(topics)
    states: dict = {}
    deadline = time.perf_counter() + args.wait
    while waiting and time.perf_counter() < deadline:
        for kind in sorted(waiting):
            states[kind] = rest(found, "GET", f"{cluster}/topics/{topics[kind]}/table/")
            if states[kind]["rows"] >= args.records and states[kind]["lag_records"] == 0:
                result[f"{kind}_table_complete_s"] = round(
                    time.perf_counter() - switched_at[kind], 1
                )
                waiting.discard(kind)
        time.sleep(1)
    if waiting:
        result["timed_out"] = {k: states.get(k) for k in waiting}
        return result
    runs = rest(found, "GET", f"{cluster}/job-runs/")
    runs = runs.get("results", runs) if isinstance(runs, dict) else runs
    appends = [r for r in runs if r.get("kind") == "table_append"]
    result["table_append_runs"] = [
        {k: r.get(k) for k in ("state", "started_at", "finished_at", "duration_s", "details")
         if k in r}
        for r in appends[:5]
    ]  # fmt: skip
    # The bound: the freshness target plus one job run (the longest seen).
    bound = args.freshness + max((r.get("duration_s") or 0) for r in appends)
    result["freshness_plus_one_run_s"] = round(bound, 1)
    result["within_it"] = all(result[f"{k}_table_complete_s"] <= bound for k in topics)
    ok = True
    for kind, topic in topics.items():
        avro = kind == "avro"
        catalog_url = states[kind]["catalog_url"]
        expected = consumed(found, topic, args.partitions, avro)
        got, rows_read = table_rows(found, catalog_url, topic, avro)
        mismatched = [k for k, v in expected.items() if got.get(k) != v]
        partition, offset = (
            ("kafka.partition", "kafka.offset") if avro else ("partition", '"offset"')
        )
        duck = duckdb_rows(
            catalog_url, found["api-key"], "topics", topic,
            f"SELECT count(*), count(DISTINCT ({partition}, {offset})) FROM {{table}}",
        )[0]  # fmt: skip
        check = {
            "consumed": len(expected),
            "pyiceberg_rows": rows_read,
            "pyiceberg_distinct_partition_offsets": len(got),
            "rows_unequal_to_the_consumers": len(mismatched),
            "duckdb_rows": duck[0],
            "duckdb_distinct_partition_offsets": duck[1],
            "table_rows_reported": states[kind]["rows"],
        }
        check["ok"] = (
            len(expected) == args.records
            and rows_read == len(got) == args.records
            and not mismatched
            and set(got) == set(expected)
            and duck == (args.records, args.records)
        )
        if mismatched:
            check["first_mismatch"] = repr((expected[mismatched[0]], got.get(mismatched[0])))[:600]
        ok = ok and check["ok"]
        result[f"{kind}_check"] = check
    result["freshness_seconds"] = args.freshness
    result["ok"] = ok
    return result


if __name__ == "__main__":
    main()
