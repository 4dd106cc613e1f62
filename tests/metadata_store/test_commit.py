"""The metadata store's commit: offsets, idempotence, atomicity, retries."""

from __future__ import annotations

import pytest
from django.db import connection

from metadata_store import store as metadata
from metadata_store.agent_api.schemas import commit_batches
from metadata_store.models import Batch, Partition, SegmentFile
from tests.metadata_store.conftest import batch

pytestmark = pytest.mark.django_db


def _key(alice, name: str) -> str:
    return f"{alice['cluster'].public_id}/segments/{name}.seg"


def test_it_assigns_dense_offsets_per_partition(agent_api, alice):
    tid = agent_api.create_topic("orders", 2)
    first = agent_api(
        "commit",
        {
            "file_key": _key(alice, "a"),
            "size": 500,
            "batches": [batch(tid, 0, 3), batch(tid, 1, 2, pos=100), batch(tid, 0, 5, pos=200)],
        },
    )
    second = agent_api(
        "commit", {"file_key": _key(alice, "b"), "size": 10_000, "batches": [batch(tid, 0, 1)]}
    )
    assert [b["base_offset"] for b in first["batches"]] == [0, 0, 3]
    assert second["batches"][0]["base_offset"] == 8
    hw = dict(Partition.objects.filter(topic_id=tid).values_list("index", "high_watermark"))
    assert hw == {0: 9, 1: 2}


def test_a_retried_commit_of_the_same_file_changes_nothing(agent_api, alice):
    tid = agent_api.create_topic("orders")
    body = {"file_key": _key(alice, "a"), "size": 10_000, "batches": [batch(tid, 0, 4)]}
    assert agent_api("commit", body) == agent_api("commit", body)
    assert Partition.objects.get(topic_id=tid).high_watermark == 4
    assert Batch.objects.count() == 1 and SegmentFile.objects.count() == 1


def test_unknown_partitions_fail_only_their_batches(agent_api, alice):
    tid = agent_api.create_topic("orders")
    answer = agent_api(
        "commit",
        {
            "file_key": _key(alice, "a"),
            "size": 10_000,
            "batches": [
                batch(tid, 0, 1),
                batch(tid, 7, 1, pos=100),
                batch("00000000-0000-0000-0000-000000000000", 0, 1, pos=200),
            ],
        },
    )
    assert [b["error_code"] for b in answer["batches"]] == [0, 3, 3]


def test_idempotent_duplicates_return_the_original_offset(agent_api, alice):
    tid = agent_api.create_topic("orders")
    pid = agent_api("init-producer-id", {"transactional_id": None})["producer_id"]
    idem = {"producer_id": pid, "producer_epoch": 0}
    agent_api(
        "commit",
        {
            "file_key": _key(alice, "a"),
            "size": 10_000,
            "batches": [batch(tid, 0, 5, base_sequence=0, **idem)],
        },
    )
    agent_api(
        "commit",
        {
            "file_key": _key(alice, "b"),
            "size": 10_000,
            "batches": [batch(tid, 0, 5, base_sequence=5, **idem)],
        },
    )
    again = agent_api(
        "commit",
        {
            "file_key": _key(alice, "c"),
            "size": 10_000,
            "batches": [batch(tid, 0, 5, base_sequence=0, **idem)],
        },
    )
    assert again["batches"][0] == {
        "error_code": 0,
        "base_offset": 0,
        "log_start_offset": 0,
        "duplicate": True,  # stored once: agents and meters count it where it was first
    }
    assert Partition.objects.get(topic_id=tid).high_watermark == 10
    assert Batch.objects.count() == 2
    # The file holds the resent bytes, but the commit gave none of them offsets.
    sizes = dict(SegmentFile.objects.values_list("key", "data_bytes"))
    assert sizes == {_key(alice, "a"): 100, _key(alice, "b"): 100, _key(alice, "c"): 0}


def test_any_of_the_last_five_pipelined_batches_resent_gets_its_original_offset(agent_api, alice):
    """A producer with five requests in flight: the agents commit them in order (here as
    two files), the answers are lost, and it sends all five again in one request. Each is a
    duplicate answered with its first offset; a batch older than the last five is not: it
    is refused as written before (DUPLICATE_SEQUENCE_NUMBER, which the agent answers a
    producer as OUT_OF_ORDER_SEQUENCE_NUMBER, Kafka's code) and nothing is stored."""
    tid = agent_api.create_topic("orders")
    idem = {"producer_id": 43, "producer_epoch": 0}

    def batches(sequences: range) -> list[dict]:
        return [
            batch(tid, 0, 2, pos=100 * n, base_sequence=2 * s, **idem)
            for n, s in enumerate(sequences)
        ]

    for name, sequences in [("a", range(0, 1)), ("b", range(1, 3)), ("c", range(3, 6))]:
        agent_api(
            "commit",
            {"file_key": _key(alice, name), "size": 10_000, "batches": batches(sequences)},
        )
    again = agent_api(
        "commit", {"file_key": _key(alice, "d"), "size": 10_000, "batches": batches(range(1, 6))}
    )
    assert [(b["base_offset"], b.get("duplicate")) for b in again["batches"]] == [
        (2, True), (4, True), (6, True), (8, True), (10, True),
    ]  # fmt: skip
    too_old = agent_api(
        "commit", {"file_key": _key(alice, "e"), "size": 10_000, "batches": batches(range(0, 1))}
    )
    assert too_old["batches"][0]["error_code"] == 46  # DUPLICATE_SEQUENCE_NUMBER
    assert Partition.objects.get(topic_id=tid).high_watermark == 12


def test_a_batch_behind_the_last_sequence_is_told_from_a_gap(agent_api, alice):
    """What a journal's sequencer must tell apart (issue 40): a batch whose sequences end
    at or before the producer's last written one is written already (46), one that starts
    after the next expected sequence is a gap (45) — also across the 2**31 wrap."""
    tid = agent_api.create_topic("orders")
    idem = {"producer_id": 44, "producer_epoch": 0}
    start = 2**31 - 12  # ten batches of 2 records: the last ones wrap to 0..7

    def commit(name: str, sequence: int, records: int = 2) -> int:
        answer = agent_api(
            "commit",
            {
                "file_key": _key(alice, name),
                "size": 10_000,
                "batches": [batch(tid, 0, records, base_sequence=sequence, **idem)],
            },
        )
        return answer["batches"][0]["error_code"]

    for n in range(10):
        assert commit(f"w{n}", (start + 2 * n) % 2**31) == 0
    assert commit("old", start) == 46  # written, older than the last five batches
    assert commit("old-tail", start + 1, records=1) == 46
    assert commit("gap", 10) == 45  # the next expected is 8
    assert commit("next", 8) == 0
    assert Partition.objects.get(topic_id=tid).high_watermark == 22


def test_a_sequence_gap_is_out_of_order(agent_api, alice):
    tid = agent_api.create_topic("orders")
    idem = {"producer_id": 42, "producer_epoch": 0}
    agent_api(
        "commit",
        {
            "file_key": _key(alice, "a"),
            "size": 10_000,
            "batches": [batch(tid, 0, 5, base_sequence=0, **idem)],
        },
    )
    gap = agent_api(
        "commit",
        {
            "file_key": _key(alice, "b"),
            "size": 10_000,
            "batches": [batch(tid, 0, 1, base_sequence=9, **idem)],
        },
    )
    assert gap["batches"][0]["error_code"] == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER


def test_an_old_epoch_is_fenced(agent_api, alice):
    tid = agent_api.create_topic("orders")
    agent_api(
        "commit",
        {
            "file_key": _key(alice, "a"),
            "size": 10_000,
            "batches": [batch(tid, 0, 1, producer_id=7, producer_epoch=3, base_sequence=0)],
        },
    )
    old = agent_api(
        "commit",
        {
            "file_key": _key(alice, "b"),
            "size": 10_000,
            "batches": [batch(tid, 0, 1, producer_id=7, producer_epoch=2, base_sequence=1)],
        },
    )
    assert old["batches"][0]["error_code"] == 47  # INVALID_PRODUCER_EPOCH
    bumped = agent_api(
        "commit",
        {
            "file_key": _key(alice, "c"),
            "size": 10_000,
            "batches": [batch(tid, 0, 1, producer_id=7, producer_epoch=4, base_sequence=0)],
        },
    )
    assert bumped["batches"][0] == {"error_code": 0, "base_offset": 1, "log_start_offset": 0}


def test_a_failure_inside_the_transaction_leaves_nothing_visible(agent_api, alice, inject_trigger):
    """Multi-partition atomicity: a database error after two of three partitions' batches
    are written (a trigger that fails on the third) undoes the whole commit."""
    tid = agent_api.create_topic("orders", 3)
    third = Partition.objects.get(topic_id=tid, index=2).pk
    inject_trigger(
        "floe_batch",
        f"IF NEW.partition_id = {third} THEN RAISE EXCEPTION 'injected failure'; END IF; RETURN NEW;",
    )
    body = {
        "file_key": _key(alice, "a"),
        "size": 10_000,
        "batches": [batch(tid, p, 2, pos=p * 100) for p in range(3)],
    }
    with pytest.raises(Exception, match="injected failure"):
        metadata.file_commit(
            cluster_id=alice["cluster"].pk,
            file_key=body["file_key"],
            size=1,
            batches=commit_batches(body["batches"]),
        )
    assert not SegmentFile.objects.exists() and not Batch.objects.exists()
    assert set(Partition.objects.filter(topic_id=tid).values_list("high_watermark", flat=True)) == {
        0
    }
    inject_trigger.drop()
    retried = agent_api("commit", body)
    assert [b["base_offset"] for b in retried["batches"]] == [0, 0, 0]
    assert Batch.objects.count() == 3


def test_commit_is_a_handful_of_queries(agent_api, alice, django_assert_max_num_queries):
    tid = agent_api.create_topic("orders", 50)
    batches = [
        batch(
            tid,
            i % 50,
            2,
            pos=i * 100,
            producer_id=9,
            producer_epoch=0,
            base_sequence=(i // 50) * 2,
        )
        for i in range(100)
    ]
    agent_api(
        "commit", {"file_key": _key(alice, "warm"), "size": 10_000, "batches": [batch(tid, 0, 1)]}
    )
    connection.queries_log.clear()
    with django_assert_max_num_queries(3):
        answer = agent_api(
            "commit", {"file_key": _key(alice, "a"), "size": 10_000, "batches": batches}
        )
    assert all(b["error_code"] == 0 for b in answer["batches"])


def test_a_file_key_outside_the_cluster_prefix_is_refused(agent_api, bob):
    response = agent_api.raw(
        "commit",
        {"file_key": f"{bob['cluster'].public_id}/segments/x.seg", "size": 10_000, "batches": []},
    )
    assert response.status_code == 400 and "file_key" in response.json()["error"]


@pytest.mark.parametrize(
    "body", ["not json", "[1, 2]", '{"file_key": 5}', '{"batches": [{"partition": "x"}]}']
)
def test_malformed_bodies_get_400(agent_api, body):
    response = agent_api.raw("commit", body)
    assert response.status_code == 400 and response.json()["error"]
