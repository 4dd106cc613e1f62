"""The index keeps one row per partition run: a partition's consecutive batches in one
file. Idempotent producers keep their per-batch checks through the producer state."""

from __future__ import annotations

import pytest

from metadata_store.models import Batch, ProducerState, SegmentFile
from tests.metadata_store.conftest import batch

pytestmark = pytest.mark.django_db


def _key(alice, name: str) -> str:
    return f"{alice['cluster'].public_id}/segments/{name}.seg"


def _rows(tid) -> list[tuple]:
    return list(
        Batch.objects.filter(partition__topic_id=tid)
        .order_by("partition__index", "last_offset")
        .values_list(
            "partition__index",
            "base_offset",
            "last_offset",
            "position",
            "length",
            "record_count",
            "batch_count",
            "max_timestamp",
        )
    )


def test_side_by_side_batches_of_a_partition_are_one_row(agent_api, alice):
    tid = agent_api.create_topic("orders", 2)
    answer = agent_api(
        "commit",
        {
            "file_key": _key(alice, "a"),
            "size": 500,
            "batches": [
                batch(tid, 0, 3, pos=0, max_ts=10),
                batch(tid, 0, 2, pos=100, max_ts=30),
                batch(tid, 0, 5, pos=200, max_ts=20),
                batch(tid, 1, 4, pos=300, max_ts=5),
                batch(tid, 1, 1, pos=400, max_ts=6),
            ],
        },
    )
    assert [b["base_offset"] for b in answer["batches"]] == [0, 3, 5, 0, 4]
    assert _rows(tid) == [(0, 0, 9, 0, 300, 10, 3, 30), (1, 0, 4, 300, 200, 5, 2, 6)]


def test_an_entry_of_several_batches_is_counted_as_its_batches(agent_api, alice):
    """Agents send a partition's plain batches side by side as one entry (`batch_count`):
    the answer is the first batch's offset, the run and the file count every batch, and
    a fetch plan reads the run whole."""
    tid = agent_api.create_topic("orders", 2)
    answer = agent_api(
        "commit",
        {
            "file_key": _key(alice, "merged"),
            "size": 600,
            "batches": [
                batch(tid, 0, 10, pos=0, length=300, max_ts=30, batch_count=3),
                batch(tid, 1, 4, pos=300, length=200, max_ts=6, batch_count=2),
                batch(tid, 1, 1, pos=500, max_ts=7),
            ],
        },
    )
    assert [b["base_offset"] for b in answer["batches"]] == [0, 0, 4]
    assert _rows(tid) == [(0, 0, 9, 0, 300, 10, 3, 30), (1, 0, 4, 300, 300, 5, 3, 7)]
    assert SegmentFile.objects.get(key=_key(alice, "merged")).batch_count == 6
    (plan,) = agent_api(
        "fetch-plan", {"partitions": [{"topic_id": tid, "partition": 0, "offset": 0}]}
    )["partitions"]
    assert [(b["base_offset"], b["last_offset"], b["batch_count"]) for b in plan["batches"]] == [
        (0, 9, 3)
    ]


def test_a_gap_in_the_file_or_a_refused_batch_starts_a_new_run(agent_api, alice):
    tid = agent_api.create_topic("orders", 2)
    producer = {"producer_id": 5, "base_sequence": 0}
    agent_api(
        "commit",
        {
            "file_key": _key(alice, "first"),
            "size": 100,
            "batches": [batch(tid, 0, 1, producer_epoch=3, **producer)],
        },
    )
    answer = agent_api(
        "commit",
        {
            "file_key": _key(alice, "a"),
            "size": 1000,
            "batches": [
                batch(tid, 0, 1, pos=0),
                batch(tid, 0, 1, pos=200),  # bytes 100..200 are another partition's
                batch(tid, 1, 1, pos=100),
                batch(tid, 0, 1, pos=300),
                batch(tid, 0, 1, pos=400, producer_epoch=2, **producer),  # fenced
                batch(tid, 0, 1, pos=500),
            ],
        },
    )
    assert [b["error_code"] for b in answer["batches"]] == [0, 0, 0, 0, 47, 0]
    assert [r[:4] for r in _rows(tid)] == [
        (0, 0, 0, 0),  # the first file
        (0, 1, 1, 0),
        (0, 2, 3, 200),  # 200 and 300 lie side by side
        (0, 4, 4, 500),  # 400 was refused: not next to 300's run
        (1, 0, 0, 100),
    ]


def test_a_retry_of_any_of_the_last_five_batches_gets_its_first_offset(agent_api, alice):
    tid = agent_api.create_topic("orders")
    idem = {"producer_id": 42, "producer_epoch": 0}
    sent = [batch(tid, 0, 2, pos=n * 100, base_sequence=n * 2, **idem) for n in range(6)]
    first = agent_api("commit", {"file_key": _key(alice, "a"), "size": 600, "batches": sent})
    assert [b["base_offset"] for b in first["batches"]] == [0, 2, 4, 6, 8, 10]
    state = ProducerState.objects.get(producer_id=42)
    assert (state.recent_sequences, state.recent_offsets) == ([2, 4, 6, 8, 10], [2, 4, 6, 8, 10])
    retried = agent_api(
        "commit",
        {"file_key": _key(alice, "b"), "size": 600, "batches": [sent[3], sent[5], sent[0]]},
    )
    assert [(b["error_code"], b["base_offset"]) for b in retried["batches"]] == [
        (0, 6),
        (0, 10),
        # Older than the last five: written before, nothing stored; the store says
        # DUPLICATE_SEQUENCE_NUMBER (a gap would be 45), the agent answers a producer 45.
        (46, -1),
    ]
    assert Batch.objects.get().last_offset == 11  # nothing stored twice
    bumped = agent_api(
        "commit",
        {
            "file_key": _key(alice, "c"),
            "size": 100,
            "batches": [batch(tid, 0, 1, producer_id=42, producer_epoch=1, base_sequence=0)],
        },
    )
    assert bumped["batches"][0]["base_offset"] == 12
    state.refresh_from_db()
    assert (state.producer_epoch, state.recent_sequences, state.recent_offsets) == (1, [0], [12])


def test_fetch_plans_and_offsets_name_runs(agent_api, alice):
    tid = agent_api.create_topic("orders")
    agent_api(
        "commit",
        {
            "file_key": _key(alice, "a"),
            "size": 300,
            "batches": [batch(tid, 0, 10, pos=n * 100, max_ts=1000 + n) for n in range(3)],
        },
    )
    (plan,) = agent_api(
        "fetch-plan", {"partitions": [{"topic_id": tid, "partition": 0, "offset": 15}]}
    )["partitions"]
    assert plan["batches"] == [
        {
            "file_key": _key(alice, "a"),
            "pos": 0,
            "len": 300,
            "base_offset": 0,
            "last_offset": 29,
            "batch_count": 3,
            "rewrite": True,
        }
    ]
