"""Topics as Iceberg tables, end to end: records produced by librdkafka to a real agent
(raw, and Avro through the agent's Schema Registry),
the topic switched on through the REST API, the table_append job run (by the agent's
jobs role, and by the in-process driver where the test acts between steps), and the table read back through the cluster's
catalog by PyIceberg and by DuckDB: every record once, equal to what a consumer reads;
a later append adds only the new records; a retried one, or one that loses the commit
race to another attempt of the same run, nothing."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyiceberg.catalog.rest import RestCatalog
from rest_framework.test import APIClient

from jobs import table_append
from metadata_store.models import Partition
from tests.factories import make_api_key, make_cluster
from tests.jobs import driver
from tests.virtualclusters.tables.readers import duckdb_rows
from virtualclusters.jobs import services as jobs_services
from virtualclusters.jobs.models import JobRun

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

TOPIC, PARTITIONS = "orders", 3


def produce(bootstrap: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    failures: list = []
    for n in range(start, start + count):
        producer.produce(
            TOPIC,
            key=None if n % 7 == 0 else f"k{n}".encode(),
            value=f"order {n}".encode() * (1 + n % 3),
            partition=n % PARTITIONS,
            headers=[("source", f"s{n % 2}".encode())] if n % 5 == 0 else None,
            on_delivery=lambda err, msg: err and failures.append(err),
        )
    assert producer.flush(20) == 0
    assert not failures, failures[:3]


def produce_transactions(bootstrap: str, outcomes=((6, True), (4, False))) -> None:
    """Transactions in partition 0: by default a committed one of 6 records and an
    aborted one of 4."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tables-txn"})
    producer.init_transactions(20)
    for count, commit in outcomes:
        producer.begin_transaction()
        for n in range(count):
            state = "committed" if commit else "aborted"
            producer.produce(TOPIC, key=b"txn", value=f"{state} {n}".encode(), partition=0)
        assert producer.flush(20) == 0  # in the log before the outcome, aborted or not
        if commit:
            producer.commit_transaction(20)
        else:
            producer.abort_transaction(20)


def consumed(bootstrap: str) -> list[tuple]:
    """(partition, offset, timestamp ms, key, value, headers) of every record."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "tables", "enable.auto.commit": False}
    )
    ends = {
        p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
        for p in range(PARTITIONS)
    }
    assigned = [TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)]
    consumer.assign(assigned)
    out: list[tuple] = []
    deadline = time.monotonic() + 30
    # Positions, not offsets seen: a partition may end in markers or aborted records.
    while time.monotonic() < deadline:
        positions = {tp.partition: tp.offset for tp in consumer.position(assigned)}
        if all(positions[p] >= end for p, end in ends.items()):
            break
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            raise KafkaException(msg.error())
        headers = [(k, v) for k, v in (msg.headers() or [])]
        out.append(
            (msg.partition(), msg.offset(), msg.timestamp()[1], msg.key(), msg.value(), headers)
        )
    done = {p for p, end in ends.items() if positions[p] >= end}
    consumer.close()
    assert len(done) == PARTITIONS
    return sorted(out)


def table_rows(rest: RestCatalog) -> list[tuple]:
    rows = rest.load_table(("topics", TOPIC)).scan().to_arrow().to_pylist()
    return sorted(
        (
            r["partition"],
            r["offset"],
            int(r["timestamp"].timestamp() * 1000),
            r["key"],
            r["value"],
            [(h["key"], h["value"]) for h in r["headers"]],
        )
        for r in rows
    )


def append(cluster) -> JobRun:
    run = jobs_services.job_dispatch(cluster=cluster, kind=JobRun.Kind.TABLE_APPEND)
    assert run is not None, "the table should be due"
    run = driver.job_run_execute(run_id=run.id)
    assert run.state == "succeeded", run.error
    assert not run.details["errors"], run.details
    return run


def append_by_agent(cluster, timeout_s: float = 180) -> JobRun:
    """Queue a run and wait for the cluster's jobs agent to lease and finish it."""
    run = jobs_services.job_dispatch(cluster=cluster, kind=JobRun.Kind.TABLE_APPEND)
    assert run is not None, "the table should be due"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.state in (JobRun.State.SUCCEEDED, JobRun.State.FAILED):
            break
        time.sleep(0.25)
    assert run.state == "succeeded", (run.state, run.error, run.progress)
    assert not run.details["errors"], run.details
    return run


def test_a_topic_table_holds_every_record_once_for_pyiceberg_and_duckdb(
    agent, live_server, spark, jobs_settings, monkeypatch
):
    cluster, key = make_cluster("tables", auto_create_topics=False)
    api_key = make_api_key(cluster.organization)
    monkeypatch.setattr(driver, "CONTROL_PLANE_URL", live_server.url)
    monkeypatch.setattr(driver, "AGENT_KEY", key)
    a = agent(key, extra=["--roles", "produce,consume"])  # this process runs the jobs
    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    for future in admin.create_topics(
        [NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)], operation_timeout=10
    ).values():
        future.result(15)
    produce(a.bootstrap, 0, 150)
    produce_transactions(a.bootstrap)

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key}")
    path = f"/api/v1/clusters/{cluster.public_id}/topics/{TOPIC}/table/"
    switched = client.put(path, {"schema": "raw", "freshness_seconds": 1}, format="json")
    assert switched.status_code == 200, switched.content
    state = switched.json()
    assert (state["state"], state["namespace"], state["table"], state["rows"]) == (
        "active",
        "topics",
        TOPIC,
        0,
    )
    ends = dict(
        Partition.objects.filter(topic__cluster=cluster).values_list("index", "high_watermark")
    )
    assert state["lag_records"] == sum(ends.values()) == 150 + 6 + 4 + 2  # + 2 markers
    catalog_url = f"{live_server.url}/iceberg/{cluster.public_id}"
    assert state["catalog_url"].endswith(f"/iceberg/{cluster.public_id}")

    run = append(cluster)
    assert run.details["appended"] == 156  # the aborted transaction's records are not

    rest = RestCatalog("floe", uri=catalog_url, token=api_key)
    expected = consumed(a.bootstrap)  # librdkafka reads read_committed
    assert len(expected) == 156
    assert table_rows(rest) == expected
    assert duckdb_rows(
        catalog_url,
        api_key,
        "topics",
        TOPIC,
        'SELECT count(*), count(DISTINCT (partition, "offset")), sum(octet_length(value))'
        " FROM {table}",
    ) == [(156, 156, sum(len(r[4]) for r in expected))]
    state = client.get(path).json()
    assert state["rows"] == 156 and state["lag_records"] == 0
    assert state["last_offsets"] == {str(p): end - 1 for p, end in ends.items()}

    # More records; the next run is planned, then its step runs while another attempt
    # of the same run (a re-leased job) commits the same range first: the first loses
    # the race (409), deletes its files, reloads and finds nothing left to append; a
    # third attempt appends nothing either.
    produce(a.bootstrap, 150, 60)
    time.sleep(1.1)  # the table's freshness interval
    run = jobs_services.job_dispatch(cluster=cluster, kind=JobRun.Kind.TABLE_APPEND)
    assert run is not None
    run = jobs_services.job_run_start(run_id=run.id)
    step = jobs_services.job_run_advance(run=run).step
    assert step is not None and step.job == "table_append"
    cluster.refresh_from_db()  # the agent gave it its bucket
    plan = driver._with_agent_parts(step.plan, cluster.bucket_url)
    real_write, racing = table_append._write_on_executors, [1]

    def write_then_lose_the_race(*args, **kwargs):
        written = real_write(*args, **kwargs)
        if racing:
            racing.pop()
            other = driver.spark_step("table_append", plan)
            assert other["tables"][0]["appended"] == 60, other
        return written

    monkeypatch.setattr(table_append, "_write_on_executors", write_then_lose_the_race)
    first = driver.spark_step("table_append", plan)
    again = driver.spark_step("table_append", plan)
    assert (first["tables"][0]["appended"], first["tables"][0]["conflicts"]) == (0, 1), first
    assert (again["tables"][0]["appended"], again["tables"][0]["conflicts"]) == (0, 0), again
    assert again["tables"][0]["rows"] == 216
    jobs_services.job_run_advance(run=run, result=first)
    table = rest.load_table(("topics", TOPIC))
    on_disk = list(Path(unquote(urlsplit(table.location()).path)).rglob("*.parquet"))
    assert len(on_disk) == len(list(table.scan().plan_files()))  # the loser's are gone

    expected = consumed(a.bootstrap)
    assert len(expected) == 216
    assert table_rows(rest) == expected
    assert duckdb_rows(
        catalog_url,
        api_key,
        "topics",
        TOPIC,
        'SELECT count(*), count(DISTINCT (partition, "offset")) FROM {table}',
    ) == [(216, 216)]
    assert len(rest.load_table(("topics", TOPIC)).metadata.snapshots) == 2
    state = client.get(path).json()
    assert (state["rows"], state["lag_records"]) == (216, 0)
    # The job wrote the committed metadata file where the catalog points.
    assert Path(unquote(urlsplit(state["metadata_location"]).path)).is_file()

    # Only an aborted transaction came: nothing to add, but the next append starts past it.
    produce_transactions(a.bootstrap, [(5, False)])
    time.sleep(1.1)
    assert append(cluster).details["appended"] == 0
    state = client.get(path).json()
    assert (state["rows"], state["lag_records"]) == (216, 0)
    assert table_rows(rest) == consumed(a.bootstrap)
    assert jobs_services.job_dispatch(cluster=cluster, kind=JobRun.Kind.TABLE_APPEND) is None

    # Stopped: nothing is due however many records come.
    assert client.delete(path).status_code == 204
    produce(a.bootstrap, 216, 3)
    time.sleep(1.1)
    assert jobs_services.job_dispatch(cluster=cluster, kind=JobRun.Kind.TABLE_APPEND) is None
    assert client.get(path).json()["state"] == "stopped"


PAYMENT_V1 = {
    "type": "record",
    "name": "Payment",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "payer", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "settled", "type": ["null", "boolean"], "default": None},
    ],
}
PAYMENT_V2 = {  # a compatible new version: one more optional field
    **PAYMENT_V1,
    "fields": [
        *PAYMENT_V1["fields"],
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}


def produce_avro(a, schema: dict, start: int, count: int) -> list[dict]:
    serialize = AvroSerializer(SchemaRegistryClient({"url": a.registry_url}), json.dumps(schema))
    producer = Producer({"bootstrap.servers": a.bootstrap, "linger.ms": 5})
    values = []
    for n in range(start, start + count):
        value = {
            "id": n,
            "payer": f"payer-{n}",
            "amount": n * 1.5,
            "settled": None if n % 4 else n % 8 == 0,
        }
        if "note" in json.dumps(schema):
            value["note"] = f"note {n}"
        values.append(value)
        producer.produce(
            "payments",
            key=f"k{n}".encode(),
            value=serialize(value, SerializationContext("payments", MessageField.VALUE)),
            partition=n % PARTITIONS,
        )
    assert producer.flush(20) == 0
    return values


def test_an_avro_topic_becomes_columns_and_a_new_subject_version_adds_one(
    agent, live_server, jobs_settings
):
    cluster, key = make_cluster("avro-tables", auto_create_topics=False)
    api_key = make_api_key(cluster.organization)
    a = agent(key)  # every role: its jobs role runs the appends, on its own Spark
    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    created = admin.create_topics(
        [NewTopic("payments", num_partitions=PARTITIONS, replication_factor=1)]
    )
    created["payments"].result(15)
    sent = produce_avro(a, PAYMENT_V1, 0, 90)
    garbage = Producer({"bootstrap.servers": a.bootstrap})
    for n in range(4):  # values no schema decodes: the dead-letter table takes them
        garbage.produce("payments", key=b"bad", value=f"not avro {n}".encode(), partition=n % 3)
    assert garbage.flush(20) == 0

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key}")
    path = f"/api/v1/clusters/{cluster.public_id}/topics/payments/table/"
    body = {"schema": {"subject": "payments-value", "version": "latest"}, "freshness_seconds": 1}
    switched = client.put(path, body, format="json")
    assert switched.status_code == 200, switched.content
    assert switched.json()["schema"] == {"subject": "payments-value", "version": "latest"}
    run = append_by_agent(cluster)
    assert (run.details["appended"], run.details["dead_lettered"]) == (90, 4)
    catalog_url = f"{live_server.url}/iceberg/{cluster.public_id}"
    rest = RestCatalog("floe", uri=catalog_url, token=api_key)

    def rows() -> list[dict]:
        found = rest.load_table(("topics", "payments")).scan().to_arrow().to_pylist()
        return sorted(found, key=lambda r: r["id"])

    got = rows()
    assert [{k: r[k] for k in ("id", "payer", "amount", "settled")} for r in got] == sent
    assert sorted((r["kafka"]["partition"], r["kafka"]["offset"]) for r in got) == sorted(
        (p, o) for p in range(PARTITIONS) for o in range(30)
    )
    assert all(r["kafka"]["key"] == f"k{r['id']}".encode() for r in got)
    assert all(r["kafka"]["partition"] == r["id"] % PARTITIONS for r in got)

    dead = rest.load_table(("topics", "payments_dead_letters")).scan().to_arrow().to_pylist()
    assert sorted(r["value"] for r in dead) == [f"not avro {n}".encode() for n in range(4)]
    assert all(r["key"] == b"bad" and "magic byte" in r["error"] for r in dead), dead
    assert sorted((r["partition"], r["offset"]) for r in dead) == [
        (0, 30),
        (0, 31),
        (1, 30),
        (2, 30),
    ]
    assert client.get(path).json()["dead_letters"] == {"table": "payments_dead_letters", "rows": 4}

    sent += produce_avro(a, PAYMENT_V2, 90, 30)
    time.sleep(1.1)
    run = append_by_agent(cluster)
    assert run.details["appended"] == 30
    got = rows()
    assert len(got) == 120
    assert [r["note"] for r in got] == [None] * 90 + [f"note {n}" for n in range(90, 120)]
    assert [r["payer"] for r in got] == [v["payer"] for v in sent]
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{a.http_port}/metrics", timeout=10)
    text = metrics.read().decode()
    assert "floe_table_appended_records_total 120.0" in text
    assert "floe_table_dead_letters_total 4.0" in text
    assert duckdb_rows(
        catalog_url,
        api_key,
        "topics",
        "payments",
        "SELECT count(*), count(DISTINCT (kafka.partition, kafka.offset)), sum(id),"
        " count(note) FROM {table}",
    ) == [(120, 120, sum(range(120)), 30)]
