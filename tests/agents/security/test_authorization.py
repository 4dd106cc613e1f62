"""The ACL check in front of the handlers, in process: every API and version, denied and
allowed, with answers that the codec can encode (no agent, no control plane)."""

from __future__ import annotations

import asyncio
import copy
import uuid
from typing import Any

import pytest

from agents.read_path import partition_answer
from agents.security.authorization import OPEN_APIS, RULES, authorized_call
from agents.security.session import CURRENT_SESSION, Security, Session
from agents.topics import TopicInfo
from core.kafka import SUPPORTED_VERSIONS, ApiKey, RequestHeader, encode_response
from core.kafka.codec import EncodedResponse, decode_response, encode_response_body
from core.kafka.errors import ErrorCode
from core.kafka.messages import APIS
from core.security.acl import (
    AclBinding,
    AclOperation,
    AclPermission,
    Authorizer,
    PatternType,
    ResourceType,
)
from tests.core.kafka.samples import sample_body

DENIALS = {
    ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


class FakeTopics:
    """Every name exists (or none does); ids resolve to `topic-<id>`."""

    def __init__(self, *, exist: bool = True) -> None:
        self.exist = exist

    def _info(self, name: str, topic_id: uuid.UUID | None = None) -> TopicInfo:
        return TopicInfo(name, topic_id or uuid.uuid5(uuid.NAMESPACE_DNS, name), 3)

    async def by_names(self, names, *, need_partition=None):
        return {n: self._info(n) if self.exist else None for n in names}

    async def by_ids(self, ids):
        return {i: self._info(f"topic-{i}", i) for i in ids}


class FakeCtx:
    def __init__(self, *, acls_enabled: bool = True, topics_exist: bool = True) -> None:
        self.cluster_config = {"acls_enabled": acls_enabled, "auto_create_topics": True}
        self.topics = FakeTopics(exist=topics_exist)
        self.auto_create_topics = True


class StaticAcls:
    def __init__(self, bindings) -> None:
        self._authorizer = Authorizer(bindings)

    async def authorizer(self) -> Authorizer:
        return self._authorizer

    def invalidate(self) -> None:
        pass


def binding(principal, operation, resource_type=ResourceType.TOPIC, name="*", **kw) -> AclBinding:
    return AclBinding(
        resource_type,
        name,
        kw.get("pattern", PatternType.LITERAL),
        principal,
        kw.get("host", "*"),
        operation,
        kw.get("permission", AclPermission.ALLOW),
    )


def session(principal="User:alice", bindings=(), **flags) -> Session:
    security = Security()
    security.acls = StaticAcls(bindings)  # type: ignore[assignment]
    s = Session(security, peer_host="10.0.0.7", principal=principal)
    s.superuser = flags.get("superuser", False)
    s.read_only = flags.get("read_only", False)
    return s


class Recorder:
    """A handler that remembers what it was asked and answers `answer` (or {})."""

    def __init__(self, answer: dict | None = None) -> None:
        self.bodies: list[dict] = []
        self.answer = answer

    async def __call__(self, ctx, header, body):
        self.bodies.append(body)
        return dict(self.answer) if self.answer is not None else {}


def run(s: Session, ctx, api_key: int, version: int, body: dict, handler) -> dict | None:
    header = RequestHeader(api_key, version, 1, "test")

    async def go():
        CURRENT_SESSION.set(s)
        return await authorized_call(handler, ctx, header, body)

    return asyncio.run(go())


def _error_codes(value: Any) -> list[int]:
    """Every `error_code` anywhere in a decoded response."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            # AddPartitionsToTxn v0-3 has only per-partition codes.
            if key in ("error_code", "partition_error_code") and isinstance(item, int):
                found.append(item)
            else:
                found += _error_codes(item)
    elif isinstance(value, list):
        for item in value:
            found += _error_codes(item)
    return found


def _list_sizes(value: Any) -> int:
    """How many items the lists of a request body hold, all levels together."""
    if isinstance(value, dict):
        return sum(_list_sizes(v) for v in value.values())
    if isinstance(value, list):
        return len(value) + sum(_list_sizes(v) for v in value)
    return 0


CASES = [
    (api_key, version, nulls)
    for api_key in sorted(RULES)
    if api_key in SUPPORTED_VERSIONS
    for version in range(SUPPORTED_VERSIONS[api_key][0], SUPPORTED_VERSIONS[api_key][1] + 1)
    for nulls in (False, True)
]


@pytest.mark.parametrize("api_key, version, nulls", CASES)
def test_a_principal_without_acls_gets_authorization_errors_the_codec_can_send(
    api_key, version, nulls
):
    body = sample_body(APIS[api_key].request, version, nulls=nulls)
    if api_key == ApiKey.PRODUCE:
        body["acks"] = -1
    for index, resource in enumerate(body.get("resources") or []):  # config APIs
        resource["resource_type"] = (2, 4)[index % 2]  # a topic and a broker
    handler = Recorder()
    response = run(session(), FakeCtx(), api_key, version, body, handler)
    assert response is not None
    header = RequestHeader(api_key, version, 1, "test")
    _, decoded = decode_response(api_key, version, encode_response(header, response)[4:])
    codes = _error_codes(decoded)
    # Whatever reached the handler carried nothing the principal may not touch.
    for seen in handler.bodies:
        lists_before, lists_after = _list_sizes(body), _list_sizes(seen)
        assert (
            lists_after < lists_before
            or lists_before == 0
            or api_key
            in (
                ApiKey.METADATA,
                ApiKey.LIST_GROUPS,
                ApiKey.OFFSET_FETCH,
                ApiKey.LIST_TRANSACTIONS,
            )
        )
    if handler.bodies and not DENIALS & set(codes):
        # Nothing was denied only when nothing was named (e.g. "all topics", all groups).
        assert api_key in (
            ApiKey.METADATA,
            ApiKey.LIST_GROUPS,
            ApiKey.OFFSET_FETCH,
            ApiKey.LIST_TRANSACTIONS,
        )
    else:
        assert codes and set(codes) <= DENIALS | {0}, (codes, decoded)
        assert DENIALS & set(codes)


@pytest.mark.parametrize("api_key, version, nulls", CASES)
def test_allowed_requests_reach_the_handler_unchanged(api_key, version, nulls):
    body = sample_body(APIS[api_key].request, version, nulls=nulls)
    everything = [
        binding("User:*", AclOperation.ALL, resource_type)
        for resource_type in (
            ResourceType.TOPIC,
            ResourceType.GROUP,
            ResourceType.CLUSTER,
            ResourceType.TRANSACTIONAL_ID,
        )
    ]
    everything[2] = binding("User:*", AclOperation.ALL, ResourceType.CLUSTER, "kafka-cluster")
    handler = Recorder({"marker": True})
    response = run(session(bindings=everything), FakeCtx(), api_key, version, body, handler)
    assert handler.bodies == [body]
    assert response is not None and response["marker"] is True


def test_superusers_and_disabled_acls_skip_the_check():
    body = {"topics": None, "allow_auto_topic_creation": True}
    for s, ctx in (
        (session(superuser=True), FakeCtx()),
        (session(), FakeCtx(acls_enabled=False)),
    ):
        handler = Recorder({"topics": [{"name": "secret"}]})
        assert run(s, ctx, ApiKey.METADATA, 12, body, handler) == {"topics": [{"name": "secret"}]}


def test_open_apis_need_no_acl():
    for api_key in OPEN_APIS:
        handler = Recorder({"ok": 1})
        assert run(session(), FakeCtx(), api_key, 0, {}, handler) == {"ok": 1}


def produce_body(*topics: str) -> dict:
    return {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 1000,
        "topic_data": [
            {"name": t, "partition_data": [{"index": 0, "records": b"x"}]} for t in topics
        ],
    }


def test_produce_sends_only_writable_topics_to_the_handler_and_denies_the_rest():
    s = session(
        bindings=[
            binding("User:alice", AclOperation.WRITE, name="logs-", pattern=PatternType.PREFIXED),
            binding("User:*", AclOperation.WRITE, name="logs-x", permission=AclPermission.DENY),
        ]
    )
    handler = Recorder(
        {"responses": [{"name": "logs-a", "partition_responses": [{"index": 0, "error_code": 0}]}]}
    )
    response = run(
        s, FakeCtx(), ApiKey.PRODUCE, 9, produce_body("logs-a", "logs-x", "other"), handler
    )
    assert [t["name"] for t in handler.bodies[0]["topic_data"]] == ["logs-a"]
    errors = {t["name"]: t["partition_responses"][0]["error_code"] for t in response["responses"]}
    assert errors == {"logs-a": 0, "logs-x": 29, "other": 29}


def test_a_read_only_user_cannot_write_even_with_acls_off():
    s = session(read_only=True)
    handler = Recorder({"responses": []})
    response = run(s, FakeCtx(acls_enabled=False), ApiKey.PRODUCE, 9, produce_body("t"), handler)
    assert response["responses"][0]["partition_responses"][0]["error_code"] == 29
    fetch = {
        "max_wait_ms": 0,
        "min_bytes": 1,
        "topics": [{"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 0}]}],
    }
    handler = Recorder({"responses": [{"topic": "t", "partitions": []}]})
    run(s, FakeCtx(acls_enabled=False), ApiKey.FETCH, 12, fetch, handler)
    assert handler.bodies == [fetch]


def test_metadata_hides_undescribable_topics_and_refuses_named_ones():
    s = session(bindings=[binding("User:alice", AclOperation.READ, name="visible")])
    handler = Recorder({"topics": [{"name": "visible"}, {"name": "hidden"}]})
    listed = run(s, FakeCtx(), ApiKey.METADATA, 12, {"topics": None}, handler)
    assert listed["topics"] == [{"name": "visible"}]

    handler = Recorder({"topics": [{"name": "visible", "error_code": 0}]})
    body = {
        "topics": [{"name": "visible", "topic_id": None}, {"name": "hidden", "topic_id": None}],
        "allow_auto_topic_creation": True,
    }
    named = run(s, FakeCtx(), ApiKey.METADATA, 12, body, handler)
    assert handler.bodies[0]["topics"] == [{"name": "visible", "topic_id": None}]
    assert [(t["name"], t["error_code"]) for t in named["topics"]] == [
        ("visible", 0),
        ("hidden", 29),
    ]


def test_auto_creation_needs_create_on_the_cluster_or_the_topic():
    body = {"topics": [{"name": "new-a"}, {"name": "new-b"}], "allow_auto_topic_creation": True}
    s = session(
        bindings=[
            binding("User:alice", AclOperation.DESCRIBE),
            binding("User:alice", AclOperation.CREATE, name="new-a"),
        ]
    )
    handler = Recorder({"topics": []})
    answer = run(s, FakeCtx(topics_exist=False), ApiKey.METADATA, 12, body, handler)
    assert handler.bodies[0]["topics"] == [{"name": "new-a"}]
    assert answer["topics"][-1]["name"] == "new-b" and answer["topics"][-1]["error_code"] == 29


def test_acl_host_and_principal_must_match_the_session():
    elsewhere = binding("User:alice", AclOperation.READ, host="10.9.9.9")
    other_user = binding("User:bob", AclOperation.READ)
    here = binding("User:alice", AclOperation.READ, host="10.0.0.7")
    fetch = {"topics": [{"topic": "t", "partitions": [{"partition": 0}]}]}
    for bindings, allowed in (([elsewhere, other_user], False), ([here], True)):
        handler = Recorder({"responses": []})
        response = run(session(bindings=bindings), FakeCtx(), ApiKey.FETCH, 12, fetch, handler)
        got = response["responses"]
        assert (got == []) is allowed


def test_group_apis_answer_group_authorization_failed():
    s = session(bindings=[binding("User:alice", AclOperation.READ)])  # topics only
    for api_key, version, body in (
        (ApiKey.JOIN_GROUP, 9, {"group_id": "g"}),
        (ApiKey.HEARTBEAT, 4, {"group_id": "g"}),
        (ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0}),
        (ApiKey.OFFSET_FETCH, 7, {"group_id": "g", "topics": None}),
        (ApiKey.OFFSET_DELETE, 0, {"group_id": "g", "topics": []}),
    ):
        handler = Recorder()
        response = run(s, FakeCtx(), api_key, version, body, handler)
        assert handler.bodies == [] and response["error_code"] == 30, api_key

    commit = {
        "group_id": "g",
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1}]}],
    }
    response = run(s, FakeCtx(), ApiKey.OFFSET_COMMIT, 8, commit, Recorder())
    assert response["topics"][0]["partitions"][0]["error_code"] == 30


def test_offset_fetch_v8_answers_per_group():
    s = session(
        bindings=[
            binding("User:alice", AclOperation.READ, ResourceType.GROUP, "mine"),
            binding("User:alice", AclOperation.DESCRIBE, name="seen"),
        ]
    )
    body = {
        "groups": [
            {
                "group_id": "mine",
                "topics": [
                    {"name": "seen", "partition_indexes": [0]},
                    {"name": "unseen", "partition_indexes": [0, 1]},
                ],
            },
            {"group_id": "theirs", "topics": None},
        ],
        "require_stable": False,
    }
    handler = Recorder(
        {
            "groups": [
                {
                    "group_id": "mine",
                    "topics": [{"name": "seen", "partitions": [{"partition_index": 0}]}],
                }
            ]
        }
    )
    response = run(s, FakeCtx(), ApiKey.OFFSET_FETCH, 8, body, handler)
    assert [g["group_id"] for g in handler.bodies[0]["groups"]] == ["mine"]
    mine, theirs = response["groups"]
    assert [t["name"] for t in mine["topics"]] == ["seen", "unseen"]
    assert {p["error_code"] for p in mine["topics"][1]["partitions"]} == {29}
    assert theirs == {"group_id": "theirs", "topics": [], "error_code": 30}


def test_share_group_offsets_need_kafkas_operations_on_the_group_and_each_topic():
    """Describe: DESCRIBE group and topic; Alter: READ group and topic; Delete: DELETE
    group, READ topic — what Kafka's KafkaApis asks for each."""
    s = session(
        bindings=[
            binding("User:alice", AclOperation.DESCRIBE, ResourceType.GROUP, "sg"),
            binding("User:alice", AclOperation.READ, ResourceType.GROUP, "sg"),
            binding("User:alice", AclOperation.DESCRIBE, name="seen"),
            binding("User:alice", AclOperation.READ, name="seen"),
        ]
    )
    describe = {
        "groups": [
            {"group_id": "sg", "topics": [{"topic_name": "seen", "partitions": [0]},
                                          {"topic_name": "unseen", "partitions": [0, 1]}]},
            {"group_id": "other", "topics": None},
        ]
    }  # fmt: skip
    handler = Recorder({"groups": [{"group_id": "sg", "topics": []}]})
    response = run(s, FakeCtx(), ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1, describe, handler)
    assert [g["group_id"] for g in handler.bodies[0]["groups"]] == ["sg"]
    assert [t["topic_name"] for t in handler.bodies[0]["groups"][0]["topics"]] == ["seen"]
    sg, other = response["groups"]
    assert [(p["partition_index"], p["error_code"]) for p in sg["topics"][0]["partitions"]] == [
        (0, 29),
        (1, 29),
    ]
    assert (other["group_id"], other["error_code"]) == ("other", 30)

    alter = {
        "group_id": "sg",
        "topics": [
            {"topic_name": "unseen", "partitions": [{"partition_index": 0, "start_offset": 5}]}
        ],
    }
    handler = Recorder()
    response = run(s, FakeCtx(), ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, alter, handler)
    assert handler.bodies == []  # nothing left to change: the store is not asked
    assert response["responses"][0]["partitions"][0]["error_code"] == 29
    response = run(s, FakeCtx(), ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {**alter, "group_id": "x"},
                   handler)  # fmt: skip
    assert (response["error_code"], response["responses"]) == (30, [])

    delete = {"group_id": "sg", "topics": [{"topic_name": "seen"}]}
    response = run(s, FakeCtx(), ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, delete, handler)
    assert handler.bodies == [] and response["error_code"] == 30  # READ is not DELETE
    s = session(
        bindings=[
            binding("User:alice", AclOperation.DELETE, ResourceType.GROUP, "sg"),
            binding("User:alice", AclOperation.READ, name="seen"),
        ]
    )
    delete["topics"].append({"topic_name": "unseen"})
    handler = Recorder({"error_code": 0, "responses": []})
    response = run(s, FakeCtx(), ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, delete, handler)
    assert handler.bodies[0]["topics"] == [{"topic_name": "seen"}]
    assert [(t["topic_name"], t["error_code"]) for t in response["responses"]] == [("unseen", 29)]


def test_acl_apis_need_the_cluster():
    s = session(bindings=[binding("User:alice", AclOperation.ALL)])  # every topic, no cluster
    response = run(s, FakeCtx(), ApiKey.CREATE_ACLS, 3, {"creations": [{}, {}]}, Recorder())
    assert [r["error_code"] for r in response["results"]] == [31, 31]
    response = run(s, FakeCtx(), ApiKey.DESCRIBE_ACLS, 3, {}, Recorder())
    assert response["error_code"] == 31
    cluster_admin = session(
        bindings=[binding("User:alice", AclOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster")]
    )
    handler = Recorder({"results": []})
    run(cluster_admin, FakeCtx(), ApiKey.CREATE_ACLS, 3, {"creations": []}, handler)
    assert handler.bodies == [{"creations": []}]


def test_a_shared_fetch_answer_joins_the_denied_topics():
    """A Fetch answered with an encoded shared answer (agents.shared_answers) for the
    topics it may read still gets TOPIC_AUTHORIZATION_FAILED for the others; alone, the
    shared answer goes out as it is."""
    header = RequestHeader(ApiKey.FETCH, 12, 1, "test")
    records = b"\x00" * 70  # the bytes of a record batch, as far as this layer cares
    answer = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "session_id": 0,
        "responses": [{"topic": "a", "partitions": [dict(partition_answer(0), records=records)]}],
    }
    shared = EncodedResponse(encode_response_body(header, answer))
    fetch = {
        "max_wait_ms": 0,
        "min_bytes": 1,
        "topics": [
            {"topic": name, "partitions": [{"partition": 0, "fetch_offset": 0}]}
            for name in ("a", "b")
        ],
    }

    class Shared(Recorder):
        async def __call__(self, ctx, header, body):
            self.bodies.append(body)
            return shared

    s = session(bindings=[binding("User:alice", AclOperation.READ, name="a")])
    handler = Shared()
    response = run(s, FakeCtx(), ApiKey.FETCH, 12, fetch, handler)
    assert [t["topic"] for t in handler.bodies[0]["topics"]] == ["a"]
    assert not isinstance(response, EncodedResponse)
    got = {t["topic"]: t["partitions"][0] for t in response["responses"]}
    assert bytes(got["a"]["records"]) == records and got["a"]["error_code"] == 0
    assert got["b"]["error_code"] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    # The denied topic is encoded exactly as the dict path encodes it: the same request
    # answered by a handler that returns the answer as a dict goes out as the same bytes.
    from_dict = run(s, FakeCtx(), ApiKey.FETCH, 12, fetch, Recorder(copy.deepcopy(answer)))
    assert not isinstance(from_dict, EncodedResponse)
    assert encode_response(header, response) == encode_response(header, from_dict)
    both = session(bindings=[binding("User:alice", AclOperation.READ)])
    assert run(both, FakeCtx(), ApiKey.FETCH, 12, fetch, Shared()) is shared
    assert encode_response(header, shared) == encode_response(header, answer)
