"""Bring your own cloud, end to end: each cluster's jobs run on its own jobs-role agent
against its own bucket (one file://, one s3:// on moto's server), on a standalone Spark
cluster, while the control plane — this test process, which serves the agent API —
holds no bucket credentials; and a jobs agent killed mid-run (Spark local[1]) loses its
lease to another that finishes the run — a compaction, and a topic table's append, which
still holds every record once."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from pyiceberg.catalog.rest import RestCatalog

from core.storage import open_store
from metadata_store.models import SegmentFile, Topic
from tests.agents.conftest import REPO, AgentProcess, agent_command
from tests.factories import make_api_key, make_cluster, make_org
from tests.fixtures_s3 import REGION, create_bucket, moto_s3_server
from tests.jobs import driver
from tests.metadata_store.conftest import AgentApi
from tests.serving import free_port
from virtualclusters.jobs import services as jobs_services
from virtualclusters.jobs.models import JobRun
from virtualclusters.tables.topic_tables import table_append_begin, topic_table_enable

pytestmark = [pytest.mark.kafka, pytest.mark.django_db(transaction=True)]

TOPIC, PARTITIONS, ROUNDS = "events", 2, 12


@pytest.fixture
def byoc_settings(settings):
    """The control plane's settings: no bucket of its own to fall back on."""
    settings.FLOE_COMPACTION_MIN_FILES = 8
    settings.FLOE_COMPACTION_TARGET_BYTES = 1024 * 1024
    settings.FLOE_FILE_DELETE_GRACE_S = 0
    settings.FLOE_JOB_FAILURE_BACKOFF_S = 0
    return settings


@pytest.fixture
def start_agent(live_server, tmp_path):
    """Factory: an agent process with exactly the environment given (credentials go to
    the agents, never to this process)."""
    started: list[AgentProcess] = []

    def start(key, bucket_url, *, roles="produce,consume,jobs", env=None, extra=()):
        n = len(started)
        out, err = tmp_path / f"agent{n}.out", tmp_path / f"agent{n}.err"
        base = {k: v for k, v in os.environ.items() if not k.startswith(("FLOE_", "AWS_"))}
        with out.open("wb") as o, err.open("wb") as e:
            proc = subprocess.Popen(
                agent_command(
                    control_plane_url=live_server.url,
                    key=key,
                    bucket_url=bucket_url,
                    extra=["--roles", roles, "--spark-master", "local[1]", *extra],
                ),
                cwd=REPO,
                env={**base, "PYTHONUNBUFFERED": "1", **(env or {})},
                stdout=o,
                stderr=e,
            )
        agent = AgentProcess(proc, out, err)
        started.append(agent)
        agent.wait_ready(40)
        return agent

    yield start
    for n, agent in enumerate(started):
        agent.stop()
        print(f"--- agent {n} stderr ---\n{agent.logs()[-8000:]}")


def produce(bootstrap: str, tag: str) -> None:
    """ROUNDS flushes of small records with keys, headers and timestamps: a file each."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])[
        TOPIC
    ].result(15)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    start_ms = int(time.time() * 1000) - 60_000  # within retention.ms: retention keeps them
    for r in range(ROUNDS):
        for i in range(6):
            producer.produce(
                TOPIC,
                key=f"{tag}-k{r}-{i}".encode(),
                value=f"{tag} value {r}/{i}".encode() * 8,
                partition=i % PARTITIONS,
                headers=[("round", str(r).encode()), ("tag", tag.encode())],
                timestamp=start_ms + r * 1000 + i,
            )
        assert producer.flush(20) == 0


def read_all(bootstrap: str) -> list[tuple]:
    """(partition, offset, key, value, headers, timestamp) of every record."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "byoc", "enable.auto.commit": False}
    )
    ends = {
        p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
        for p in range(PARTITIONS)
    }
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    out, done = [], {p for p, end in ends.items() if end == 0}
    deadline = time.monotonic() + 30
    while len(done) < PARTITIONS and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            raise KafkaException(msg.error())
        out.append(
            (msg.partition(), msg.offset(), msg.key(), msg.value(), msg.headers(), msg.timestamp())
        )
        if msg.offset() + 1 >= ends[msg.partition()]:
            done.add(msg.partition())
    consumer.close()
    assert len(done) == PARTITIONS, "did not reach the end"
    return sorted(out)


def wait_finished(run: JobRun, timeout_s: float = 200) -> JobRun:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.state in ("succeeded", "failed"):
            return run
        time.sleep(0.3)
    raise AssertionError(f"{run.kind} run still {run.state} after {timeout_s}s")


def bucket_keys(url: str) -> set[str]:
    return {o.key for o in open_store(url).list("")}


@pytest.fixture(scope="module")
def spark_standalone(tmp_path_factory):
    """A Spark standalone master and one worker (two JVMs) from the pyspark package, on
    loopback (/work/shared/NOTES.md); stopped at the end of the module."""
    import pyspark

    home = Path(pyspark.__file__).parent
    port, ui, worker_ui = free_port(), free_port(), free_port()
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1"}
    logs = tmp_path_factory.mktemp("spark")
    env["SPARK_WORKER_DIR"] = str(logs / "work")
    spark_class = str(home / "bin" / "spark-class")
    master = subprocess.Popen(
        [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
         "--port", str(port), "--webui-port", str(ui)],
        env=env, stdout=(logs / "master.log").open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    worker = subprocess.Popen(
        [spark_class, "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
         "--host", "127.0.0.1", "--cores", "2", "--memory", "2g", "--webui-port", str(worker_ui)],
        env=env, stdout=(logs / "worker.log").open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as r:
                    if json.loads(r.read()).get("aliveworkers", 0) >= 1:
                        break
            except OSError:
                pass
            time.sleep(0.5)
        else:
            raise AssertionError("the Spark worker did not register with its master in 60 s")
        yield f"spark://127.0.0.1:{port}"
    finally:
        for proc in (worker, master):
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_each_clusters_jobs_run_in_its_own_environment_against_its_own_bucket(
    byoc_settings, start_agent, tmp_path, spark_standalone
):
    """Both jobs agents run Spark on a standalone master with one worker, whose
    executors open each cluster's bucket themselves (one core per application, so both
    run at once)."""
    spark_env = {
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_SUBMIT_ARGS": "--conf spark.cores.max=1 pyspark-shell",
    }
    on_spark = ["--spark-master", spark_standalone]
    with moto_s3_server() as endpoint:
        aws = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
        s3_url = f"s3://{create_bucket(endpoint)}?endpoint={endpoint}&region={REGION}"
        for name in aws:  # from here on only the agents hold them
            del os.environ[name]
        try:
            file_url = (tmp_path / "bucket-a").as_uri()
            (tmp_path / "bucket-a").mkdir()
            _, org_a = make_org("byoc-a")
            _, org_b = make_org("byoc-b")
            cluster_a, key_a = make_cluster("a", org=org_a, auto_create_topics=False)
            cluster_b, key_b = make_cluster("b", org=org_b, auto_create_topics=False)
            agent_a = start_agent(key_a, file_url, env=spark_env, extra=on_spark)
            agent_b = start_agent(key_b, s3_url, env={**aws, **spark_env}, extra=on_spark)
            produce(agent_a.bootstrap, "a")
            produce(agent_b.bootstrap, "b")
            before = {"a": read_all(agent_a.bootstrap), "b": read_all(agent_b.bootstrap)}
            assert len(before["a"]) == len(before["b"]) == ROUNDS * 6

            clusters = {"a": cluster_a, "b": cluster_b}
            runs = {
                name: jobs_services.job_dispatch(cluster=c, kind=JobRun.Kind.COMPACTION)
                for name, c in clusters.items()
            }
            for name, run in runs.items():
                run = wait_finished(run)
                assert run.state == "succeeded", run.error
                assert run.details["swapped"] is True and run.input_files >= 8, run.details
                assert run.lease_agent == (agent_a if name == "a" else agent_b).agent_id
                # The agent's lease heartbeats carried its progress.
                assert run.progress["stage"] == "compacting", run.progress
                assert 0 < run.progress["bytes_total"] <= run.input_bytes
            for cluster in clusters.values():
                run = jobs_services.job_dispatch(cluster=cluster, kind=JobRun.Kind.RETENTION)
                run = wait_finished(run)
                assert run.state == "succeeded", run.error
                assert run.details["files_deleted"] >= 8, run.details

            assert not any(k.startswith("AWS_") for k in os.environ)
            assert read_all(agent_a.bootstrap) == before["a"]
            assert read_all(agent_b.bootstrap) == before["b"]
            # Each bucket holds exactly its cluster's live files, nothing of the other's.
            for cluster, url, env in ((cluster_a, file_url, {}), (cluster_b, s3_url, aws)):
                os.environ.update(env)  # this test reads the bucket, as an operator would
                keys = bucket_keys(url)
                for name in env:
                    del os.environ[name]
                live = set(
                    SegmentFile.objects.filter(cluster=cluster, state="live").values_list(
                        "key", flat=True
                    )
                )
                assert live and live <= keys
                assert all(k.startswith(cluster.public_id + "/") for k in keys)
                deleted = SegmentFile.objects.filter(cluster=cluster, state="deleted")
                assert not set(deleted.values_list("key", flat=True)) & keys
        finally:
            os.environ.update(aws)


def test_a_killed_jobs_agent_loses_its_lease_and_another_finishes_the_run(
    byoc_settings, start_agent, tmp_path
):
    bucket = (tmp_path / "bucket").as_uri()
    (tmp_path / "bucket").mkdir()
    cluster, key = make_cluster("killed", auto_create_topics=False)
    serving = start_agent(key, bucket, roles="produce,consume")
    doomed = start_agent(key, bucket, roles="jobs", extra=["--job-lease-s", "10"])
    produce(serving.bootstrap, "k")
    before = read_all(serving.bootstrap)

    run = jobs_services.job_dispatch(cluster=cluster, kind=JobRun.Kind.COMPACTION)
    deadline = time.monotonic() + 30
    while run.state != "running" and time.monotonic() < deadline:
        time.sleep(0.1)
        run.refresh_from_db()
    assert run.state == "running" and run.lease_agent == doomed.agent_id
    dead_lease = run.lease_token
    doomed.kill()  # mid-job: Spark is starting or compacting

    rescuer = start_agent(key, bucket, roles="jobs", extra=["--job-lease-s", "10"])
    run = wait_finished(run)
    assert run.state == "succeeded", run.error
    assert run.lease_agent == rescuer.agent_id and run.attempts == 2
    assert run.details["swapped"] is True

    late = AgentApi(key).raw(
        "jobs/report",
        {
            "run_id": run.public_id,
            "lease": dead_lease,
            "result": {"files": [], "batches": []},
        },
    )
    assert late.status_code == 409
    run.refresh_from_db()
    assert run.state == "succeeded" and run.details["swapped"] is True
    assert read_all(serving.bootstrap) == before  # nothing lost, nothing doubled


def test_a_jobs_agent_killed_mid_append_leaves_every_record_once_in_the_table(
    byoc_settings, start_agent, tmp_path, live_server, spark, monkeypatch
):
    """The jobs agent is SIGKILLed while its append runs; meanwhile the append it was
    making reaches the catalog (as if its commit got through before it died: this
    process commits the same plan). The lease expires, a rescuer re-leases the run and
    appends only what came after; the table holds every record once. (A commit race
    lost to another attempt is tested in test_table_append.py.)"""
    bucket = (tmp_path / "bucket").as_uri()
    (tmp_path / "bucket").mkdir()
    cluster, key = make_cluster("killed-append", auto_create_topics=False)
    monkeypatch.setattr(driver, "CONTROL_PLANE_URL", live_server.url)
    monkeypatch.setattr(driver, "AGENT_KEY", key)
    serving = start_agent(key, bucket, roles="produce,consume")
    doomed = start_agent(key, bucket, roles="jobs", extra=["--job-lease-s", "10"])
    produce(serving.bootstrap, "t")
    cluster.refresh_from_db()
    topic = Topic.objects.get(cluster=cluster, name=TOPIC)
    topic_table_enable(topic=topic, schema="raw", freshness_seconds=1)

    run = jobs_services.job_dispatch(cluster=cluster, kind=JobRun.Kind.TABLE_APPEND)
    deadline = time.monotonic() + 30
    while run.state != "running" and time.monotonic() < deadline:
        time.sleep(0.1)
        run.refresh_from_db()
    assert run.state == "running" and run.lease_agent == doomed.agent_id
    doomed.kill()  # mid-append: Spark is starting or writing
    run.cluster = cluster
    step = table_append_begin(run)
    assert not isinstance(step, dict)
    committed = driver.spark_step("table_append", driver._with_agent_parts(step.plan, bucket))
    assert committed["tables"][0]["appended"] == ROUNDS * 6, committed

    # More records while the run waits for its lease to expire.
    producer = Producer({"bootstrap.servers": serving.bootstrap})
    for n in range(10):
        producer.produce(TOPIC, key=b"late", value=f"late {n}".encode(), partition=n % PARTITIONS)
    assert producer.flush(20) == 0
    rescuer = start_agent(key, bucket, roles="jobs", extra=["--job-lease-s", "10"])
    run = wait_finished(run)
    assert run.state == "succeeded", run.error
    assert run.lease_agent == rescuer.agent_id and run.attempts == 2
    assert run.details["appended"] == 10, run.details

    rest = RestCatalog(
        "floe",
        uri=f"{live_server.url}/iceberg/{cluster.public_id}",
        token=make_api_key(cluster.organization),
    )
    rows = rest.load_table(("topics", TOPIC)).scan().to_arrow().to_pylist()
    got = sorted((r["partition"], r["offset"], r["key"], r["value"]) for r in rows)
    assert got == [(p, o, k, v) for p, o, k, v, _, _ in read_all(serving.bootstrap)]
