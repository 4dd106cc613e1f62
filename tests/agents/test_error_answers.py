"""The answers to requests that fail as a whole, built from the message schemas
(`core.kafka.error_answers`), against the bytes the hand-written answers gave.

`error_answers.json` holds, for every API and version Floe serves (a request with a
non-default value in every field, and one with nulls where the schema allows them), the
SHA-256 (first 32 hex digits) of the encoded answer giving error 29 to every part of the
request — captured from the hand-written per-API answers (`agents/handlers/errors.py`,
`transactions.py`, `groups.py`, `group_offsets.py`, `share.py`, `share_offsets.py`,
`produce.py`) before they were replaced; null where there was no answer (the connection
is closed). The named cases below pin Kafka's shapes in the open.

`NOW_ANSWERED`: the ACL and SCRAM-credential APIs, whose failures closed the connection
(no hand-written answer), are now answered with the code as Kafka answers them (the ACL
layer's denials of them were already these answers).
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import uuid
from typing import Any

import pytest

from core.kafka import ApiKey, ErrorCode
from core.kafka.codec import decode_request, encode_request, encode_response_body
from core.kafka.error_answers import OPERATIONS_OMITTED, SHAPES, error_answer
from core.kafka.messages import APIS
from tests.core.kafka.samples import sample_body

GOLDEN: dict[str, str | None] = json.loads(
    (pathlib.Path(__file__).parent / "error_answers.json").read_text()
)
CODE = 29
NOW_ANSWERED = {
    ApiKey.DESCRIBE_ACLS,
    ApiKey.CREATE_ACLS,
    ApiKey.DELETE_ACLS,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
}


def _cases() -> list[tuple[str, int, int, bool]]:
    return [
        (f"{api.key.name} v{v}{' nulls' if nulls else ''}", api.key, v, nulls)
        for _, api in sorted(APIS.items())
        for v in range(api.versions[0], api.versions[1] + 1)
        for nulls in (False, True)
    ]


def _request(key: int, version: int, nulls: bool) -> tuple[Any, dict[str, Any]]:
    """The request as a handler sees it: a sample body, encoded and decoded."""
    frame = encode_request(
        key, version, 7, "c", sample_body(APIS[key].request, version, nulls=nulls)
    )
    return decode_request(frame[4:])


def test_every_api_and_version_is_in_the_golden_answers():
    assert sorted(GOLDEN) == sorted(name for name, *_ in _cases())


@pytest.mark.parametrize(("name", "key", "version", "nulls"), _cases(), ids=lambda c: str(c))
def test_the_answer_is_the_hand_written_answers_bytes(name, key, version, nulls):
    header, body = _request(key, version, nulls)
    answer = error_answer(key, version, body, CODE)
    if key in NOW_ANSWERED:
        assert GOLDEN[name] is None and answer is not None
        encode_response_body(header, answer)
        assert _codes(answer) and set(_codes(answer)) == {CODE}
        return
    if GOLDEN[name] is None:
        assert answer is None
        return
    assert answer is not None, name
    encoded = encode_response_body(header, answer)
    assert hashlib.sha256(encoded).hexdigest()[:32] == GOLDEN[name], answer


def _codes(value: Any) -> list[int]:
    if isinstance(value, dict):
        return [c for k, v in value.items() for c in ([v] if k == "error_code" else _codes(v))]
    if isinstance(value, list):
        return [c for v in value for c in _codes(v)]
    return []


def test_apis_without_an_answer_close_the_connection_instead():
    without = {ApiKey(k).name for k in APIS if ApiKey(k) not in SHAPES or SHAPES[k].closes}
    assert without == {"METADATA", "API_VERSIONS", "SASL_HANDSHAKE", "SASL_AUTHENTICATE"}
    assert error_answer(ApiKey.METADATA, 12, {"topics": None}, CODE) is None


def test_a_produce_request_with_acks_0_gets_no_answer():
    body = {"acks": 0, "topic_data": [{"name": "t", "partition_data": [{"index": 0}]}]}
    assert error_answer(ApiKey.PRODUCE, 9, body, CODE) is None
    answer = error_answer(ApiKey.PRODUCE, 9, {**body, "acks": -1}, CODE)
    assert answer is not None
    assert answer["responses"] == [
        {
            "name": "t",
            "partition_responses": [
                {
                    "index": 0,
                    "error_code": CODE,
                    "base_offset": -1,
                    "log_append_time_ms": -1,
                    "log_start_offset": -1,
                    "record_errors": [],
                    "error_message": None,
                }
            ],
        }
    ]


def test_each_partition_of_each_topic_gets_the_code():
    body = {
        "topics": [
            {"name": "a", "partitions": [{"partition_index": 0}, {"partition_index": 3}]},
            {"name": "b", "partitions": [{"partition_index": 1}]},
        ]
    }
    answer = error_answer(ApiKey.LIST_OFFSETS, 1, body, CODE)
    assert answer is not None
    assert [
        (t["name"], p["partition_index"], p["error_code"])
        for t in answer["topics"]
        for p in t["partitions"]
    ] == [("a", 0, CODE), ("a", 3, CODE), ("b", 1, CODE)]


def test_delete_topics_answers_names_before_v6_and_names_with_ids_after():
    before = error_answer(ApiKey.DELETE_TOPICS, 5, {"topic_names": ["a", "b"]}, CODE)
    assert before is not None
    assert [(r["name"], r["error_code"]) for r in before["responses"]] == [("a", CODE), ("b", CODE)]
    topic_id = uuid.uuid4()
    after = error_answer(
        ApiKey.DELETE_TOPICS, 6, {"topics": [{"name": None, "topic_id": topic_id}]}, CODE
    )
    assert after is not None
    assert [(r["name"], r["topic_id"], r["error_code"]) for r in after["responses"]] == [
        (None, topic_id, CODE)
    ]


def test_find_coordinator_answers_the_request_before_v4_and_each_key_after():
    assert error_answer(ApiKey.FIND_COORDINATOR, 3, {"key": "g"}, CODE) == {
        "throttle_time_ms": 0,
        "error_code": CODE,
        "error_message": None,
        "node_id": -1,
        "host": "",
        "port": -1,
    }
    answer = error_answer(ApiKey.FIND_COORDINATOR, 4, {"coordinator_keys": ["g", "h"]}, CODE)
    assert answer is not None
    assert [
        (c["key"], c["node_id"], c["port"], c["error_code"]) for c in answer["coordinators"]
    ] == [
        ("g", -1, -1, CODE),
        ("h", -1, -1, CODE),
    ]


def test_add_partitions_to_txn_answers_each_partition_up_to_v3_and_the_request_after():
    old = error_answer(
        ApiKey.ADD_PARTITIONS_TO_TXN,
        3,
        {"v3_and_below_topics": [{"name": "t", "partitions": [0, 2]}]},
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    )
    assert old is not None
    assert old["results_by_topic_v3_and_below"] == [
        {
            "name": "t",
            "results_by_partition": [
                {"partition_index": 0, "partition_error_code": 53},
                {"partition_index": 2, "partition_error_code": 53},
            ],
        }
    ]
    new = error_answer(ApiKey.ADD_PARTITIONS_TO_TXN, 4, {"transactions": [{}]}, 53)
    assert new == {"throttle_time_ms": 0, "error_code": 53, "results_by_transaction": []}


def test_join_group_keeps_the_members_id_and_has_no_generation():
    answer = error_answer(ApiKey.JOIN_GROUP, 9, {"member_id": "m-1"}, CODE)
    assert answer is not None
    assert (answer["member_id"], answer["generation_id"], answer["members"]) == ("m-1", -1, [])


def test_alter_user_scram_credentials_answers_each_user_once():
    body = {
        "deletions": [{"name": "bob", "mechanism": 1}, {"name": "alice", "mechanism": 2}],
        "upsertions": [{"name": "alice", "mechanism": 1}, {"name": "carol", "mechanism": 1}],
    }
    answer = error_answer(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, body, 31, "denied")
    assert answer == {
        "throttle_time_ms": 0,
        "results": [
            {"user": u, "error_code": 31, "error_message": "denied"}
            for u in ("bob", "alice", "carol")
        ],
    }


def test_a_message_fills_the_error_messages():
    body = {"groups": [{"group_id": "g", "topics": []}]}
    answer = error_answer(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, body, 30, "no")
    assert answer is not None
    assert answer["groups"] == [
        {"group_id": "g", "topics": [], "error_code": 30, "error_message": "no"}
    ]
    describe = error_answer(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": ["g"]}, 30)
    assert describe is not None
    assert describe["groups"][0]["authorized_operations"] == OPERATIONS_OMITTED
