"""A mirror holds exactly what its source holds until cutover (issue 38, point 1).

Records whose timestamps are far older than Floe's default retention (2023), on topics
whose source set no retention: while mirrored, Floe's retention check — twenty checks over
the window, which run retention on the cluster's own expired topic — leaves them alone,
so the mirror's (log start, end) offsets and records stay the source's; the log start
follows the source's only (DeleteRecords on a Floe source). The source's effective retention is copied (a
Floe source's cluster default, as its DescribeConfigs reports it; Kafka's 7 days where
the source reports none, as Tansu) and applies from the cutover on.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from django.db import connection

from metadata_store.models import Topic
from tests import factories
from tests.agents.clients import fetch_watermarks
from tests.agents.conftest import REPO
from tests.agents.tansu import Tansu
from tests.agents.test_migration import _migrate, _read_all
from virtualclusters.jobs.models import JobRun
from virtualclusters.jobs.tasks import cluster_job_check
from virtualclusters.models import VirtualCluster

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(720)]

OLD_TS = 1_672_531_200_000  # 2023-01-01T00:00:00Z: older than any retention used here
PARTITIONS, RECORDS = 3, 3000
# The issue asks for 5 minutes of retention checks every 15 s (`FLOE_RETENTION_CHECK_S=15`,
# see the first test): twenty checks. The records are years past any retention, so what
# the window proves is the number of checks and that a retention run finished inside it,
# not its length: the suite runs the twenty checks in 30 s; FLOE_MIRROR_WINDOW_S=300 runs
# the issue's own window (checks every 15 s).
WINDOW_S = float(os.environ.get("FLOE_MIRROR_WINDOW_S", "30"))
CHECKS = 20
RETENTION_CHECK_S = WINDOW_S / CHECKS
KAFKA_RETENTION_MS = "604800000"  # Kafka's retention.ms default: 7 days
TEN_YEARS_MS = 10 * 365 * 24 * 3600 * 1000


def test_floe_retention_check_s_sets_how_often_beat_checks_for_retention():
    code = (
        "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE',"
        " 'controlplane.settings'); from django.conf import settings;"
        " print(settings.CELERY_BEAT_SCHEDULE['floe-retention-check']['schedule'])"
    )
    env = {**os.environ, "FLOE_RETENTION_CHECK_S": "15", "SECRET_KEY": "x" * 40}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().split() == ["15.0"]


class RetentionChecks(threading.Thread):
    """Beat's retention check every `period` seconds: for every cluster, the task a
    worker runs for it (a retention run is queued when there is work; the clusters'
    jobs-role agents lease and run it)."""

    def __init__(self, period: float) -> None:
        super().__init__(daemon=True)
        self.period = period
        self.checks = 0
        self.error: BaseException | None = None
        self._stopping = threading.Event()

    def run(self) -> None:
        try:
            next_at = time.monotonic()
            while True:
                for cluster_id in VirtualCluster.objects.values_list("id", flat=True):
                    cluster_job_check(cluster_id, JobRun.Kind.RETENTION)
                self.checks += 1
                next_at += self.period  # at a fixed rate, as beat's schedule
                if self._stopping.wait(max(0.0, next_at - time.monotonic())):
                    return
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
        finally:
            connection.close()

    def stop(self) -> None:
        self._stopping.set()
        self.join(30)
        assert self.error is None, self.error


def _produce_old(bootstrap: str, topic: str, count: int) -> None:
    """`count` records with keys, headers and 2023 timestamps over the partitions."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    errors: list = []
    for i in range(count):
        producer.produce(
            topic,
            key=b"key-%d" % (i % 97),
            value=b"value %d" % i,
            headers=[("n", b"%d" % i)],
            timestamp=OLD_TS + i,
            partition=i % PARTITIONS,
            on_delivery=lambda err, _msg: err and errors.append(err),
        )
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors[:3]


def _create(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)


def _delete_records(bootstrap: str, topic: str, offsets: dict[int, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    asked = [TopicPartition(topic, p, offset) for p, offset in offsets.items()]
    for future in admin.delete_records(asked).values():
        future.result(15)


def _marks(bootstrap: str, topic: str) -> dict:
    try:
        return fetch_watermarks(bootstrap, topic, PARTITIONS)
    except Exception as exc:  # noqa: BLE001 - not mirrored yet
        return {"error": repr(exc)}


@pytest.fixture
def tansu(tmp_path):
    source = Tansu(tmp_path / "tansu.log").start()
    yield source
    source.stop()


def test_a_mirror_keeps_what_its_sources_hold_until_cutover(agent, cluster, tansu, settings):
    """Both sources, Tansu and a second Floe cluster, in the same window (with the
    issue's 5 minutes, FLOE_MIRROR_WINDOW_S=300, the suite's longest case)."""
    # Retention runs stay metadata only: deleting the files of Floe's own expired topic
    # once past their grace is a Spark step of a minute, during which no other retention
    # run starts (not this test's subject).
    settings.FLOE_FILE_DELETE_GRACE_S = 3600
    source_cluster, source_key = factories.make_cluster(
        "source", org=cluster.cluster.organization, default_retention_ms=TEN_YEARS_MS
    )
    floe_source = agent(source_key)  # every role: its own retention runs too
    sources = {"tansu-history": tansu.bootstrap, "floe-history": floe_source.bootstrap}
    for topic, bootstrap in sources.items():
        _create(bootstrap, topic)  # no retention.ms set on the topic
        _produce_old(bootstrap, topic, RECORDS)
    floe = agent(cluster.key)  # the copier and the mirror's jobs
    # A topic of Floe's own with old records: the retention check's work, to see it runs.
    _create(floe.bootstrap, "floe-own", 1)
    own = Producer({"bootstrap.servers": floe.bootstrap})
    for i in range(50):
        own.produce("floe-own", value=b"old %d" % i, timestamp=OLD_TS + i)
    assert own.flush(30) == 0

    migrations = {
        topic: _migrate(cluster, {"source_bootstrap": bootstrap, "topics": topic})
        for topic, bootstrap in sources.items()
    }
    # (Floe's Metadata auto-creates topics on this cluster: ask it only once they exist.)
    deadline = time.monotonic() + 30
    for api, url, migration in migrations.values():
        while [t["state"] for t in api.get(f"{url}{migration}/").json()["topics"]] != ["mirroring"]:
            assert time.monotonic() < deadline, api.get(f"{url}{migration}/").json()
            time.sleep(0.2)
    want = {topic: {p: (0, RECORDS // PARTITIONS) for p in range(PARTITIONS)} for topic in sources}
    deadline = time.monotonic() + 90
    while (have := {t: _marks(floe.bootstrap, t) for t in sources}) != want:
        assert time.monotonic() < deadline, have
        time.sleep(0.5)

    checks = RetentionChecks(RETENTION_CHECK_S)
    checks.start()
    try:
        start = time.monotonic()
        deleted_at = None
        # The window ends with a comparison made after a retention run had finished (on
        # the cluster's own expired topic): the run did not touch the mirrored topics.
        retention_ran = False
        while not retention_ran or checks.checks < CHECKS or time.monotonic() - start < WINDOW_S:
            elapsed = time.monotonic() - start
            assert elapsed < WINDOW_S + 60, (retention_ran, checks.checks)
            retention_ran = JobRun.objects.filter(
                cluster=cluster.cluster, kind=JobRun.Kind.RETENTION, state=JobRun.State.SUCCEEDED
            ).exists()
            if deleted_at is None and elapsed >= WINDOW_S / 2:
                # DeleteRecords on the Floe source: the mirror's log start follows it.
                _delete_records(floe_source.bootstrap, "floe-history", {0: 400, 1: 1000})
                deleted_at = time.monotonic()
                want["floe-history"] = {0: (400, 1000), 1: (1000, 1000), 2: (0, 1000)}
                assert _marks(floe_source.bootstrap, "floe-history") == want["floe-history"]
                while (have := _marks(floe.bootstrap, "floe-history")) != want["floe-history"]:
                    assert time.monotonic() - deleted_at < 15, have
                    time.sleep(0.2)
                print(f"the mirror's log start followed in {time.monotonic() - deleted_at:.1f} s")
            for topic, bootstrap in sources.items():
                source_marks = fetch_watermarks(bootstrap, topic, PARTITIONS)
                assert source_marks == want[topic], (topic, source_marks)
                mirror_marks = _marks(floe.bootstrap, topic)
                assert mirror_marks == want[topic], (
                    f"{topic} after {elapsed:.0f} s and {checks.checks} retention checks:"
                    f" mirror {mirror_marks}, source {want[topic]}"
                )
            time.sleep(min(2.0, RETENTION_CHECK_S))
        assert checks.checks >= CHECKS, checks.checks
        # The check did run retention: Floe's own old records went.
        assert fetch_watermarks(floe.bootstrap, "floe-own", 1) == {0: (50, 50)}
        for topic, bootstrap in sources.items():
            # (An emptied partition reads nothing: its end is given as 0.)
            ends = {p: end if start < end else 0 for p, (start, end) in want[topic].items()}
            mirrored = _read_all(floe.bootstrap, topic, PARTITIONS, ends)
            assert mirrored == _read_all(bootstrap, topic, PARTITIONS, ends), topic
            assert sum(len(records) for records in mirrored.values()) == (
                3000 if topic == "tansu-history" else 1600
            )

        # The source's effective retention, copied; in force from the cutover on.
        configs = {
            t.name: t.configs
            for t in Topic.objects.filter(cluster=cluster.cluster, name__in=sources)
        }
        assert configs["tansu-history"]["retention.ms"] == KAFKA_RETENTION_MS
        assert configs["tansu-history"]["cleanup.policy"] == "delete"
        assert configs["floe-history"]["retention.ms"] == str(TEN_YEARS_MS)
        for topic, (api, url, migration) in migrations.items():
            detail = api.get(f"{url}{migration}/").json()
            (shown,) = detail["topics"]
            assert shown["retention_applies"] == "after cutover", shown
            origin = "kafka_default" if topic == "tansu-history" else "source_default"
            assert shown["configs"]["retention.ms"] == {
                "value": configs[topic]["retention.ms"],
                "origin": origin,
            }, shown["configs"]
            response = api.post(f"{url}{migration}/cutover/", {"topics": [topic]}, format="json")
            assert response.status_code == 200, response.content
            assert api.get(f"{url}{migration}/").json()["topics"][0]["retention_applies"] == "now"

        # After the cutover Floe's retention applies: Kafka's 7 days delete the 2023
        # records copied from Tansu; the Floe source's ten years keep its own.
        cut_over = time.monotonic()
        expired = {p: (1000, 1000) for p in range(PARTITIONS)}
        while (have := _marks(floe.bootstrap, "tansu-history")) != expired:
            assert time.monotonic() - cut_over < 3 * RETENTION_CHECK_S + 15, have
            time.sleep(1)
        print(f"retention applied {time.monotonic() - cut_over:.1f} s after the cutover")
        assert _marks(floe.bootstrap, "floe-history") == want["floe-history"]
    finally:
        checks.stop()
