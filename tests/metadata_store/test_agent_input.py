"""The agent API trusts nothing an agent sends: malformed input is a 400 naming the
field, the metadata store is untouched, and the database itself refuses what a missed
check would let through."""

from __future__ import annotations

import json

import pytest
from django.db import IntegrityError, connection, transaction

from metadata_store.models import Batch, Partition, SegmentFile
from tests.metadata_store.conftest import batch

pytestmark = pytest.mark.django_db

FIVE_THOUSAND = 5_000


def _key(alice, name: str) -> str:
    return f"{alice['cluster'].public_id}/segments/{name}.seg"


@pytest.fixture
def filled(agent_api, alice):
    """A topic whose partition holds 5,000 acknowledged records in 50 batches."""
    tid = agent_api.create_topic("orders")
    batches = [batch(tid, 0, 100, pos=i * 100) for i in range(50)]
    answer = agent_api(
        "commit", {"file_key": _key(alice, "good"), "size": 50 * 100, "batches": batches}
    )
    assert answer["batches"][-1]["base_offset"] == FIVE_THOUSAND - 100
    return tid


def _watermarks(tid) -> tuple[int, int]:
    p = Partition.objects.get(topic_id=tid, index=0)
    return p.log_start_offset, p.high_watermark


MALFORMED = [
    pytest.param({"records": -1_000_000}, "records", id="negative-records"),
    pytest.param({"records": 0}, "records", id="zero-records"),
    pytest.param({"records": 9_000_000_000_000_000_000}, "records", id="huge-records"),
    pytest.param({"pos": -100}, "pos", id="negative-pos"),
    pytest.param({"length": -100}, "len", id="negative-len"),
    pytest.param({"length": 0}, "len", id="empty-batch"),
    pytest.param({"pos": 950, "length": 100}, "size", id="past-the-file"),
    pytest.param({"max_ts": 2**64}, "max_ts", id="timestamp-out-of-int64"),
    pytest.param({"producer_epoch": 40_000}, "producer_epoch", id="epoch-out-of-int16"),
    pytest.param({"producer_id": -7}, "producer_id", id="negative-producer-id"),
    pytest.param({"base_sequence": -2}, "base_sequence", id="negative-sequence"),
    pytest.param({"partition": -1}, "partition", id="negative-partition"),
    pytest.param({"records": "12"}, "records", id="records-as-string"),
    pytest.param({"records": True}, "records", id="records-as-bool"),
    pytest.param({"topic_id": "not-a-uuid"}, "topic_id", id="topic-id-not-a-uuid"),
    pytest.param({"batch_count": 0}, "batch_count", id="no-batches"),
    pytest.param({"batch_count": 11}, "batch_count", id="more-batches-than-records"),
    pytest.param(
        {"batch_count": 2, "producer_id": 4, "producer_epoch": 0, "base_sequence": 0},
        "batch_count",
        id="several-idempotent-batches-as-one",
    ),
    pytest.param(
        {"batch_count": 2, "transactional": True}, "batch_count", id="several-in-a-transaction"
    ),
]


@pytest.mark.parametrize(("change", "field"), MALFORMED)
def test_a_malformed_commit_is_refused_naming_the_field_and_changes_nothing(
    agent_api, alice, filled, change, field
):
    entry = batch(filled, 0, 10, pos=0)
    if "length" in change:
        entry["len"] = change.pop("length")
    entry.update(change)
    before = _watermarks(filled)
    response = agent_api.raw(
        "commit", {"file_key": _key(alice, "bad"), "size": 1000, "batches": [entry]}
    )
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == "application/json"
    assert field in response.json()["error"]
    assert _watermarks(filled) == before == (0, FIVE_THOUSAND)
    assert not SegmentFile.objects.filter(key=_key(alice, "bad")).exists()


def test_overlapping_batches_in_one_file_are_refused(agent_api, alice, filled):
    response = agent_api.raw(
        "commit",
        {
            "file_key": _key(alice, "overlap"),
            "size": 1000,
            "batches": [batch(filled, 0, 1, pos=0, length=100), batch(filled, 0, 1, pos=50)],
        },
    )
    assert response.status_code == 400 and "overlaps" in response.json()["error"]
    assert _watermarks(filled) == (0, FIVE_THOUSAND)


def test_the_partition_survives_the_reported_attack_and_keeps_counting(agent_api, alice, filled):
    """The issue's sequence: negative records, negative pos/len, a range past the file —
    then a good commit continues at offset 5,000 and the old records still read."""
    for i, bad in enumerate(
        [
            batch(filled, 0, -1_000_000),
            batch(filled, 0, 5, pos=-10, length=-10),
            batch(filled, 0, 5, pos=10_000, length=100),
        ]
    ):
        response = agent_api.raw(
            "commit", {"file_key": _key(alice, f"bad{i}"), "size": 100, "batches": [bad]}
        )
        assert response.status_code == 400
    good = agent_api(
        "commit", {"file_key": _key(alice, "next"), "size": 100, "batches": [batch(filled, 0, 5)]}
    )
    assert good["batches"][0] == {
        "error_code": 0,
        "base_offset": FIVE_THOUSAND,
        "log_start_offset": 0,
    }
    plan = agent_api(
        "fetch-plan",
        {"partitions": [{"topic_id": filled, "partition": 0, "offset": 4990}]},
    )["partitions"][0]
    assert plan["error_code"] == 0 and plan["high_watermark"] == FIVE_THOUSAND + 5
    run = plan["batches"][0]  # one run: the 50 batches lie side by side in one file
    assert run["base_offset"] <= 4990 <= run["last_offset"] == FIVE_THOUSAND - 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"file_key": "x", "size": 1, "batches": []}, "file_key"),
        ({"size": 1, "batches": []}, "file_key"),
        ({"file_key": "k", "size": -1, "batches": []}, "size"),
        ({"file_key": "k", "size": 1, "batches": {}}, "batches"),
    ],
)
def test_commit_envelopes_are_checked(agent_api, alice, body, field):
    if body.get("file_key") == "k":
        body["file_key"] = _key(alice, "k")
    response = agent_api.raw("commit", body)
    assert response.status_code == 400 and field in response.json()["error"]


def test_a_commit_with_too_many_batches_is_refused(agent_api, alice):
    tid = agent_api.create_topic("many")
    entry = batch(tid, 0, 1, length=1)
    entries = [{**entry, "pos": i} for i in range(100_001)]
    response = agent_api.raw(
        "commit", {"file_key": _key(alice, "many"), "size": 100_001, "batches": entries}
    )
    assert response.status_code == 400 and "batches" in response.json()["error"]
    assert not Batch.objects.exists()


@pytest.mark.parametrize(
    ("call", "body", "field"),
    [
        ("fetch-plan", {"partitions": [{"topic_id": "x", "partition": 0}]}, "topic_id"),
        ("fetch-plan", {"partitions": "all"}, "partitions"),
        ("list-offsets", {"partitions": [{"partition": 0}]}, "topic_id"),
        ("delete-records", {"partitions": [{"topic_id": None, "partition": 0}]}, "topic_id"),
        ("init-producer-id", {"transactional_id": "t" * 300}, "transactional_id"),
        ("register", {"agent_id": ""}, "agent_id"),
        ("heartbeat", {"agent_id": "a", "port": 70_000}, "port"),
        ("topics/create", {"topics": [{"num_partitions": 3}]}, "name"),
        ("topics/alter-configs", {"topics": [{"name": "t", "ops": [{"op": "x"}]}]}, "op"),
        ("offsets/commit", {"group_id": "g", "offsets": [{"topic": "t"}]}, "partition"),
        ("groups/report", {"agent_id": "a", "groups": [{"group_id": ""}]}, "group_id"),
        ("groups/delete", {"group_ids": "g"}, "group_ids"),
        ("sasl/credential", {"username": 5}, "username"),
        ("acls/create", {"acls": [1]}, "acls"),
    ],
)
def test_every_endpoint_validates_its_body(agent_api, call, body, field):
    response = agent_api.raw(call, body)
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]


@pytest.mark.parametrize("call", ["commit", "fetch-plan", "topics/list", "groups/report"])
def test_deeply_nested_json_is_a_400_not_a_500(agent_api, call):
    response = agent_api.raw(call, "[" * 100_000 + "]" * 100_000)
    assert response.status_code == 400 and response.json()["error"]


def test_an_unknown_call_is_a_json_404(agent_api):
    response = agent_api.raw("no-such-call", {})
    assert response.status_code == 404 and "no-such-call" in response.json()["error"]


def test_a_get_is_a_json_405(agent_api, alice):
    response = agent_api.client.get(
        "/agent/v1/commit", HTTP_AUTHORIZATION=f"Bearer {alice['agent_key']}"
    )
    assert response.status_code == 405 and "POST" in response.json()["error"]


@pytest.mark.parametrize("debug", [True, False])
def test_a_server_error_is_a_short_json_reason_even_with_debug_on(
    agent_api, alice, settings, debug, inject_trigger
):
    """A failure of ours (here: the database refuses the insert) is a 5xx the agent can
    read and retry, never Django's 170 KB debug page."""
    settings.DEBUG = debug
    tid = agent_api.create_topic("orders")
    inject_trigger("floe_batch", "RAISE EXCEPTION 'injected failure';")
    response = agent_api.raw(
        "commit", {"file_key": _key(alice, "a"), "size": 100, "batches": [batch(tid, 0, 1)]}
    )
    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    assert len(response.content) < 300 and "commit" in response.json()["error"]


# --- the database's own guard --------------------------------------------------------


def _refused(sql: str, params: list) -> None:
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)


def test_the_database_refuses_negative_or_crossed_watermarks(filled):
    pid = Partition.objects.get(topic_id=filled, index=0).pk
    _refused("UPDATE floe_partition SET high_watermark = -994995 WHERE id = %s", [pid])
    _refused("UPDATE floe_partition SET log_start_offset = -1 WHERE id = %s", [pid])
    _refused("UPDATE floe_partition SET log_start_offset = high_watermark + 1 WHERE id = %s", [pid])
    assert _watermarks(filled) == (0, FIVE_THOUSAND)


def test_the_database_refuses_to_move_a_watermark_back(filled):
    pid = Partition.objects.get(topic_id=filled, index=0).pk
    _refused("UPDATE floe_partition SET high_watermark = 10 WHERE id = %s", [pid])
    with connection.cursor() as cursor:
        cursor.execute("UPDATE floe_partition SET log_start_offset = 100 WHERE id = %s", [pid])
    _refused("UPDATE floe_partition SET log_start_offset = 50 WHERE id = %s", [pid])
    assert _watermarks(filled) == (100, FIVE_THOUSAND)


@pytest.mark.parametrize(
    ("base", "last", "count", "pos", "length"),
    [
        pytest.param(-5, 0, 1, 0, 1, id="negative-offset"),
        pytest.param(9010, 9009, 1, 0, 1, id="last-before-base"),
        pytest.param(9000, 9004, 0, 0, 1, id="no-records"),
        pytest.param(9000, 9000, 1, -1, 1, id="negative-position"),
        pytest.param(9000, 9000, 1, 0, 0, id="empty"),
    ],
)
def test_the_database_refuses_impossible_index_rows(filled, base, last, count, pos, length):
    pid = Partition.objects.get(topic_id=filled, index=0).pk
    file_id = SegmentFile.objects.first().pk
    _refused(
        "INSERT INTO floe_batch (partition_id, base_offset, last_offset, position, length,"
        " record_count, max_timestamp, file_id) VALUES (%s, %s, %s, %s, %s, %s, 0, %s)",
        [pid, base, last, pos, length, count, file_id],
    )


def test_the_rest_api_refuses_deeply_nested_json(api, alice):
    response = api(alice["admin"]).post(
        "/api/v1/clusters/",
        data="[" * 100_000 + "]" * 100_000,
        content_type="application/json",
    )
    assert response.status_code == 400
    assert "nested" in json.loads(response.content)["error"]


@pytest.mark.parametrize(
    ("call", "body"),
    [
        ("init-producer-id", {"transactional_id": "tx\x00"}),
        ("heartbeat", {"agent_id": "agt\x00", "host": "h", "port": 1}),
        ("offsets/fetch", {"group_id": "g\x00", "partitions": None}),
    ],
)
def test_a_nul_in_any_string_is_a_400_not_a_database_error(agent_api, call, body):
    # Found by the agent-API fuzzer: PostgreSQL text cannot hold NUL, so this was a 500.
    response = agent_api.raw(call, json.dumps(body))
    assert response.status_code == 400, response.content
    assert "NUL" in response.json()["error"]
