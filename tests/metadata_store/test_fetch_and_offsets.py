"""Fetch plans, list offsets, delete records, producer ids, group offsets, topics."""

from __future__ import annotations

import base64

import pytest

from metadata_store import store
from metadata_store.agent_api import schemas
from tests.metadata_store.conftest import batch

pytestmark = pytest.mark.django_db


@pytest.fixture
def orders(agent_api, alice):
    """Topic 'orders' (2 partitions) with 3 batches of 10 records in partition 0."""
    tid = agent_api.create_topic("orders", 2)
    for i in range(3):
        agent_api(
            "commit",
            {
                "file_key": f"{alice['cluster'].public_id}/s/{i}.seg",
                "size": 300,
                "batches": [batch(tid, 0, 10, pos=i * 100, length=100, max_ts=1000 + i * 100)],
            },
        )
    return tid


def plan(agent_api, tid, offset, partition=0, max_bytes=10_000, total=10_000):
    answer = agent_api(
        "fetch-plan",
        {
            "partitions": [
                {"topic_id": tid, "partition": partition, "offset": offset, "max_bytes": max_bytes}
            ],
            "max_bytes": total,
        },
    )
    return answer["partitions"][0]


def test_it_plans_from_the_batch_holding_the_offset(agent_api, orders):
    answer = plan(agent_api, orders, 15)
    assert answer["error_code"] == 0 and answer["high_watermark"] == 30
    assert [b["base_offset"] for b in answer["batches"]] == [10, 20]
    assert answer["batches"][0]["file_key"].endswith("/s/1.seg")


def test_it_respects_byte_budgets_but_always_returns_one_batch(agent_api, orders):
    # Runs up to the budget plus the one crossing it (the agent trims that one batch by
    # batch); always at least one, whatever the budget (KIP-74).
    assert len(plan(agent_api, orders, 0, max_bytes=150)["batches"]) == 2
    assert len(plan(agent_api, orders, 0, max_bytes=100)["batches"]) == 1
    assert len(plan(agent_api, orders, 0, max_bytes=10, total=10)["batches"]) == 1


def test_at_the_high_watermark_there_is_nothing_yet(agent_api, orders):
    answer = plan(agent_api, orders, 30)
    assert answer["error_code"] == 0 and answer["batches"] == []


def test_out_of_range_offsets_are_refused(agent_api, orders):
    assert plan(agent_api, orders, 31)["error_code"] == 1
    agent_api(
        "delete-records", {"partitions": [{"topic_id": orders, "partition": 0, "offset": 12}]}
    )
    assert plan(agent_api, orders, 5)["error_code"] == 1
    assert plan(agent_api, orders, 12)["batches"][0]["base_offset"] == 10


def test_list_offsets(agent_api, orders):
    def answer(ts):
        return agent_api(
            "list-offsets", {"partitions": [{"topic_id": orders, "partition": 0, "timestamp": ts}]}
        )["partitions"][0]

    def offset(ts):
        return answer(ts)["offset"]

    assert (offset(-2), offset(-1)) == (0, 30)
    assert offset(1100) == 10 and offset(1050) == 10 and offset(5000) == -1
    # By time and for the max timestamp: the run holding the answer, for the agent to
    # narrow to the record (the control plane never sees records).
    largest = answer(-3)
    assert (largest["offset"], largest["timestamp"]) == (20, 1200)
    assert (largest["batch"]["base_offset"], largest["batch"]["last_offset"]) == (20, 29)
    assert answer(1050)["batch"]["rewrite"] is True


def test_delete_records_moves_the_log_start(agent_api, orders):
    answer = agent_api(
        "delete-records",
        {
            "partitions": [
                {"topic_id": orders, "partition": 0, "offset": 20},
                {"topic_id": orders, "partition": 0, "offset": 99},
            ]
        },
    )
    assert [p["error_code"] for p in answer["partitions"]] == [0, 1]
    assert answer["partitions"][0]["low_watermark"] == 20


def test_transactional_ids_bump_their_epoch(agent_api):
    first = agent_api("init-producer-id", {"transactional_id": "tx-1"})
    second = agent_api("init-producer-id", {"transactional_id": "tx-1"})
    plain = agent_api("init-producer-id", {"transactional_id": None})
    assert first["producer_id"] == second["producer_id"] != plain["producer_id"]
    assert second["producer_epoch"] == first["producer_epoch"] + 1


def test_group_offsets_round_trip(agent_api, orders):
    answer = agent_api(
        "offsets/commit",
        {
            "group_id": "g",
            "offsets": [
                {"topic": "orders", "partition": 0, "offset": 12, "metadata": "m"},
                {"topic": "nope", "partition": 0, "offset": 1},
            ],
        },
    )
    assert [o["error_code"] for o in answer["offsets"]] == [0, 3]
    fetched = agent_api("offsets/fetch", {"group_id": "g", "partitions": None})["offsets"]
    assert fetched == [
        {
            "topic": "orders",
            "partition": 0,
            "offset": 12,
            "leader_epoch": -1,
            "metadata": "m",
            "error_code": 0,
        }
    ]
    missing = agent_api(
        "offsets/fetch", {"group_id": "g", "partitions": [{"topic": "orders", "partition": 1}]}
    )
    assert missing["offsets"][0]["offset"] == -1


def test_offset_metadata_with_a_nul_is_kept_byte_for_byte(agent_api, orders):
    """Kafka's metadata is any string: one with a NUL travels as base64 and comes back so;
    without one it stays plain text both ways."""
    odd = "before\x00after\x01 é"
    encoded = base64.b64encode(odd.encode()).decode()
    agent_api(
        "offsets/commit",
        {
            "group_id": "nul",
            "offsets": [
                {"topic": "orders", "partition": 0, "offset": 3, "metadata_b64": encoded},
                {"topic": "orders", "partition": 1, "offset": 4, "metadata": "plain"},
            ],
        },
    )
    fetched = agent_api("offsets/fetch", {"group_id": "nul", "partitions": None})["offsets"]
    assert [(o["offset"], o.get("metadata"), o.get("metadata_b64")) for o in fetched] == [
        (3, None, encoded),
        (4, "plain", None),
    ]


def test_topic_admin_with_kafka_errors(agent_api):
    created = agent_api(
        "topics/create",
        {
            "topics": [
                {"name": "ok", "num_partitions": 2},
                {"name": "bad/name"},
                {"name": "ok2", "num_partitions": 0},
                {"name": "ok3", "configs": {"retention.ms": "soon"}},
                {"name": "ok4", "configs": {"colour": "red"}},
            ]
        },
    )
    assert [t["error_code"] for t in created["topics"]] == [0, 17, 37, 40, 40]
    assert agent_api("topics/create", {"topics": [{"name": "ok"}]})["topics"][0]["error_code"] == 36
    grown = agent_api(
        "topics/create-partitions",
        {"topics": [{"name": "ok", "count": 4}, {"name": "ok", "count": 1}]},
    )
    assert [t["error_code"] for t in grown["topics"]] == [0, 37]
    altered = agent_api(
        "topics/alter-configs",
        {
            "incremental": True,
            "topics": [
                {"name": "ok", "ops": [{"name": "cleanup.policy", "op": "set", "value": "compact"}]}
            ],
        },
    )
    assert altered["topics"][0]["error_code"] == 0
    configs = agent_api("topics/describe-configs", {"names": ["ok"]})["topics"][0]["configs"]
    policy = next(c for c in configs if c["name"] == "cleanup.policy")
    assert policy == {
        "name": "cleanup.policy",
        "value": "compact",
        "is_default": False,
        "read_only": False,
        "sensitive": False,
    }
    listed = agent_api("topics/list", {"names": None})["topics"]
    assert [(t["name"], t["partitions"]) for t in listed] == [("ok", 4)]
    deleted = agent_api("topics/delete", {"names": ["ok", "ghost"]})
    assert [t["error_code"] for t in deleted["topics"]] == [0, 3]


def test_heartbeat_lists_live_agents_and_config(agent_api, alice):
    agent_api("register", {"agent_id": "agt-1", "host": "127.0.0.1", "port": 9092})
    answer = agent_api(
        "heartbeat", {"agent_id": "agt-2", "host": "127.0.0.1", "port": 9093, "zone": "a"}
    )
    assert answer["cluster"]["id"] == alice["cluster"].public_id
    assert answer["cluster"]["config"]["max_flush_age_ms"] == 250
    assert [a["agent_id"] for a in answer["agents"]] == ["agt-1", "agt-2"]


def test_topics_can_be_listed_by_id(agent_api):
    tid = agent_api.create_topic("by-id")
    agent_api.create_topic("other")
    listed = agent_api("topics/list", {"topic_ids": [tid, "not-a-uuid"]})["topics"]
    assert [(t["name"], t["topic_id"]) for t in listed] == [("by-id", tid)]


def test_a_plan_reads_a_bounded_number_of_index_rows_however_long_the_partition(agent_api, alice):
    """A consumer catching up from offset 0 of a partition of 4,000 runs: the plan reads
    the runs from its offset on in order and stops at FETCH_PLAN_MAX_RUNS, or sooner when
    the budget is spent — not every run past the offset (a bitmap scan of the partition,
    then a sort: work that grows with the partition)."""
    tid = agent_api.create_topic("long", 1)
    cluster_id = alice["cluster"].pk
    batches = schemas.commit_batches([batch(tid, 0, 10, pos=0, length=1000)])
    ids = store.partition_ids(cluster_id, batches)
    commits = [
        store.file_commit_prepare(
            file_key=f"{alice['cluster'].public_id}/long/{i}.seg", size=1000, batches=batches,
            ids=ids,
        )
        for i in range(4000)
    ]  # fmt: skip
    with store._cursor() as cursor:
        cursor.execute(store.COMMIT_SQL, store.commit_params(cluster_id, commits))

    def heap_rows_read() -> int:
        """floe_batch rows fetched by this transaction so far."""
        with store._cursor() as cursor:
            cursor.execute("SELECT pg_stat_get_xact_tuples_fetched('floe_batch'::regclass)")
            return cursor.fetchone()[0]

    before = heap_rows_read()
    answer = plan(agent_api, tid, 0, max_bytes=1 << 20, total=50 << 20)
    after = heap_rows_read()
    with store._cursor() as cursor:
        # The test's transaction goes on with the planner's usual settings.
        cursor.execute(
            "SELECT current_setting('enable_bitmapscan'), current_setting('enable_seqscan')"
        )
        assert cursor.fetchone() == ("on", "on")
    assert answer["high_watermark"] == 40_000
    assert [b["base_offset"] for b in answer["batches"]] == list(range(0, 1280, 10))
    assert after - before <= store.FETCH_PLAN_MAX_RUNS + 1, after - before
    # And no further than the budget needs: 10 runs of 1,000 bytes.
    answer = plan(agent_api, tid, 0, max_bytes=10_000, total=50 << 20)
    read = heap_rows_read()
    assert [b["base_offset"] for b in answer["batches"]] == list(range(0, 100, 10))
    assert read - after < store.FETCH_PLAN_MAX_RUNS // 2, read - after


def test_producer_ids_tell_nothing_of_other_organizations(agent_api, bob_agent_api):
    """Producer ids were one sequence for every organization: the gap between two of
    Alice's ids counted the producers everyone else started meanwhile (issue 25)."""
    first = agent_api("init-producer-id", {"transactional_id": None})["producer_id"]
    bobs = [bob_agent_api("init-producer-id", {})["producer_id"] for _ in range(5)]
    bobs.append(bob_agent_api("init-producer-id", {"transactional_id": "tx"})["producer_id"])
    second = agent_api("init-producer-id", {"transactional_id": None})["producer_id"]
    ids = [first, *bobs, second]
    assert len(set(ids)) == len(ids) and all(0 < i < 2**63 for i in ids)
    assert second - first != len(bobs) + 1
    # Random over 60 bits: no two are near each other (a chance of about 1 in 10^10).
    gaps = [abs(a - b) for a in ids for b in ids if a != b]
    assert min(gaps) > 10**6, sorted(ids)
