"""Share groups (KIP-932, "queues for Kafka"): ShareGroupHeartbeat, ShareGroupDescribe,
ShareFetch, ShareAcknowledge — version 0 was Kafka 4.0's early access, removed in 4.1;
version 1 is the stable one librdkafka speaks (v2 adds KIP-1206's acquire mode and
KIP-1222's renew) — and the admin APIs Describe/Alter/DeleteShareGroupOffsets (Kafka 4.2's
versions: 0 stable since 4.1, Describe's 1 adds the lag).

Facts from Kafka's ``common/message/*.json``, written by hand (see core.py).
"""

from ..api_keys import ApiKey
from ..schema import Api, Array, Message, Struct
from ..schema import Field as F
from ..types import Boolean, Int8, Int16, Int32, Int64, Records, String, Uuid

# Every response's head and every per-partition result start alike (all flexible at 0+).
_ANSWER_HEAD = (
    F("throttle_time_ms", Int32),
    F("error_code", Int16),
    F("error_message", String, nullable="0+", default=None),
)
_PARTITION_ERROR = (
    F("partition_index", Int32),
    F("error_code", Int16),
    F("error_message", String, nullable="0+", default=None),
)

_TOPIC_PARTITIONS = Array(Struct(
    F("topic_id", Uuid),
    F("partitions", Array(Int32)),
))  # fmt: skip

SHARE_GROUP_HEARTBEAT = Api(
    ApiKey.SHARE_GROUP_HEARTBEAT,
    request=Message(
        "ShareGroupHeartbeatRequest",
        valid="1",
        flexible="0+",
        fields=(
            F("group_id", String),
            F("member_id", String),
            F("member_epoch", Int32),
            F("rack_id", String, nullable="0+", default=None),
            F("subscribed_topic_names", Array(String), nullable="0+", default=None),
        ),
    ),
    response=Message(
        "ShareGroupHeartbeatResponse",
        valid="1",
        flexible="0+",
        fields=(
            *_ANSWER_HEAD,
            F("member_id", String, nullable="0+", default=None),
            F("member_epoch", Int32),
            F("heartbeat_interval_ms", Int32),
            F("assignment", Struct(
                F("topic_partitions", _TOPIC_PARTITIONS),
            ), nullable="0+", default=None),
        ),
    ),
)  # fmt: skip

_ACK_BATCHES = Array(Struct(
    F("first_offset", Int64),
    F("last_offset", Int64),
    F("acknowledge_types", Array(Int8)),
))  # fmt: skip

# Each partition's acknowledgements, by topic (ShareFetch's and ShareAcknowledge's requests).
_ACK_TOPICS = Array(Struct(
    F("topic_id", Uuid),
    F("partitions", Array(Struct(
        F("partition_index", Int32),
        F("acknowledgement_batches", _ACK_BATCHES),
    ))),
))  # fmt: skip

_CURRENT_LEADER = Struct(
    F("leader_id", Int32),
    F("leader_epoch", Int32),
)  # fmt: skip

_NODE_ENDPOINTS = Array(Struct(
    F("node_id", Int32),
    F("host", String),
    F("port", Int32),
    F("rack", String, nullable="0+", default=None),
))  # fmt: skip

SHARE_FETCH = Api(
    ApiKey.SHARE_FETCH,
    request=Message(
        "ShareFetchRequest",
        valid="1",
        flexible="0+",
        fields=(
            F("group_id", String, nullable="0+", default=None),
            F("member_id", String, nullable="0+"),
            F("share_session_epoch", Int32),
            F("max_wait_ms", Int32),
            F("min_bytes", Int32),
            F("max_bytes", Int32, default=0x7FFFFFFF),
            F("max_records", Int32, "1+"),
            F("batch_size", Int32, "1+"),
            F("topics", _ACK_TOPICS),
            F("forgotten_topics_data", Array(Struct(
                F("topic_id", Uuid),
                F("partitions", Array(Int32)),
            ))),
        ),
    ),
    response=Message(
        "ShareFetchResponse",
        valid="1",
        flexible="0+",
        fields=(
            *_ANSWER_HEAD,
            F("acquisition_lock_timeout_ms", Int32),
            F("responses", Array(Struct(
                F("topic_id", Uuid),
                F("partitions", Array(Struct(
                    *_PARTITION_ERROR,
                    F("acknowledge_error_code", Int16),
                    F("acknowledge_error_message", String, nullable="0+", default=None),
                    F("current_leader", _CURRENT_LEADER),
                    F("records", Records, nullable="0+"),
                    F("acquired_records", Array(Struct(
                        F("first_offset", Int64),
                        F("last_offset", Int64),
                        F("delivery_count", Int16),
                    ))),
                ))),
            ))),
            F("node_endpoints", _NODE_ENDPOINTS),
        ),
    ),
)  # fmt: skip

SHARE_ACKNOWLEDGE = Api(
    ApiKey.SHARE_ACKNOWLEDGE,
    request=Message(
        "ShareAcknowledgeRequest",
        valid="1",
        flexible="0+",
        fields=(
            F("group_id", String, nullable="0+", default=None),
            F("member_id", String, nullable="0+"),
            F("share_session_epoch", Int32),
            F("topics", _ACK_TOPICS),
        ),
    ),
    response=Message(
        "ShareAcknowledgeResponse",
        valid="1",
        flexible="0+",
        fields=(
            *_ANSWER_HEAD,
            F("responses", Array(Struct(
                F("topic_id", Uuid),
                F("partitions", Array(Struct(
                    *_PARTITION_ERROR,
                    F("current_leader", _CURRENT_LEADER),
                ))),
            ))),
            F("node_endpoints", _NODE_ENDPOINTS),
        ),
    ),
)  # fmt: skip

SHARE_GROUP_DESCRIBE = Api(
    ApiKey.SHARE_GROUP_DESCRIBE,
    request=Message(
        "ShareGroupDescribeRequest",
        valid="1",
        flexible="1+",
        fields=(
            F("group_ids", Array(String)),
            F("include_authorized_operations", Boolean),
        ),
    ),
    response=Message(
        "ShareGroupDescribeResponse",
        valid="1",
        flexible="1+",
        fields=(
            F("throttle_time_ms", Int32),
            F("groups", Array(Struct(
                F("error_code", Int16),
                F("error_message", String, nullable="1+", default=None),
                F("group_id", String),
                F("group_state", String),
                F("group_epoch", Int32),
                F("assignment_epoch", Int32),
                F("assignor_name", String),
                F("members", Array(Struct(
                    F("member_id", String),
                    F("rack_id", String, nullable="1+", default=None),
                    F("member_epoch", Int32),
                    F("client_id", String),
                    F("client_host", String),
                    F("subscribed_topic_names", Array(String)),
                    F("assignment", Struct(
                        F("topic_partitions", Array(Struct(
                            F("topic_id", Uuid),
                            F("topic_name", String),
                            F("partitions", Array(Int32)),
                        ))),
                    )),
                ))),
                F("authorized_operations", Int32, default=-(2**31)),
            ))),
        ),
    ),
)  # fmt: skip

# The share-partition start offsets, for admin clients (kafka-share-groups.sh). Version 1
# of DescribeShareGroupOffsets (Kafka 4.2, KIP-1226) adds each partition's lag.
DESCRIBE_SHARE_GROUP_OFFSETS = Api(
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
    request=Message(
        "DescribeShareGroupOffsetsRequest",
        valid="0-1",
        flexible="0+",
        fields=(
            F("groups", Array(Struct(
                F("group_id", String),
                F("topics", Array(Struct(
                    F("topic_name", String),
                    F("partitions", Array(Int32)),
                )), nullable="0+"),
            ))),
        ),
    ),
    response=Message(
        "DescribeShareGroupOffsetsResponse",
        valid="0-1",
        flexible="0+",
        fields=(
            F("throttle_time_ms", Int32),
            F("groups", Array(Struct(
                F("group_id", String),
                F("topics", Array(Struct(
                    F("topic_name", String),
                    F("topic_id", Uuid),
                    F("partitions", Array(Struct(
                        F("partition_index", Int32),
                        F("start_offset", Int64),
                        F("leader_epoch", Int32),
                        F("lag", Int64, "1+", default=-1),
                        F("error_code", Int16),
                        F("error_message", String, nullable="0+", default=None),
                    ))),
                ))),
                F("error_code", Int16),
                F("error_message", String, nullable="0+", default=None),
            ))),
        ),
    ),
)  # fmt: skip

ALTER_SHARE_GROUP_OFFSETS = Api(
    ApiKey.ALTER_SHARE_GROUP_OFFSETS,
    request=Message(
        "AlterShareGroupOffsetsRequest",
        valid="0",
        flexible="0+",
        fields=(
            F("group_id", String),
            F("topics", Array(Struct(
                F("topic_name", String),
                F("partitions", Array(Struct(
                    F("partition_index", Int32),
                    F("start_offset", Int64),
                ))),
            ))),
        ),
    ),
    response=Message(
        "AlterShareGroupOffsetsResponse",
        valid="0",
        flexible="0+",
        fields=(
            *_ANSWER_HEAD,
            F("responses", Array(Struct(
                F("topic_name", String),
                F("topic_id", Uuid),
                F("partitions", Array(Struct(
                    *_PARTITION_ERROR,
                ))),
            ))),
        ),
    ),
)  # fmt: skip

DELETE_SHARE_GROUP_OFFSETS = Api(
    ApiKey.DELETE_SHARE_GROUP_OFFSETS,
    request=Message(
        "DeleteShareGroupOffsetsRequest",
        valid="0",
        flexible="0+",
        fields=(
            F("group_id", String),
            F("topics", Array(Struct(
                F("topic_name", String),
            ))),
        ),
    ),
    response=Message(
        "DeleteShareGroupOffsetsResponse",
        valid="0",
        flexible="0+",
        fields=(
            *_ANSWER_HEAD,
            F("responses", Array(Struct(
                F("topic_name", String),
                F("topic_id", Uuid),
                F("error_code", Int16),
                F("error_message", String, nullable="0+", default=None),
            ))),
        ),
    ),
)  # fmt: skip

APIS = (
    SHARE_GROUP_HEARTBEAT,
    SHARE_GROUP_DESCRIBE,
    SHARE_FETCH,
    SHARE_ACKNOWLEDGE,
    DESCRIBE_SHARE_GROUP_OFFSETS,
    ALTER_SHARE_GROUP_OFFSETS,
    DELETE_SHARE_GROUP_OFFSETS,
)
