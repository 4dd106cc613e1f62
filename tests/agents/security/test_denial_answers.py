"""The ACL layer's denial answers, as bytes: every API with a rule, every version, a
principal with no ACLs (everything it names is denied) and one that may do anything to
groups and transactional ids but nothing to topics, against the bytes the
hand-written denial answers of `agents/security/authorization.py` gave.

`denial_answers.json` holds the SHA-256 (first 32 hex digits) of each encoded answer,
captured from the hand-written denials before they were built from the message schemas
(`core.kafka.error_answers`). Where the two differ on purpose (`CHANGED`, with the
reason), the denial is now exactly the error answer a failed request of the API gets.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import sys

import pytest

from agents.security.authorization import RULES
from core.kafka import SUPPORTED_VERSIONS, ApiKey, RequestHeader
from core.kafka.codec import encode_response_body
from core.kafka.error_answers import error_answer
from core.kafka.errors import ErrorCode
from core.kafka.messages import APIS
from core.security.acl import AclOperation, ResourceType
from tests.agents.security.test_authorization import FakeCtx, Recorder, binding, run, session
from tests.core.kafka.samples import sample_body

FIXTURE = pathlib.Path(__file__).parent / "denial_answers.json"

CASES = [
    (
        f"{ApiKey(api_key).name} v{version}{' nulls' if nulls else ''}{' topics' if topics else ''}",
        api_key,
        version,
        nulls,
        topics,
    )
    for api_key in sorted(RULES)
    if api_key in SUPPORTED_VERSIONS
    for version in range(SUPPORTED_VERSIONS[api_key][0], SUPPORTED_VERSIONS[api_key][1] + 1)
    for nulls in (False, True)
    for topics in (False, True)
]
# Everything but topics: the topic-level denials inside allowed groups and transactions.
NOT_TOPICS = [
    binding("User:alice", AclOperation.ALL, kind)
    for kind in (ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID)
]


def denial_hash(api_key: int, version: int, nulls: bool, topics: bool) -> str | None:
    body = sample_body(APIS[api_key].request, version, nulls=nulls)
    if api_key == ApiKey.PRODUCE:
        body["acks"] = -1
    for index, resource in enumerate(body.get("resources") or []):  # config APIs
        resource["resource_type"] = (2, 4, 32)[index % 3]  # a topic, a broker, a group
    principal = session(bindings=NOT_TOPICS if topics else ())
    response = run(principal, FakeCtx(), api_key, version, body, Recorder())
    if response is None:
        return None
    header = RequestHeader(api_key, version, 1, "test")
    return hashlib.sha256(encode_response_body(header, response)).hexdigest()[:32]


# A group denied as a whole answered only the error code, every other field at the
# schema's default; it now gets the API's error answer: JoinGroup keeps the request's
# member id (as Kafka's KafkaApis answers a denied join), Consumer/ShareGroupHeartbeat
# say member epoch -1 (and ShareGroupHeartbeat an empty error message), as Floe's
# answers to a failed heartbeat always have.
CHANGED = {ApiKey.JOIN_GROUP, ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_HEARTBEAT}
GOLDEN = json.loads(FIXTURE.read_text()) if FIXTURE.exists() else {}


def test_every_api_with_a_rule_is_in_the_fixture():
    assert sorted(GOLDEN) == sorted(name for name, *_ in CASES)


@pytest.mark.parametrize(("name", "api_key", "version", "nulls", "topics"), CASES, ids=str)
def test_a_denied_request_is_answered_with_the_same_bytes(name, api_key, version, nulls, topics):
    if api_key in CHANGED and not topics:
        body = sample_body(APIS[api_key].request, version, nulls=nulls)
        header = RequestHeader(api_key, version, 1, "test")
        answer = error_answer(api_key, version, body, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        assert answer is not None
        expected = hashlib.sha256(encode_response_body(header, answer)).hexdigest()[:32]
        assert denial_hash(api_key, version, nulls, topics) == expected != GOLDEN[name]
        return
    assert denial_hash(api_key, version, nulls, topics) == GOLDEN[name]


if __name__ == "__main__" and sys.argv[1:] == ["capture"]:
    FIXTURE.write_text(
        json.dumps({name: denial_hash(*case) for name, *case in CASES}, indent=0) + "\n"
    )
