"""Golden bytes, both ways: each frame is built field by field with struct.pack
(tests/protocol/wire.py), decoded to the exact expected dict (defaults included),
and the dict is encoded back to the exact same bytes."""

from __future__ import annotations

import copy
import uuid

from core.kafka import (
    ApiKey,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from tests.core.kafka.wire import (
    NO_TAGS,
    array,
    blob,
    boolean,
    carray,
    cblob,
    cstring,
    framed,
    i8,
    i16,
    i32,
    i64,
    request_header,
    string,
    tags,
    uvarint,
)

CLIENT = "golden-client"
TOPIC_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
ZERO_UUID = uuid.UUID(int=0)
BATCH = b"\x00" * 12 + b"fake-record-batch"


def check_request(api_key, version, body_bytes, expected, *, flexible, encode_body=None):
    payload = request_header(api_key, version, 42, CLIENT, flexible=flexible) + body_bytes
    header, decoded = decode_request(payload)
    assert header == RequestHeader(api_key, version, 42, CLIENT)
    assert decoded == expected
    assert list(decoded) == list(expected)  # every declared field, in declaration order
    body = expected if encode_body is None else encode_body
    assert encode_request(api_key, version, 42, CLIENT, body) == framed(payload)


def check_response(api_key, version, body_bytes, expected, *, header_tags, encode_body=None):
    payload = i32(42) + (NO_TAGS if header_tags else b"") + body_bytes
    correlation_id, decoded = decode_response(api_key, version, payload)
    assert correlation_id == 42
    assert decoded == expected
    body = expected if encode_body is None else encode_body
    assert encode_response(RequestHeader(api_key, version, 42, CLIENT), body) == framed(payload)


# --- ApiVersions --------------------------------------------------------------------


def test_api_versions_v0_request_is_just_a_header():
    expected = {"client_software_name": "", "client_software_version": ""}  # v3+ fields
    check_request(ApiKey.API_VERSIONS, 0, b"", expected, flexible=False)


def test_api_versions_v0_response():
    body = i16(0) + array([i16(0) + i16(3) + i16(9), i16(18) + i16(0) + i16(3)])
    expected = {
        "error_code": 0,
        "api_keys": [
            {"api_key": 0, "min_version": 3, "max_version": 9},
            {"api_key": 18, "min_version": 0, "max_version": 3},
        ],
        "throttle_time_ms": 0,
        "supported_features": [],
        "finalized_features_epoch": -1,
        "finalized_features": [],
        "zk_migration_ready": False,
    }
    check_response(ApiKey.API_VERSIONS, 0, body, expected, header_tags=False)


def test_api_versions_v3_request_uses_header_v2_and_compact_strings():
    body = cstring("floe-test") + cstring("1.0") + NO_TAGS
    expected = {"client_software_name": "floe-test", "client_software_version": "1.0"}
    check_request(ApiKey.API_VERSIONS, 3, body, expected, flexible=True)


def test_api_versions_v3_response_keeps_header_v0_and_writes_tagged_fields():
    # KIP-511: no tagged fields in the response header. KIP-584 features are tagged.
    body = (
        i16(0)
        + carray([i16(18) + i16(0) + i16(3) + NO_TAGS])
        + i32(7)
        + tags((1, i64(5)), (3, boolean(True)))
    )
    expected = {
        "error_code": 0,
        "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 3}],
        "throttle_time_ms": 7,
        "supported_features": [],
        "finalized_features_epoch": 5,
        "finalized_features": [],
        "zk_migration_ready": True,
    }
    check_response(ApiKey.API_VERSIONS, 3, body, expected, header_tags=False)


# --- Metadata -----------------------------------------------------------------------


def test_metadata_v1_request():
    body = array([string("orders")])
    expected = {
        "topics": [{"topic_id": ZERO_UUID, "name": "orders"}],
        "allow_auto_topic_creation": True,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
    check_request(ApiKey.METADATA, 1, body, expected, flexible=False)


def test_metadata_v1_request_null_topics_means_all_topics():
    _, decoded = decode_request(request_header(3, 1, 42, CLIENT, flexible=False) + i32(-1))
    assert decoded["topics"] is None


def test_metadata_v1_response():
    body = (
        array([i32(1) + string("agent-1") + i32(9092) + string(None)])
        + i32(1)
        + array(
            [
                i16(0)
                + string("orders")
                + boolean(False)
                + array([i16(0) + i32(0) + i32(1) + array([i32(1)]) + array([i32(1)])])
            ]
        )
    )
    expected = {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": 1, "host": "agent-1", "port": 9092, "rack": None}],
        "cluster_id": None,
        "controller_id": 1,
        "topics": [
            {
                "error_code": 0,
                "name": "orders",
                "topic_id": ZERO_UUID,
                "is_internal": False,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": 0,
                        "leader_id": 1,
                        "leader_epoch": -1,
                        "replica_nodes": [1],
                        "isr_nodes": [1],
                        "offline_replicas": [],
                    }
                ],
                "topic_authorized_operations": -(2**31),
            }
        ],
        "cluster_authorized_operations": -(2**31),
    }
    check_response(ApiKey.METADATA, 1, body, expected, header_tags=False)


def test_metadata_v12_request():
    body = (
        carray(
            [
                TOPIC_ID.bytes + cstring("orders") + NO_TAGS,
                ZERO_UUID.bytes + cstring(None) + NO_TAGS,
            ]
        )
        + boolean(False)
        + boolean(True)
        + NO_TAGS
    )
    expected = {
        "topics": [
            {"topic_id": TOPIC_ID, "name": "orders"},
            {"topic_id": ZERO_UUID, "name": None},
        ],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": True,
    }
    check_request(ApiKey.METADATA, 12, body, expected, flexible=True)


def test_metadata_v12_response():
    partition = (
        i16(0) + i32(3) + i32(2) + i32(17) + carray([i32(2), i32(1)]) + carray([i32(2)])
        + carray([i32(1)]) + NO_TAGS
    )  # fmt: skip
    body = (
        i32(0)
        + carray([i32(2) + cstring("agent-2") + i32(9093) + cstring("az-b") + NO_TAGS])
        + cstring("floe-cluster")
        + i32(2)
        + carray(
            [
                i16(0)
                + cstring("orders")
                + TOPIC_ID.bytes
                + boolean(False)
                + carray([partition])
                + i32(0x0F)
                + NO_TAGS
            ]
        )  # fmt: skip
        + NO_TAGS
    )
    expected = {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": 2, "host": "agent-2", "port": 9093, "rack": "az-b"}],
        "cluster_id": "floe-cluster",
        "controller_id": 2,
        "topics": [
            {
                "error_code": 0,
                "name": "orders",
                "topic_id": TOPIC_ID,
                "is_internal": False,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": 3,
                        "leader_id": 2,
                        "leader_epoch": 17,
                        "replica_nodes": [2, 1],
                        "isr_nodes": [2],
                        "offline_replicas": [1],
                    }
                ],
                "topic_authorized_operations": 0x0F,
            }
        ],
        "cluster_authorized_operations": -(2**31),
    }
    check_response(ApiKey.METADATA, 12, body, expected, header_tags=True)


# --- Produce ------------------------------------------------------------------------


def test_produce_v3_request():
    body = (
        string(None)
        + i16(-1)
        + i32(30000)
        + array([string("orders") + array([i32(0) + blob(BATCH), i32(1) + blob(None)])])
    )
    expected = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [
            {
                "name": "orders",
                "partition_data": [
                    {"index": 0, "records": BATCH},
                    {"index": 1, "records": None},
                ],
            }
        ],
    }
    check_request(ApiKey.PRODUCE, 3, body, expected, flexible=False)


def test_produce_v3_response():
    body = array([string("orders") + array([i32(0) + i16(0) + i64(100) + i64(-1)])]) + i32(0)
    expected = {
        "responses": [
            {
                "name": "orders",
                "partition_responses": [
                    {
                        "index": 0,
                        "error_code": 0,
                        "base_offset": 100,
                        "log_append_time_ms": -1,
                        "log_start_offset": -1,
                        "record_errors": [],
                        "error_message": None,
                    }
                ],
            }
        ],
        "throttle_time_ms": 0,
    }
    check_response(ApiKey.PRODUCE, 3, body, expected, header_tags=False)


def test_produce_v9_request():
    body = (
        cstring("txn-1")
        + i16(1)
        + i32(1500)
        + carray([cstring("orders") + carray([i32(4) + cblob(BATCH) + NO_TAGS]) + NO_TAGS])
        + NO_TAGS
    )
    expected = {
        "transactional_id": "txn-1",
        "acks": 1,
        "timeout_ms": 1500,
        "topic_data": [{"name": "orders", "partition_data": [{"index": 4, "records": BATCH}]}],
    }
    check_request(ApiKey.PRODUCE, 9, body, expected, flexible=True)


def test_produce_v9_response():
    partition = (
        i32(4) + i16(87) + i64(-1) + i64(-1) + i64(0)
        + carray([i32(2) + cstring("bad key") + NO_TAGS]) + cstring("batch rejected") + NO_TAGS
    )  # fmt: skip
    body = carray([cstring("orders") + carray([partition]) + NO_TAGS]) + i32(0) + NO_TAGS
    expected = {
        "responses": [
            {
                "name": "orders",
                "partition_responses": [
                    {
                        "index": 4,
                        "error_code": 87,
                        "base_offset": -1,
                        "log_append_time_ms": -1,
                        "log_start_offset": 0,
                        "record_errors": [
                            {"batch_index": 2, "batch_index_error_message": "bad key"}
                        ],
                        "error_message": "batch rejected",
                    }
                ],
            }
        ],
        "throttle_time_ms": 0,
    }
    check_response(ApiKey.PRODUCE, 9, body, expected, header_tags=True)


# --- Fetch --------------------------------------------------------------------------


def test_fetch_v4_request():
    body = (
        i32(-1) + i32(500) + i32(1) + i32(52428800) + i8(1)
        + array([string("orders") + array([i32(0) + i64(1234) + i32(1048576)])])
    )  # fmt: skip
    expected = {
        "cluster_id": None,
        "replica_id": -1,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 52428800,
        "isolation_level": 1,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": "orders",
                "topic_id": ZERO_UUID,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": 1234,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1048576,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    check_request(ApiKey.FETCH, 4, body, expected, flexible=False)


def test_fetch_v4_response():
    body = i32(0) + array(
        [
            string("orders")
            + array([i32(0) + i16(0) + i64(10) + i64(10) + array([i64(7) + i64(3)]) + blob(BATCH)])
        ]
    )
    expected = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [
            {
                "topic": "orders",
                "topic_id": ZERO_UUID,
                "partitions": [
                    {
                        "partition_index": 0,
                        "error_code": 0,
                        "high_watermark": 10,
                        "last_stable_offset": 10,
                        "log_start_offset": -1,
                        "diverging_epoch": {"epoch": -1, "end_offset": -1},
                        "current_leader": {"leader_id": -1, "leader_epoch": -1},
                        "snapshot_id": {"end_offset": -1, "epoch": -1},
                        "aborted_transactions": [{"producer_id": 7, "first_offset": 3}],
                        "preferred_read_replica": -1,
                        "records": BATCH,
                    }
                ],
            }
        ],
    }
    check_response(ApiKey.FETCH, 4, body, expected, header_tags=False)


def test_fetch_v13_request_with_topic_ids_and_a_tagged_cluster_id():
    partition = i32(2) + i32(5) + i64(900) + i32(4) + i64(-1) + i32(65536) + NO_TAGS
    body = (
        i32(-1) + i32(500) + i32(1) + i32(0x7FFFFFFF) + i8(0) + i32(77) + i32(3)
        + carray([TOPIC_ID.bytes + carray([partition]) + NO_TAGS])
        + carray([TOPIC_ID.bytes + carray([i32(1), i32(7)]) + NO_TAGS])
        + cstring("az-a")
        + tags((0, cstring("floe-cluster")))
    )  # fmt: skip
    expected = {
        "cluster_id": "floe-cluster",
        "replica_id": -1,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 0x7FFFFFFF,
        "isolation_level": 0,
        "session_id": 77,
        "session_epoch": 3,
        "topics": [
            {
                "topic": "",
                "topic_id": TOPIC_ID,
                "partitions": [
                    {
                        "partition": 2,
                        "current_leader_epoch": 5,
                        "fetch_offset": 900,
                        "last_fetched_epoch": 4,
                        "log_start_offset": -1,
                        "partition_max_bytes": 65536,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [{"topic": "", "topic_id": TOPIC_ID, "partitions": [1, 7]}],
        "rack_id": "az-a",
    }
    check_request(ApiKey.FETCH, 13, body, expected, flexible=True)


def test_fetch_v13_response_concatenates_record_batches_and_tags_the_leader():
    partition = (
        i32(2) + i16(0) + i64(1000) + i64(1000) + i64(0) + carray(None) + i32(-1)
        + cblob(BATCH + BATCH)
        + tags((1, i32(1) + i32(9) + NO_TAGS))
    )  # fmt: skip
    body = (
        i32(0)
        + i16(0)
        + i32(77)
        + carray([TOPIC_ID.bytes + carray([partition]) + NO_TAGS])
        + NO_TAGS
    )
    expected = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 77,
        "responses": [
            {
                "topic": "",
                "topic_id": TOPIC_ID,
                "partitions": [
                    {
                        "partition_index": 2,
                        "error_code": 0,
                        "high_watermark": 1000,
                        "last_stable_offset": 1000,
                        "log_start_offset": 0,
                        "diverging_epoch": {"epoch": -1, "end_offset": -1},
                        "current_leader": {"leader_id": 1, "leader_epoch": 9},
                        "snapshot_id": {"end_offset": -1, "epoch": -1},
                        "aborted_transactions": None,
                        "preferred_read_replica": -1,
                        "records": BATCH + BATCH,
                    }
                ],
            }
        ],
    }
    # The server hands several stored batches (bytes or memoryviews) as a list.
    to_encode = {
        "session_id": 77,
        "responses": [
            {
                "topic_id": str(TOPIC_ID),
                "partitions": [
                    {
                        "partition_index": 2,
                        "high_watermark": 1000,
                        "last_stable_offset": 1000,
                        "log_start_offset": 0,
                        "current_leader": {"leader_id": 1, "leader_epoch": 9},
                        "aborted_transactions": None,
                        "records": [BATCH, memoryview(BATCH)],
                    }
                ],
            }
        ],
    }
    check_response(ApiKey.FETCH, 13, body, expected, header_tags=True, encode_body=to_encode)


# --- Admin and groups -----------------------------------------------------------------


def test_create_topics_v5_request():
    topic = (
        cstring("orders") + i32(12) + i16(3)
        + carray([i32(0) + carray([i32(1), i32(2), i32(3)]) + NO_TAGS])
        + carray([cstring("retention.ms") + cstring("60000") + NO_TAGS,
                  cstring("cleanup.policy") + cstring(None) + NO_TAGS])
        + NO_TAGS
    )  # fmt: skip
    body = carray([topic]) + i32(5000) + boolean(True) + NO_TAGS
    expected = {
        "topics": [
            {
                "name": "orders",
                "num_partitions": 12,
                "replication_factor": 3,
                "assignments": [{"partition_index": 0, "broker_ids": [1, 2, 3]}],
                "configs": [
                    {"name": "retention.ms", "value": "60000"},
                    {"name": "cleanup.policy", "value": None},
                ],
            }
        ],
        "timeout_ms": 5000,
        "validate_only": True,
    }
    check_request(ApiKey.CREATE_TOPICS, 5, body, expected, flexible=True)


def test_create_topics_v5_response():
    config = (
        cstring("retention.ms")
        + cstring("60000")
        + boolean(False)
        + i8(5)
        + boolean(False)
        + NO_TAGS
    )
    ok = cstring("orders") + i16(0) + cstring(None) + i32(12) + i16(3) + carray([config]) + NO_TAGS
    failed = (
        cstring("bad topic") + i16(17) + cstring("illegal name") + i32(-1) + i16(-1) + carray(None)
        + tags((0, i16(40)))
    )  # fmt: skip
    body = i32(0) + carray([ok, failed]) + NO_TAGS
    expected = {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": "orders",
                "topic_id": ZERO_UUID,
                "error_code": 0,
                "error_message": None,
                "topic_config_error_code": 0,
                "num_partitions": 12,
                "replication_factor": 3,
                "configs": [
                    {
                        "name": "retention.ms",
                        "value": "60000",
                        "read_only": False,
                        "config_source": 5,
                        "is_sensitive": False,
                    }
                ],
            },
            {
                "name": "bad topic",
                "topic_id": ZERO_UUID,
                "error_code": 17,
                "error_message": "illegal name",
                "topic_config_error_code": 40,
                "num_partitions": -1,
                "replication_factor": -1,
                "configs": None,
            },
        ],
    }
    check_response(ApiKey.CREATE_TOPICS, 5, body, expected, header_tags=True)


def test_find_coordinator_v4_batches_keys():
    body = i8(0) + carray([cstring("group-a"), cstring("group-b")]) + NO_TAGS
    expected = {"key": "", "key_type": 0, "coordinator_keys": ["group-a", "group-b"]}
    check_request(ApiKey.FIND_COORDINATOR, 4, body, expected, flexible=True)

    coordinator = (
        cstring("group-a")
        + i32(1)
        + cstring("agent-1")
        + i32(9092)
        + i16(0)
        + cstring(None)
        + NO_TAGS
    )
    response = i32(0) + carray([coordinator]) + NO_TAGS
    expected_response = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "node_id": 0,
        "host": "",
        "port": 0,
        "coordinators": [
            {
                "key": "group-a",
                "node_id": 1,
                "host": "agent-1",
                "port": 9092,
                "error_code": 0,
                "error_message": None,
            }
        ],
    }
    check_response(ApiKey.FIND_COORDINATOR, 4, response, expected_response, header_tags=True)


def test_join_group_v6():
    body = (
        cstring("group-a") + i32(45000) + i32(300000) + cstring("") + cstring(None)
        + cstring("consumer") + carray([cstring("range") + cblob(b"\x00\x01meta") + NO_TAGS])
        + NO_TAGS
    )  # fmt: skip
    expected = {
        "group_id": "group-a",
        "session_timeout_ms": 45000,
        "rebalance_timeout_ms": 300000,
        "member_id": "",
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"\x00\x01meta"}],
        "reason": None,
    }
    check_request(ApiKey.JOIN_GROUP, 6, body, expected, flexible=True)

    member = cstring("member-1") + cstring("instance-1") + cblob(b"\x00\x01meta") + NO_TAGS
    response = (
        i32(0) + i16(0) + i32(3) + cstring("range") + cstring("member-1") + cstring("member-1")
        + carray([member]) + NO_TAGS
    )  # fmt: skip
    expected_response = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "generation_id": 3,
        "protocol_type": None,
        "protocol_name": "range",
        "leader": "member-1",
        "skip_assignment": False,
        "member_id": "member-1",
        "members": [
            {
                "member_id": "member-1",
                "group_instance_id": "instance-1",
                "metadata": b"\x00\x01meta",
            }
        ],
    }
    check_response(ApiKey.JOIN_GROUP, 6, response, expected_response, header_tags=True)


def test_describe_share_group_offsets_v1_null_topics_and_the_lag():
    # KIP-932 / KIP-1226: Topics null asks for every partition; v1 adds Lag (int64).
    body = carray([cstring("sg") + carray(None) + NO_TAGS,
                   cstring("sg2") + carray([cstring("work") + carray([i32(0)]) + NO_TAGS])
                   + NO_TAGS]) + NO_TAGS  # fmt: skip
    expected = {
        "groups": [
            {"group_id": "sg", "topics": None},
            {"group_id": "sg2", "topics": [{"topic_name": "work", "partitions": [0]}]},
        ]
    }
    check_request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, body, expected, flexible=True)

    partition = i32(0) + i64(40) + i32(0) + i64(7) + i16(0) + cstring(None) + NO_TAGS
    topic = cstring("work") + TOPIC_ID.bytes + carray([partition]) + NO_TAGS
    response = i32(0) + carray([cstring("sg") + carray([topic]) + i16(0) + cstring(None)
                                + NO_TAGS]) + NO_TAGS  # fmt: skip
    answer = {"partition_index": 0, "start_offset": 40, "leader_epoch": 0, "lag": 7,
              "error_code": 0, "error_message": None}  # fmt: skip
    expected_response = {
        "throttle_time_ms": 0,
        "groups": [
            {
                "group_id": "sg",
                "topics": [{"topic_name": "work", "topic_id": TOPIC_ID, "partitions": [answer]}],
                "error_code": 0,
                "error_message": None,
            }
        ],
    }
    check_response(
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, response, expected_response, header_tags=True
    )
    # v0 has no lag: the same answer without its 8 bytes (decoded: the default, -1).
    v0 = response.replace(i64(40) + i32(0) + i64(7), i64(40) + i32(0))
    decoded_v0 = copy.deepcopy(expected_response)
    decoded_v0["groups"][0]["topics"][0]["partitions"][0]["lag"] = -1
    check_response(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, v0, decoded_v0, header_tags=True,
                   encode_body=expected_response)  # fmt: skip


def test_alter_and_delete_share_group_offsets_v0():
    body = cstring("sg") + carray([cstring("work") + carray([i32(0) + i64(12) + NO_TAGS])
                                   + NO_TAGS]) + NO_TAGS  # fmt: skip
    expected = {
        "group_id": "sg",
        "topics": [{"topic_name": "work", "partitions": [{"partition_index": 0,
                                                          "start_offset": 12}]}],
    }  # fmt: skip
    check_request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, body, expected, flexible=True)
    partition = i32(0) + i16(0) + cstring(None) + NO_TAGS
    response = (i32(0) + i16(0) + cstring(None)
                + carray([cstring("work") + TOPIC_ID.bytes + carray([partition]) + NO_TAGS])
                + NO_TAGS)  # fmt: skip
    expected_response = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "responses": [{"topic_name": "work", "topic_id": TOPIC_ID, "partitions": [
            {"partition_index": 0, "error_code": 0, "error_message": None}]}],
    }  # fmt: skip
    check_response(
        ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, response, expected_response, header_tags=True
    )

    body = cstring("sg") + carray([cstring("work") + NO_TAGS]) + NO_TAGS
    expected = {"group_id": "sg", "topics": [{"topic_name": "work"}]}
    check_request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, body, expected, flexible=True)
    response = (i32(0) + i16(68) + cstring("not empty")
                + carray([cstring("work") + ZERO_UUID.bytes + i16(3) + cstring(None) + NO_TAGS])
                + NO_TAGS)  # fmt: skip
    expected_response = {
        "throttle_time_ms": 0,
        "error_code": 68,
        "error_message": "not empty",
        "responses": [{"topic_name": "work", "topic_id": ZERO_UUID, "error_code": 3,
                       "error_message": None}],
    }  # fmt: skip
    check_response(
        ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, response, expected_response, header_tags=True
    )


def test_long_compact_lengths_use_multibyte_varints():
    name = "t" * 300  # 301 does not fit one varint byte
    body = cstring("") + i16(1) + i32(1) + carray([cstring(name) + carray([]) + NO_TAGS]) + NO_TAGS
    assert uvarint(301) == b"\xad\x02"
    check_request(
        ApiKey.PRODUCE,
        9,
        body,
        {
            "transactional_id": "",
            "acks": 1,
            "timeout_ms": 1,
            "topic_data": [{"name": name, "partition_data": []}],
        },
        flexible=True,
    )
