"""Mirrored commits (issue 30): a migration's batches committed at the source's offsets —
only to mirrored partitions, only at or after the high watermark, gaps allowed, the log
start following the source's — and a mirrored partition refusing every other commit."""

from __future__ import annotations

import uuid
from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.utils import timezone
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from core.kafka.errors import ErrorCode
from metadata_store import leases, mirroring, store, tail_feed
from metadata_store.models import Batch, Lease, Partition, SegmentFile, Topic
from tests.metadata_store.conftest import AgentApi, batch

pytestmark = pytest.mark.django_db


class CopierApi(AgentApi):
    """A migration's copier: its `mirror/commit` calls carry the migration's id and the
    lease it took (once, on its first commit) unless the body names them."""

    def __init__(self, key: str, cluster, migration: str = "mig_test"):
        super().__init__(key)
        self.cluster = cluster
        self.migration = migration
        self.tokens: dict[str, str] = {}

    def lease(self, migration: str) -> str:
        if migration not in self.tokens:
            taken = leases.lease_take(
                cluster_id=self.cluster.pk,
                subject=leases.migration_subject(migration),
                holder="agt-copier",
                seconds=60,
            )
            assert taken is not None
            self.tokens[migration] = taken.token
        return self.tokens[migration]

    def raw(self, name: str, body):
        if name == "mirror/commit" and isinstance(body, dict) and "lease" not in body:
            body = {"migration_id": self.migration, "lease": self.lease(self.migration), **body}
        return super().raw(name, body)


@pytest.fixture
def agent_api(alice):
    return CopierApi(alice["agent_key"], alice["cluster"])


@pytest.fixture
def bob_agent_api(bob):
    return CopierApi(bob["agent_key"], bob["cluster"])


def _mirrored_topic(agent_api, partitions: int = 2, migration: str = "mig_test") -> str:
    topic_id = agent_api.create_topic(f"mirror-{uuid.uuid4().hex[:10]}", partitions)
    if migration:
        mirroring.topic_mirroring_set(topic=Topic.objects.get(pk=topic_id), migration_id=migration)
    return topic_id


def _entry(topic_id, partition, base, last, records=None, *, pos=0, length=100):
    return {
        "topic_id": topic_id,
        "partition": partition,
        "base_offset": base,
        "last_offset": last,
        "records": records if records is not None else last - base + 1,
        "pos": pos,
        "len": length,
        "max_ts": 1_700_000_000_000,
    }


def _commit(agent_api, cluster, entries, log_starts=(), key=None):
    for i, e in enumerate(entries):
        e["pos"] = 100 * i
    body = {
        "file_key": key or f"{cluster.public_id}/mirror/{uuid.uuid4().hex}.seg",
        "size": 100 * max(1, len(entries)),
        "batches": entries,
        "log_starts": list(log_starts),
    }
    return body, agent_api("mirror/commit", body)


def _offsets(topic_id, index):
    part = Partition.objects.get(topic_id=topic_id, index=index)
    return part.log_start_offset, part.high_watermark


def test_batches_land_at_the_sources_offsets_with_gaps(agent_api, alice):
    topic = _mirrored_topic(agent_api)
    _, answer = _commit(
        agent_api,
        alice["cluster"],
        [_entry(topic, 0, 5, 9), _entry(topic, 0, 10, 14, 3), _entry(topic, 0, 20, 20)],
        [{"topic_id": topic, "partition": 0, "offset": 5}],
    )
    assert [(b["error_code"], b["base_offset"]) for b in answer["batches"]] == [
        (0, 5),
        (0, 10),
        (0, 20),
    ]
    assert _offsets(topic, 0) == (5, 21)
    # Two runs: 5..14 (adjacent in the file and in offsets) and 20..20 after the gap.
    runs = Batch.objects.filter(partition__topic_id=topic).order_by("last_offset")
    assert [(r.base_offset, r.last_offset, r.record_count, r.batch_count) for r in runs] == [
        (5, 14, 8, 2),
        (20, 20, 1, 1),
    ]
    plan = agent_api(
        "fetch-plan", {"partitions": [{"topic_id": topic, "partition": 0, "offset": 15}]}
    )["partitions"][0]
    assert plan["error_code"] == 0 and plan["high_watermark"] == 21
    assert [(b["base_offset"], b["last_offset"]) for b in plan["batches"]] == [(20, 20)]


def test_it_refuses_batches_below_the_high_watermark_and_unmirrored_partitions(agent_api, alice):
    topic = _mirrored_topic(agent_api)
    plain = _mirrored_topic(agent_api, migration="")
    _commit(agent_api, alice["cluster"], [_entry(topic, 0, 0, 9)])
    _, answer = _commit(
        agent_api,
        alice["cluster"],
        [_entry(topic, 0, 5, 12), _entry(plain, 0, 0, 0), _entry(topic, 1, 0, 3)],
    )
    assert [b["error_code"] for b in answer["batches"]] == [
        ErrorCode.OFFSET_OUT_OF_RANGE,
        ErrorCode.POLICY_VIOLATION,
        0,
    ]
    assert _offsets(topic, 0) == (0, 10)
    assert _offsets(plain, 0) == (0, 0)


def test_a_retried_file_gets_its_first_answer_and_changes_nothing(agent_api, alice):
    topic = _mirrored_topic(agent_api)
    body, first = _commit(agent_api, alice["cluster"], [_entry(topic, 0, 3, 7)])
    assert agent_api("mirror/commit", body)["batches"] == first["batches"]
    assert _offsets(topic, 0) == (0, 8)
    assert Batch.objects.filter(partition__topic_id=topic).count() == 1
    assert SegmentFile.objects.filter(key=body["file_key"]).count() == 1


def test_the_log_start_follows_the_source_forward_only(agent_api, alice):
    topic = _mirrored_topic(agent_api)
    cluster = alice["cluster"]
    _commit(agent_api, cluster, [_entry(topic, 0, 0, 9)])
    answer = agent_api(
        "mirror/commit", {"log_starts": [{"topic_id": topic, "partition": 0, "offset": 4}]}
    )
    assert answer["partitions"][0]["log_start_offset"] == 4
    agent_api("mirror/commit", {"log_starts": [{"topic_id": topic, "partition": 0, "offset": 2}]})
    assert _offsets(topic, 0) == (4, 10)
    # A source whose records were all deleted past what was copied: both move.
    agent_api("mirror/commit", {"log_starts": [{"topic_id": topic, "partition": 1, "offset": 50}]})
    assert _offsets(topic, 1) == (50, 50)
    _, answer = _commit(agent_api, cluster, [_entry(topic, 1, 50, 51)])
    assert answer["batches"][0]["error_code"] == 0


def test_a_mirrored_partition_refuses_normal_commits_until_its_cutover(agent_api, alice):
    topic = _mirrored_topic(agent_api)
    _commit(agent_api, alice["cluster"], [_entry(topic, 0, 0, 41)])
    files = SegmentFile.objects.count()
    with pytest.raises(psycopg.errors.CheckViolation, match="mirrored"):
        store.file_commit(
            cluster_id=alice["cluster"].pk,
            file_key=f"{alice['cluster'].public_id}/seg-{uuid.uuid4().hex}",
            size=100,
            batches=[_Batch(topic, 0)],
        )
    assert _offsets(topic, 0) == (0, 42) and SegmentFile.objects.count() == files
    mirroring.topic_mirroring_set(topic=Topic.objects.get(pk=topic), migration_id="")
    answer = agent_api(
        "commit",
        {
            "file_key": f"{alice['cluster'].public_id}/seg-{uuid.uuid4().hex}",
            "size": 100,
            "batches": [batch(topic, 0, 3)],
        },
    )
    assert answer["batches"][0] == {"error_code": 0, "base_offset": 42, "log_start_offset": 0}
    # … and after the cutover, mirrored commits are refused.
    _, answer = _commit(agent_api, alice["cluster"], [_entry(topic, 0, 45, 45)])
    assert answer["batches"][0]["error_code"] == ErrorCode.POLICY_VIOLATION


def test_another_clusters_agent_cannot_commit_to_a_mirrored_partition(
    agent_api, bob_agent_api, alice, bob
):
    topic = _mirrored_topic(agent_api)
    _, answer = _commit(bob_agent_api, bob["cluster"], [_entry(topic, 0, 0, 0)])
    assert answer["batches"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert _offsets(topic, 0) == (0, 0)


def test_bad_mirrored_commits_get_400(agent_api, alice):
    topic = _mirrored_topic(agent_api)
    prefix = alice["cluster"].public_id
    bad = [
        {"file_key": "other/x.seg", "size": 100, "batches": [_entry(topic, 0, 0, 0)]},
        {"batches": [_entry(topic, 0, 0, 0)]},
        {"file_key": f"{prefix}/x.seg", "size": 100, "batches": [_entry(topic, 0, 5, 6, 3)]},
        {"file_key": f"{prefix}/x.seg", "size": 50, "batches": [_entry(topic, 0, 0, 0)]},
    ]
    for body in bad:
        assert agent_api.raw("mirror/commit", body).status_code == 400, body


class _Batch:
    """A normal commit's batch (``store.CommitBatch``)."""

    def __init__(self, topic_id: str, partition: int) -> None:
        self.topic_id = uuid.UUID(topic_id)
        self.partition = partition
        self.pos, self.len, self.records, self.batch_count = 0, 100, 1, 1
        self.base_ts = self.max_ts = 1
        self.producer_id = self.producer_epoch = self.base_sequence = -1
        self.transactional = False


@pytest.mark.django_db(transaction=True)
def test_mirrored_runs_reach_the_tail_feed(agent_api, alice):
    topic = _mirrored_topic(agent_api)
    settings_dict = connection.settings_dict
    with psycopg.connect(
        host=settings_dict["HOST"],
        port=settings_dict["PORT"] or 5432,
        user=settings_dict["USER"],
        dbname=settings_dict["NAME"],
        autocommit=True,
    ) as listener:
        listener.execute("LISTEN floe_tail")
        body, _ = _commit(agent_api, alice["cluster"], [_entry(topic, 1, 7, 9)])
        agent_api(
            "mirror/commit", {"log_starts": [{"topic_id": topic, "partition": 1, "offset": 8}]}
        )
        notes = [tail_feed.parse(n.payload) for n in listener.notifies(timeout=5, stop_after=2)]
    part = Partition.objects.get(topic_id=topic, index=1)
    assert notes[0].files == (
        (body["file_key"], (tail_feed.Run(part.pk, 7, 9, 0, 100, 1, -1, 0),)),
    )
    assert notes[1].changed == ((topic, 1),)


def _machine(agent_api, alice):
    cluster = alice["cluster"]

    class MirrorModel(RuleBasedStateMachine):
        """Mirrored commits with random gaps, retries and log starts: the index stays
        ordered and inside [log start's run, high watermark), nothing moves back."""

        def __init__(self) -> None:
            super().__init__()
            self.topic = _mirrored_topic(agent_api, 2)
            self.hw = [0, 0]
            self.start = [0, 0]
            self.sent: list[tuple[dict, dict]] = []

        @rule(
            entries=st.lists(
                st.tuples(st.integers(0, 1), st.integers(0, 5), st.integers(1, 4)),
                min_size=1,
                max_size=4,
            ),
            behind=st.booleans(),
        )
        def commit(self, entries, behind):
            hw, expected, batches = list(self.hw), [], []
            for partition, gap, span in entries:
                base = hw[partition] + gap
                if behind and hw[partition] > 0:
                    base = hw[partition] - 1  # below the watermark: refused
                    expected.append(ErrorCode.OFFSET_OUT_OF_RANGE)
                else:
                    expected.append(0)
                    hw[partition] = base + span
                batches.append(_entry(self.topic, partition, base, base + span - 1, 1))
            body, answer = _commit(agent_api, cluster, batches)
            assert [b["error_code"] for b in answer["batches"]] == expected
            self.hw = hw
            self.sent.append((body, answer))

        @rule(data=st.data())
        def retry(self, data):
            if self.sent:
                body, answer = data.draw(st.sampled_from(self.sent))
                assert agent_api("mirror/commit", body)["batches"] == answer["batches"]

        @rule(partition=st.integers(0, 1), ahead=st.integers(-3, 6))
        def follow_log_start(self, partition, ahead):
            offset = max(0, self.hw[partition] + ahead)
            agent_api(
                "mirror/commit",
                {
                    "log_starts": [
                        {"topic_id": self.topic, "partition": partition, "offset": offset}
                    ]
                },
            )
            self.start[partition] = max(self.start[partition], offset)
            self.hw[partition] = max(self.hw[partition], self.start[partition])

        @invariant()
        def the_store_agrees(self):
            for index in (0, 1):
                assert _offsets(self.topic, index) == (self.start[index], self.hw[index])
                runs = list(
                    Batch.objects.filter(partition__topic_id=self.topic, partition__index=index)
                    .order_by("last_offset")
                    .values_list("base_offset", "last_offset")
                )
                for (_, last), (base, _) in zip(runs, runs[1:]):
                    assert base > last
                assert not runs or runs[-1][1] < self.hw[index]

    return MirrorModel


def test_mirrored_commits_against_a_model(agent_api, alice):
    from hypothesis.stateful import run_state_machine_as_test

    run_state_machine_as_test(
        _machine(agent_api, alice),
        settings=settings(
            max_examples=25,
            stateful_step_count=20,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        ),
    )


def test_a_mirrored_topic_grows_only_with_its_source(agent_api, alice):
    """CreatePartitions on a mirrored topic is refused (its partitions follow the
    source's); the migration itself grows it, the new partitions mirrored; after the
    cutover anyone may."""
    from metadata_store.topics import topic_partitions_create

    agent_api.migration = "mig_grow"
    topic_id = _mirrored_topic(agent_api, migration="mig_grow")
    name = Topic.objects.get(pk=topic_id).name
    refused = agent_api("topics/create-partitions", {"topics": [{"name": name, "count": 3}]})
    assert refused["topics"][0]["error_code"] == ErrorCode.POLICY_VIOLATION
    assert refused["topics"][0]["error_message"] == (
        f"topic '{name}' is mirrored by migration mig_grow: its partitions follow the"
        " source's until its cutover"
    )
    assert Partition.objects.filter(topic_id=topic_id).count() == 2

    topic_partitions_create(topic=Topic.objects.get(pk=topic_id), count=3, mirrored_by="mig_grow")
    assert list(
        Partition.objects.filter(topic_id=topic_id)
        .order_by("index")
        .values_list("index", "mirrored")
    ) == [(0, True), (1, True), (2, True)]
    _, answer = _commit(agent_api, alice["cluster"], [_entry(topic_id, 2, 7, 9)])
    assert answer["batches"][0]["error_code"] == 0 and _offsets(topic_id, 2) == (0, 10)

    mirroring.topic_mirroring_set(topic=Topic.objects.get(pk=topic_id), migration_id="")
    grown = agent_api("topics/create-partitions", {"topics": [{"name": name, "count": 4}]})
    assert grown["topics"][0]["error_code"] == 0
    assert not Partition.objects.get(topic_id=topic_id, index=3).mirrored


def _marker(topic_id, offset, *, committed, first_offset=None, producer_id=7):
    marker = {
        "topic_id": topic_id,
        "partition": 0,
        "offset": offset,
        "producer_id": producer_id,
        "producer_epoch": 0,
        "committed": committed,
        "timestamp": 1_700_000_000_000,
    }
    if first_offset is not None:
        marker["first_offset"] = first_offset
    return marker


def test_source_markers_are_kept_as_floes_own(agent_api, alice):
    """A source's commit and abort markers become transaction-marker rows at their
    offsets: read_committed fetches name the aborted transaction, and the plan carries
    both markers between the runs; a marker below the high watermark, or on a batch of
    the commit, is refused; an abort without its first offset is a bad body."""
    topic = _mirrored_topic(agent_api)
    entries = [_entry(topic, 0, 0, 2), _entry(topic, 0, 4, 6), _entry(topic, 0, 8, 9)]
    for i, e in enumerate(entries):
        e["pos"] = 100 * i
    answer = agent_api(
        "mirror/commit",
        {
            "file_key": f"{alice['cluster'].public_id}/mirror/{uuid.uuid4().hex}.seg",
            "size": 300,
            "batches": entries,
            "markers": [
                _marker(topic, 3, committed=True),
                _marker(topic, 7, committed=False, first_offset=4),
                _marker(topic, 5, committed=True),  # inside a batch
            ],
        },
    )
    assert [m["error_code"] for m in answer["markers"]] == [0, 0, ErrorCode.OFFSET_OUT_OF_RANGE]
    assert _offsets(topic, 0) == (0, 10)
    plan = agent_api(
        "fetch-plan",
        {
            "partitions": [{"topic_id": topic, "partition": 0, "offset": 0}],
            "isolation_level": 1,
        },
    )["partitions"][0]
    assert plan["aborted_transactions"] == [{"producer_id": 7, "first_offset": 4}]
    offsets = [(b["base_offset"], "marker" in b) for b in plan["batches"]]
    assert offsets == [(0, False), (3, True), (4, False), (7, True), (8, False)], plan
    late = agent_api(
        "mirror/commit", {"markers": [_marker(topic, 9, committed=True)], "log_starts": []}
    )
    assert late["markers"] == [{"error_code": ErrorCode.OFFSET_OUT_OF_RANGE}]
    no_first = {"markers": [_marker(topic, 10, committed=False)]}
    assert agent_api.raw("mirror/commit", no_first).status_code == 400


def test_a_commit_under_a_superseded_or_expired_lease_is_refused_and_changes_nothing(
    agent_api, alice
):
    """The lease is checked in the commit's transaction: a copier past its lease's
    expiry (on the database's clock), or one another copier took over from, commits
    nothing — the whole call 409, the offsets where they were."""
    topic = _mirrored_topic(agent_api)
    cluster = alice["cluster"]
    _commit(agent_api, cluster, [_entry(topic, 0, 0, 9)])
    subject = leases.migration_subject("mig_test")
    Lease.objects.filter(cluster=cluster, subject=subject).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    late = {
        "file_key": f"{cluster.public_id}/mirror/late.seg",
        "size": 100,
        "batches": [_entry(topic, 0, 10, 19)],
    }
    expired = agent_api.raw("mirror/commit", late)
    assert expired.status_code == 409, expired.content
    assert "expired" in expired.json()["error"]
    first_epoch = Lease.objects.get(cluster=cluster, subject=subject).epoch
    # A second copier takes the migration over: the first one's commit is superseded.
    second = CopierApi(alice["agent_key"], cluster)
    _, answer = _commit(second, cluster, [_entry(topic, 0, 10, 14)])
    assert answer["batches"][0]["error_code"] == 0
    assert Lease.objects.get(cluster=cluster, subject=subject).epoch == first_epoch + 1
    superseded = agent_api.raw("mirror/commit", late)
    assert superseded.status_code == 409 and "superseded" in superseded.json()["error"]
    assert _offsets(topic, 0) == (0, 15)
    assert not SegmentFile.objects.filter(key=late["file_key"]).exists()
    # Neither may a lease that is not the migration's, nor none at all.
    other = CopierApi(alice["agent_key"], cluster, migration="mig_other")
    body = {**late, "migration_id": "mig_test", "lease": other.lease("mig_other")}
    assert agent_api.raw("mirror/commit", body).status_code == 409
    without = AgentApi.raw(agent_api, "mirror/commit", {**late, "migration_id": "mig_test"})
    assert without.status_code == 400


def test_a_copier_cannot_commit_to_another_migrations_topic(agent_api, alice):
    mine = _mirrored_topic(agent_api)
    theirs = _mirrored_topic(agent_api, migration="mig_theirs")
    _, answer = _commit(
        agent_api, alice["cluster"], [_entry(mine, 0, 0, 3), _entry(theirs, 0, 0, 3)]
    )
    assert [b["error_code"] for b in answer["batches"]] == [0, ErrorCode.POLICY_VIOLATION]
    assert _offsets(theirs, 0) == (0, 0)
