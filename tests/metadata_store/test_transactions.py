"""Transactions in the metadata store (KIP-98): state, markers, the LSO, offsets, fencing."""

from __future__ import annotations

import pytest
from django.db import connection

from core.kafka.errors import ErrorCode
from metadata_store.models import GroupOffset, Partition, TransactionMarker
from metadata_store.transactions import txn_abort_expired, txn_markers_prune
from tests.metadata_store.conftest import batch

pytestmark = pytest.mark.django_db


class Txn:
    """A transactional producer speaking the agent API."""

    def __init__(self, api, alice, transactional_id: str = "tx-1", timeout_ms: int = 60_000):
        self.api, self.alice, self.tid = api, alice, transactional_id
        answer = api(
            "init-producer-id",
            {"transactional_id": transactional_id, "transaction_timeout_ms": timeout_ms},
        )
        assert answer["error_code"] == 0, answer
        self.pid, self.epoch = answer["producer_id"], answer["producer_epoch"]
        self.seq: dict[tuple[str, int], int] = {}
        self.files = 0
        self.keys: list[str] = []  # the file keys of its commits, in order

    def ids(self) -> dict:
        return {
            "transactional_id": self.tid,
            "producer_id": self.pid,
            "producer_epoch": self.epoch,
        }

    def add(self, topic: str, *partitions: int) -> list[int]:
        answer = self.api(
            "txn/add-partitions",
            {**self.ids(), "partitions": [{"topic": topic, "partition": p} for p in partitions]},
        )
        return [p["error_code"] for p in answer["partitions"]]

    def produce(self, topic_id: str, partition: int, records: int = 2, length: int = 100) -> dict:
        seq = self.seq.get((topic_id, partition), 0)
        self.files += 1
        key = f"{self.alice['cluster'].public_id}/segments/{self.tid}-{self.pid}-{self.files}.seg"
        self.keys.append(key)
        answer = self.api(
            "commit",
            {
                "file_key": key,
                "size": 1000,
                "batches": [
                    batch(
                        topic_id,
                        partition,
                        records,
                        length=length,
                        producer_id=self.pid,
                        producer_epoch=self.epoch,
                        base_sequence=seq,
                        transactional=True,
                    )
                ],
            },
        )["batches"][0]
        if not answer["error_code"]:
            self.seq[(topic_id, partition)] = seq + records
        return answer

    def end(self, committed: bool) -> int:
        return self.api("txn/end", {**self.ids(), "committed": committed})["error_code"]


def _plan(api, topic_id: str, partition: int = 0, offset: int = 0, isolation: int = 0) -> dict:
    return api(
        "fetch-plan",
        {
            "partitions": [{"topic_id": topic_id, "partition": partition, "offset": offset}],
            "isolation_level": isolation,
        },
    )["partitions"][0]


def _plain(api, alice, topic_id: str, name: str, records: int = 1) -> int:
    key = f"{alice['cluster'].public_id}/segments/{name}.seg"
    answer = api(
        "commit", {"file_key": key, "size": 1000, "batches": [batch(topic_id, 0, records)]}
    )
    return answer["batches"][0]["base_offset"]


def test_an_open_transaction_holds_the_lso_until_it_commits(agent_api, alice):
    tid = agent_api.create_topic("orders")
    _plain(agent_api, alice, tid, "before", 3)  # offsets 0-2
    txn = Txn(agent_api, alice)
    assert txn.add("orders", 0) == [0]
    assert txn.produce(tid, 0)["base_offset"] == 3  # 3-4
    _plain(agent_api, alice, tid, "meanwhile")  # 5, behind the open transaction

    committed = _plan(agent_api, tid, isolation=1)
    assert (committed["high_watermark"], committed["last_stable_offset"]) == (6, 3)
    assert [r["last_offset"] for r in committed["batches"]] == [2]
    uncommitted = _plan(agent_api, tid)
    assert [r["last_offset"] for r in uncommitted["batches"]] == [2, 4, 5]
    assert (
        agent_api(
            "list-offsets",
            {
                "partitions": [
                    {"topic_id": tid, "partition": 0, "timestamp": -1, "isolation_level": 1}
                ]
            },
        )["partitions"][0]["offset"]
        == 3
    )

    assert txn.end(True) == 0
    after = _plan(agent_api, tid, isolation=1)
    assert (after["high_watermark"], after["last_stable_offset"]) == (7, 7)
    assert [r["last_offset"] for r in after["batches"]] == [2, 4, 5, 6]
    assert after["batches"][-1]["marker"] == {
        "producer_id": txn.pid,
        "producer_epoch": txn.epoch,
        "committed": True,
        "timestamp": after["batches"][-1]["marker"]["timestamp"],
    }
    assert "aborted_transactions" not in after
    assert txn.end(True) == 0  # a retried EndTxn changes nothing
    assert Partition.objects.get(topic_id=tid).high_watermark == 7


def test_an_aborted_transaction_is_listed_for_read_committed_fetches(agent_api, alice):
    tid = agent_api.create_topic("orders", 2)
    txn = Txn(agent_api, alice)
    assert txn.add("orders", 0, 1) == [0, 0]
    assert txn.produce(tid, 0, 4)["base_offset"] == 0
    assert txn.end(False) == 0
    plan = _plan(agent_api, tid, isolation=1)
    assert plan["aborted_transactions"] == [{"producer_id": txn.pid, "first_offset": 0}]
    assert [(r["base_offset"], "marker" in r) for r in plan["batches"]] == [(0, False), (4, True)]
    assert plan["batches"][1]["marker"]["committed"] is False
    # Partition 1 was added but never written: no marker, no offset taken.
    assert _plan(agent_api, tid, 1)["high_watermark"] == 0
    # Past the abort marker nothing is listed.
    assert "aborted_transactions" not in _plan(agent_api, tid, offset=5, isolation=1)


def test_group_offsets_commit_with_the_transaction_and_vanish_with_an_abort(agent_api, alice):
    tid = agent_api.create_topic("orders")
    agent_api.create_topic("input")
    txn = Txn(agent_api, alice)

    def send_offsets(offset: int) -> None:
        assert agent_api("txn/add-offsets", {**txn.ids(), "group_id": "g"})["error_code"] == 0
        answer = agent_api(
            "txn/offset-commit",
            {
                **txn.ids(),
                "group_id": "g",
                "offsets": [{"topic": "input", "partition": 0, "offset": offset}],
            },
        )
        assert answer["offsets"][0]["error_code"] == 0

    txn.add("orders", 0)
    txn.produce(tid, 0)
    send_offsets(10)
    assert not GroupOffset.objects.exists()  # not before the commit
    assert txn.end(True) == 0
    assert GroupOffset.objects.get(group_id="g").committed_offset == 10

    txn.add("orders", 0)
    send_offsets(20)
    assert txn.end(False) == 0
    assert GroupOffset.objects.get(group_id="g").committed_offset == 10


def test_a_new_instance_aborts_the_open_transaction_and_fences_the_zombie(agent_api, alice):
    tid = agent_api.create_topic("orders")
    zombie = Txn(agent_api, alice)
    zombie.add("orders", 0)
    zombie.produce(tid, 0)
    fresh = Txn(agent_api, alice)
    assert fresh.pid == zombie.pid and fresh.epoch > zombie.epoch
    # The zombie's transaction was aborted: its records are listed as aborted.
    plan = _plan(agent_api, tid, isolation=1)
    assert plan["aborted_transactions"] == [{"producer_id": zombie.pid, "first_offset": 0}]
    assert zombie.produce(tid, 0)["error_code"] == ErrorCode.INVALID_PRODUCER_EPOCH
    assert zombie.add("orders", 0) == [ErrorCode.PRODUCER_FENCED]
    assert zombie.end(True) == ErrorCode.PRODUCER_FENCED
    assert fresh.add("orders", 0) == [0]
    assert fresh.produce(tid, 0)["error_code"] == 0
    assert fresh.end(True) == 0


def test_batches_outside_the_transaction_are_refused(agent_api, alice):
    tid = agent_api.create_topic("orders", 2)
    txn = Txn(agent_api, alice)
    txn.add("orders", 0)
    assert txn.produce(tid, 1)["error_code"] == ErrorCode.INVALID_TXN_STATE
    assert txn.add("orders", 0, 9) == [
        ErrorCode.OPERATION_NOT_ATTEMPTED,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ]
    assert Partition.objects.get(topic_id=tid, index=1).high_watermark == 0


def test_another_clusters_agent_cannot_touch_the_transaction(agent_api, bob_agent_api, alice):
    agent_api.create_topic("orders")
    txn = Txn(agent_api, alice)
    answer = bob_agent_api(
        "txn/end", {**txn.ids(), "committed": True}
    )  # same id, same producer id: another cluster's
    assert answer["error_code"] == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert bob_agent_api("txn/list", {})["transactions"] == []


def test_transactions_past_their_timeout_are_aborted(agent_api, alice):
    tid = agent_api.create_topic("orders")
    txn = Txn(agent_api, alice, timeout_ms=1000)
    txn.add("orders", 0)
    txn.produce(tid, 0)
    assert txn_abort_expired() == 0
    with connection.cursor() as cursor:
        cursor.execute("UPDATE floe_producer_id SET txn_started_at = now() - interval '2 seconds'")
    assert txn_abort_expired() == 1
    marker = TransactionMarker.objects.get()
    assert (marker.committed, marker.first_offset, marker.marker_offset) == (False, 0, 2)
    assert txn.end(True) == ErrorCode.PRODUCER_FENCED  # the epoch moved on
    described = agent_api("txn/describe", {"transactional_ids": ["tx-1"]})["transactions"]
    assert [(d["state"], d["partitions"]) for d in described] == [("complete_abort", [])]


def test_markers_below_the_log_start_are_forgotten(agent_api, alice):
    tid = agent_api.create_topic("orders")
    txn = Txn(agent_api, alice)
    txn.add("orders", 0)
    txn.produce(tid, 0)
    assert txn.end(True) == 0
    assert txn_markers_prune() == 0
    agent_api("delete-records", {"partitions": [{"topic_id": tid, "partition": 0, "offset": -1}]})
    assert txn_markers_prune() == 1
    assert not TransactionMarker.objects.exists()


def test_offsets_held_by_an_open_transaction_are_unstable_for_require_stable(agent_api, alice):
    agent_api.create_topic("input")
    txn = Txn(agent_api, alice)
    agent_api("txn/add-offsets", {**txn.ids(), "group_id": "g"})
    agent_api(
        "txn/offset-commit",
        {
            **txn.ids(),
            "group_id": "g",
            "offsets": [{"topic": "input", "partition": 0, "offset": 4}],
        },
    )

    def fetch(**extra) -> dict:
        body = {"group_id": "g", "partitions": [{"topic": "input", "partition": 0}], **extra}
        return agent_api("offsets/fetch", body)["offsets"][0]

    assert fetch(require_stable=True)["error_code"] == ErrorCode.UNSTABLE_OFFSET_COMMIT
    assert fetch() == {**fetch(), "offset": -1, "error_code": 0}
    assert txn.end(True) == 0
    assert (fetch(require_stable=True)["error_code"], fetch()["offset"]) == (0, 4)


def test_an_exhausted_epoch_gets_the_transactional_id_a_new_producer_id(agent_api, alice):
    first = Txn(agent_api, alice)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE floe_producer_id SET epoch = 32766 WHERE id = %s", [first.pid])
    second = Txn(agent_api, alice)
    assert (second.epoch, second.pid != first.pid) == (0, True)
    assert Txn(agent_api, alice).epoch == 1


def test_a_transactions_offsets_make_a_group_floes_and_a_migration_stops_copying_it(
    agent_api, alice
):
    """TxnOffsetCommit is a client's commit in Floe: while its transaction is open, and
    once it committed over the copier's offset, a migration's copy is refused, with why."""
    from metadata_store.group_offsets import group_offsets_mirror
    from metadata_store.models import GroupOffset

    agent_api.create_topic("input")
    offsets = [{"topic": "input", "partition": 0, "offset": 2}]
    assert group_offsets_mirror(alice["cluster"], "g", offsets)["used"] == ""
    assert GroupOffset.objects.get(group_id="g").mirrored
    txn = Txn(agent_api, alice)
    agent_api("txn/add-offsets", {**txn.ids(), "group_id": "g"})
    agent_api(
        "txn/offset-commit",
        {
            **txn.ids(),
            "group_id": "g",
            "offsets": [{"topic": "input", "partition": 0, "offset": 4}],
        },
    )
    pending = group_offsets_mirror(alice["cluster"], "g", offsets)
    assert pending["used"] == "committed in Floe: a transaction holds offsets of the group"
    assert pending["offsets"][0]["error_code"] == ErrorCode.NOT_COORDINATOR
    assert txn.end(True) == 0
    row = GroupOffset.objects.get(group_id="g")
    assert (row.committed_offset, row.mirrored) == (4, False)
    assert group_offsets_mirror(alice["cluster"], "g", offsets)["used"].startswith(
        "committed in Floe at "
    )
    assert GroupOffset.objects.get(group_id="g").committed_offset == 4
