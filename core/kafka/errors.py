"""Kafka error codes, typed Kafka errors, and the codec's own exceptions.

Two families live here and must not be confused:

* ``ErrorCode`` / ``KafkaError``: the error codes a response carries (Kafka's
  ``org.apache.kafka.common.protocol.Errors``), with one exception class per
  code, found through ``for_code()`` as in aiokafka.
* ``ProtocolViolation`` and its subclasses: a *peer* sent bytes we cannot
  accept. The server answers with an error or closes that one connection.

This module imports nothing but the standard library: the Django control
plane imports it too.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, ClassVar

from .header import RequestHeader


class ErrorCode(IntEnum):
    """Every Kafka error code, named exactly as in Kafka's ``Errors.java``."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    INVALID_REGULAR_EXPRESSION = 128
    REBOOTSTRAP_REQUIRED = 129
    STREAMS_INVALID_TOPOLOGY = 130
    STREAMS_INVALID_TOPOLOGY_EPOCH = 131
    STREAMS_TOPOLOGY_FENCED = 132
    SHARE_SESSION_LIMIT_REACHED = 133

    @property
    def retriable(self) -> bool:
        """True when Kafka clients retry this error (its Java exception is a RetriableException)."""
        return self in _RETRIABLE

    @property
    def exception(self) -> type[KafkaError]:
        """The ``KafkaError`` subclass for this code."""
        return for_code(self)


# The "Retriable" column of Kafka's protocol error table: codes whose Java
# exception extends RetriableException (InvalidMetadataException included).
_RETRIABLE = frozenset(
    {
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.NOT_CONTROLLER,
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
        ErrorCode.INVALID_FETCH_SESSION_EPOCH,
        ErrorCode.LISTENER_NOT_FOUND,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.OFFSET_NOT_AVAILABLE,
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
        ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
        ErrorCode.ELECTION_NOT_NEEDED,
        ErrorCode.UNSTABLE_OFFSET_COMMIT,
        ErrorCode.THROTTLING_QUOTA_EXCEEDED,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.INCONSISTENT_TOPIC_ID,
        ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR,
        ErrorCode.SHARE_SESSION_NOT_FOUND,
        ErrorCode.INVALID_SHARE_SESSION_EPOCH,
        ErrorCode.SHARE_SESSION_LIMIT_REACHED,
    }
)


class KafkaError(Exception):
    """An error that travels to the client as a Kafka error code.

    Raise ``for_code(ErrorCode.X)("why")`` (or the named subclass, e.g.
    ``TopicAlreadyExistsError``) in request handlers; the handler's caller puts
    ``exc.code`` and ``str(exc)`` into the response.
    """

    code: ClassVar[ErrorCode] = ErrorCode.UNKNOWN_SERVER_ERROR
    retriable: ClassVar[bool] = False

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message if message is not None else self.code.name)

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else self.code.name


def _class_name(code: ErrorCode) -> str:
    if code is ErrorCode.NONE:
        return "NoError"
    stem = code.name.removesuffix("_EXCEPTION").removesuffix("_ERROR")
    return "".join(part.capitalize() for part in stem.split("_")) + "Error"


_BY_CODE: dict[int, type[KafkaError]] = {}
for _code in ErrorCode:
    _cls = type(
        _class_name(_code),
        (KafkaError,),
        {"code": _code, "retriable": _code.retriable, "__module__": __name__},
    )
    _BY_CODE[_code] = _cls
    globals()[_cls.__name__] = _cls  # e.g. errors.TopicAlreadyExistsError
del _code, _cls


def for_code(code: int) -> type[KafkaError]:
    """The exception class for an error code; UnknownServerError for a code we don't know."""
    return _BY_CODE.get(code) or _BY_CODE[ErrorCode.UNKNOWN_SERVER_ERROR]


def __getattr__(name: str) -> Any:
    # The per-code classes are created above; this hook only tells type
    # checkers that names such as ``TopicAlreadyExistsError`` exist.
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --- A peer's protocol violations (not Kafka error codes in a response) -------


class ProtocolViolation(Exception):
    """The peer sent bytes that are not a valid Kafka request.

    ``header`` is the request header when it could be read, else None.
    """

    error_code: ClassVar[ErrorCode] = ErrorCode.INVALID_REQUEST

    def __init__(self, message: str, header: RequestHeader | None = None) -> None:
        super().__init__(message)
        self.header = header


class FrameTooLarge(ProtocolViolation):
    """A size prefix is negative or larger than the connection's limit."""


class InvalidRequest(ProtocolViolation):
    """Malformed or truncated request, or bytes left over after the body."""


class UnsupportedVersion(ProtocolViolation):
    """Unknown api key, or a version outside ``SUPPORTED_VERSIONS``.

    ``header`` is always set. For ApiVersions, answer with
    ``api_versions_fallback_response(exc.header)`` (KIP-511).
    """

    error_code: ClassVar[ErrorCode] = ErrorCode.UNSUPPORTED_VERSION
    header: RequestHeader

    def __init__(self, message: str, header: RequestHeader) -> None:
        super().__init__(message, header)
