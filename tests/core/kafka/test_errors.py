"""Error codes are Kafka's, with a typed exception per code (aiokafka-style)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from core.kafka import errors
from core.kafka.errors import ErrorCode, KafkaError, for_code


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("UNKNOWN_SERVER_ERROR", -1),
        ("NONE", 0),
        ("OFFSET_OUT_OF_RANGE", 1),
        ("CORRUPT_MESSAGE", 2),
        ("UNKNOWN_TOPIC_OR_PARTITION", 3),
        ("MESSAGE_TOO_LARGE", 10),
        ("NOT_COORDINATOR", 16),
        ("INVALID_TOPIC_EXCEPTION", 17),
        ("TOPIC_AUTHORIZATION_FAILED", 29),
        ("UNSUPPORTED_VERSION", 35),
        ("TOPIC_ALREADY_EXISTS", 36),
        ("INVALID_PARTITIONS", 37),
        ("INVALID_REPLICATION_FACTOR", 38),
        ("INVALID_CONFIG", 40),
        ("INVALID_REQUEST", 42),
        ("OUT_OF_ORDER_SEQUENCE_NUMBER", 45),
        ("DUPLICATE_SEQUENCE_NUMBER", 46),
        ("INVALID_PRODUCER_EPOCH", 47),
        ("SASL_AUTHENTICATION_FAILED", 58),
        ("UNKNOWN_PRODUCER_ID", 59),
        ("GROUP_ID_NOT_FOUND", 69),
        ("INVALID_RECORD", 87),
        ("UNKNOWN_TOPIC_ID", 100),
        ("SHARE_SESSION_LIMIT_REACHED", 133),
    ],
)
def test_codes_carry_kafkas_names(name, code):
    assert ErrorCode[name] == code


def test_codes_are_contiguous_from_minus_one():
    assert sorted(ErrorCode) == list(range(-1, max(ErrorCode) + 1))


def test_retriable_follows_kafka():
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER.retriable
    assert ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.retriable
    assert ErrorCode.COORDINATOR_LOAD_IN_PROGRESS.retriable
    assert not ErrorCode.TOPIC_ALREADY_EXISTS.retriable
    assert not ErrorCode.INVALID_PRODUCER_EPOCH.retriable
    assert not ErrorCode.NONE.retriable


def test_for_code_gives_one_class_per_code():
    classes = {for_code(code) for code in ErrorCode}
    assert len(classes) == len(ErrorCode)
    cls = for_code(36)
    assert cls is errors.TopicAlreadyExistsError
    assert cls.code is ErrorCode.TOPIC_ALREADY_EXISTS
    assert issubclass(cls, KafkaError)
    assert ErrorCode.TOPIC_ALREADY_EXISTS.exception is cls


def test_class_names_follow_aiokafka_style():
    assert for_code(ErrorCode.KAFKA_STORAGE_ERROR).__name__ == "KafkaStorageError"
    assert for_code(ErrorCode.INVALID_TOPIC_EXCEPTION).__name__ == "InvalidTopicError"
    assert for_code(ErrorCode.NONE).__name__ == "NoError"


def test_an_instance_knows_its_code_retriability_and_message():
    exc = for_code(ErrorCode.NOT_COORDINATOR)("coordinator moved")
    assert exc.code == 16
    assert exc.retriable is True
    assert exc.message == "coordinator moved"
    assert str(for_code(ErrorCode.INVALID_CONFIG)()) == "INVALID_CONFIG"


def test_an_unknown_code_maps_to_unknown_server_error():
    assert for_code(31999) is errors.UnknownServerError


def test_catching_by_class():
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        raise for_code(3)("no such topic")


def test_errors_module_imports_only_the_standard_library():
    code = (
        "import sys; import core.kafka.errors; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('django', 'asyncio', 'socket')]; "
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_codec_never_imports_io():
    code = (
        "import sys; import core.kafka; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('asyncio', 'socket', 'django', 'selectors')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
