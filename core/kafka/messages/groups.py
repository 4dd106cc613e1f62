"""Consumer-group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch, OffsetDelete, DescribeGroups, ListGroups, DeleteGroups.

Facts from Kafka's ``common/message/*.json``, written by hand (see core.py).
"""

from ..api_keys import ApiKey
from ..schema import Api, Array, Message, Struct
from ..schema import Field as F
from ..types import Boolean, Bytes, Int8, Int16, Int32, Int64, String, Uuid

_NO_OPERATIONS = -(2**31)  # INT32_MIN: "authorized operations not requested" (KIP-430)

# v1 key type (KIP-98 transaction coordinators); v4 batched keys (KIP-699).
FIND_COORDINATOR = Api(
    ApiKey.FIND_COORDINATOR,
    request=Message(
        "FindCoordinatorRequest",
        valid="0-4",
        flexible="3+",
        fields=(
            F("key", String, "0-3"),
            F("key_type", Int8, "1+", default=0),
            F("coordinator_keys", Array(String), "4+"),
        ),
    ),
    response=Message(
        "FindCoordinatorResponse",
        valid="0-4",
        flexible="3+",
        fields=(
            F("throttle_time_ms", Int32, "1+"),
            F("error_code", Int16, "0-3"),
            F("error_message", String, "1-3", nullable="1-3"),
            F("node_id", Int32, "0-3"),
            F("host", String, "0-3"),
            F("port", Int32, "0-3"),
            F("coordinators", Array(Struct(
                F("key", String, "4+"),
                F("node_id", Int32, "4+"),
                F("host", String, "4+"),
                F("port", Int32, "4+"),
                F("error_code", Int16, "4+"),
                F("error_message", String, "4+", nullable="4+"),
            )), "4+"),
        ),
    ),
)  # fmt: skip

# v1 rebalance timeout; v4 member id required (KIP-394); v5 static membership
# (KIP-345); v7 protocol type in the response (KIP-559); v8 reason (KIP-800);
# v9 skip assignment (KIP-814).
JOIN_GROUP = Api(
    ApiKey.JOIN_GROUP,
    request=Message(
        "JoinGroupRequest",
        valid="0-9",
        flexible="6+",
        fields=(
            F("group_id", String),
            F("session_timeout_ms", Int32),
            F("rebalance_timeout_ms", Int32, "1+", default=-1),
            F("member_id", String),
            F("group_instance_id", String, "5+", nullable="5+", default=None),
            F("protocol_type", String),
            F("protocols", Array(Struct(
                F("name", String),
                F("metadata", Bytes),
            ))),
            F("reason", String, "8+", nullable="8+", default=None),
        ),
    ),
    response=Message(
        "JoinGroupResponse",
        valid="0-9",
        flexible="6+",
        fields=(
            F("throttle_time_ms", Int32, "2+"),
            F("error_code", Int16),
            F("generation_id", Int32, default=-1),
            F("protocol_type", String, "7+", nullable="7+", default=None),
            F("protocol_name", String, nullable="7+"),
            F("leader", String),
            F("skip_assignment", Boolean, "9+", default=False),
            F("member_id", String),
            F("members", Array(Struct(
                F("member_id", String),
                F("group_instance_id", String, "5+", nullable="5+", default=None),
                F("metadata", Bytes),
            ))),
        ),
    ),
)  # fmt: skip

HEARTBEAT = Api(
    ApiKey.HEARTBEAT,
    request=Message(
        "HeartbeatRequest",
        valid="0-4",
        flexible="4+",
        fields=(
            F("group_id", String),
            F("generation_id", Int32),
            F("member_id", String),
            F("group_instance_id", String, "3+", nullable="3+", default=None),
        ),
    ),
    response=Message(
        "HeartbeatResponse",
        valid="0-4",
        flexible="4+",
        fields=(
            F("throttle_time_ms", Int32, "1+"),
            F("error_code", Int16),
        ),
    ),
)  # fmt: skip

# v3 batch leave (KIP-345); v5 reason (KIP-800).
LEAVE_GROUP = Api(
    ApiKey.LEAVE_GROUP,
    request=Message(
        "LeaveGroupRequest",
        valid="0-5",
        flexible="4+",
        fields=(
            F("group_id", String),
            F("member_id", String, "0-2"),
            F("members", Array(Struct(
                F("member_id", String, "3+"),
                F("group_instance_id", String, "3+", nullable="3+", default=None),
                F("reason", String, "5+", nullable="5+", default=None),
            )), "3+"),
        ),
    ),
    response=Message(
        "LeaveGroupResponse",
        valid="0-5",
        flexible="4+",
        fields=(
            F("throttle_time_ms", Int32, "1+"),
            F("error_code", Int16),
            F("members", Array(Struct(
                F("member_id", String, "3+"),
                F("group_instance_id", String, "3+", nullable="3+"),
                F("error_code", Int16, "3+"),
            )), "3+"),
        ),
    ),
)  # fmt: skip

# v5 protocol type/name (KIP-559).
SYNC_GROUP = Api(
    ApiKey.SYNC_GROUP,
    request=Message(
        "SyncGroupRequest",
        valid="0-5",
        flexible="4+",
        fields=(
            F("group_id", String),
            F("generation_id", Int32),
            F("member_id", String),
            F("group_instance_id", String, "3+", nullable="3+", default=None),
            F("protocol_type", String, "5+", nullable="5+", default=None),
            F("protocol_name", String, "5+", nullable="5+", default=None),
            F("assignments", Array(Struct(
                F("member_id", String),
                F("assignment", Bytes),
            ))),
        ),
    ),
    response=Message(
        "SyncGroupResponse",
        valid="0-5",
        flexible="4+",
        fields=(
            F("throttle_time_ms", Int32, "1+"),
            F("error_code", Int16),
            F("protocol_type", String, "5+", nullable="5+", default=None),
            F("protocol_name", String, "5+", nullable="5+", default=None),
            F("assignment", Bytes),
        ),
    ),
)  # fmt: skip

# v1 commit timestamp (v1 only); v2-4 retention time; v6 leader epoch (KIP-320);
# v7 static membership (KIP-345); v8 flexible. The field the JSON calls
# GenerationIdOrMemberEpoch was GenerationId before KIP-848.
OFFSET_COMMIT = Api(
    ApiKey.OFFSET_COMMIT,
    request=Message(
        "OffsetCommitRequest",
        valid="0-8",
        flexible="8+",
        fields=(
            F("group_id", String),
            F("generation_id_or_member_epoch", Int32, "1+", default=-1),
            F("member_id", String, "1+"),
            F("group_instance_id", String, "7+", nullable="7+", default=None),
            F("retention_time_ms", Int64, "2-4", default=-1),
            F("topics", Array(Struct(
                F("name", String),
                F("partitions", Array(Struct(
                    F("partition_index", Int32),
                    F("committed_offset", Int64),
                    F("committed_leader_epoch", Int32, "6+", default=-1),
                    F("commit_timestamp", Int64, "1", default=-1),
                    F("committed_metadata", String, nullable="0+"),
                ))),
            ))),
        ),
    ),
    response=Message(
        "OffsetCommitResponse",
        valid="0-8",
        flexible="8+",
        fields=(
            F("throttle_time_ms", Int32, "3+"),
            F("topics", Array(Struct(
                F("name", String),
                F("partitions", Array(Struct(
                    F("partition_index", Int32),
                    F("error_code", Int16),
                ))),
            ))),
        ),
    ),
)  # fmt: skip

# v2 null topics = all, top-level error; v5 leader epoch (KIP-320); v7 require
# stable (KIP-447); v8 several groups in one request (KIP-709).
OFFSET_FETCH = Api(
    ApiKey.OFFSET_FETCH,
    request=Message(
        "OffsetFetchRequest",
        valid="0-8",
        flexible="6+",
        fields=(
            F("group_id", String, "0-7"),
            F("topics", Array(Struct(
                F("name", String, "0-7"),
                F("partition_indexes", Array(Int32), "0-7"),
            )), "0-7", nullable="2-7"),
            F("groups", Array(Struct(
                F("group_id", String, "8+"),
                F("topics", Array(Struct(
                    F("name", String, "8-9"),
                    F("partition_indexes", Array(Int32), "8+"),
                )), "8+", nullable="8+"),
            )), "8+"),
            F("require_stable", Boolean, "7+", default=False),
        ),
    ),
    response=Message(
        "OffsetFetchResponse",
        valid="0-8",
        flexible="6+",
        fields=(
            F("throttle_time_ms", Int32, "3+"),
            F("topics", Array(Struct(
                F("name", String, "0-7"),
                F("partitions", Array(Struct(
                    F("partition_index", Int32, "0-7"),
                    F("committed_offset", Int64, "0-7"),
                    F("committed_leader_epoch", Int32, "5-7", default=-1),
                    F("metadata", String, "0-7", nullable="0-7"),
                    F("error_code", Int16, "0-7"),
                )), "0-7"),
            )), "0-7"),
            F("error_code", Int16, "2-7", default=0),
            F("groups", Array(Struct(
                F("group_id", String, "8+"),
                F("topics", Array(Struct(
                    F("name", String, "8-9"),
                    F("partitions", Array(Struct(
                        F("partition_index", Int32, "8+"),
                        F("committed_offset", Int64, "8+"),
                        F("committed_leader_epoch", Int32, "8+", default=-1),
                        F("metadata", String, "8+", nullable="8+"),
                        F("error_code", Int16, "8+"),
                    )), "8+"),
                )), "8+"),
                F("error_code", Int16, "8+", default=0),
            )), "8+"),
        ),
    ),
)  # fmt: skip

# KIP-496.
OFFSET_DELETE = Api(
    ApiKey.OFFSET_DELETE,
    request=Message(
        "OffsetDeleteRequest",
        valid="0",
        flexible="none",
        fields=(
            F("group_id", String),
            F("topics", Array(Struct(
                F("name", String),
                F("partitions", Array(Struct(
                    F("partition_index", Int32),
                ))),
            ))),
        ),
    ),
    response=Message(
        "OffsetDeleteResponse",
        valid="0",
        flexible="none",
        fields=(
            F("error_code", Int16),
            F("throttle_time_ms", Int32),
            F("topics", Array(Struct(
                F("name", String),
                F("partitions", Array(Struct(
                    F("partition_index", Int32),
                    F("error_code", Int16),
                ))),
            ))),
        ),
    ),
)  # fmt: skip

# v3 authorized operations (KIP-430); v4 group instance id (KIP-345).
DESCRIBE_GROUPS = Api(
    ApiKey.DESCRIBE_GROUPS,
    request=Message(
        "DescribeGroupsRequest",
        valid="0-5",
        flexible="5+",
        fields=(
            F("groups", Array(String)),
            F("include_authorized_operations", Boolean, "3+"),
        ),
    ),
    response=Message(
        "DescribeGroupsResponse",
        valid="0-5",
        flexible="5+",
        fields=(
            F("throttle_time_ms", Int32, "1+"),
            F("groups", Array(Struct(
                F("error_code", Int16),
                F("group_id", String),
                F("group_state", String),
                F("protocol_type", String),
                F("protocol_data", String),
                F("members", Array(Struct(
                    F("member_id", String),
                    F("group_instance_id", String, "4+", nullable="4+", default=None),
                    F("client_id", String),
                    F("client_host", String),
                    F("member_metadata", Bytes),
                    F("member_assignment", Bytes),
                ))),
                F("authorized_operations", Int32, "3+", default=_NO_OPERATIONS),
            ))),
        ),
    ),
)  # fmt: skip

# v4 state filter (KIP-518).
LIST_GROUPS = Api(
    ApiKey.LIST_GROUPS,
    request=Message(
        "ListGroupsRequest",
        valid="0-5",
        flexible="3+",
        fields=(
            F("states_filter", Array(String), "4+"),
            F("types_filter", Array(String), "5+"),  # KIP-848: classic, consumer…
        ),
    ),
    response=Message(
        "ListGroupsResponse",
        valid="0-5",
        flexible="3+",
        fields=(
            F("throttle_time_ms", Int32, "1+"),
            F("error_code", Int16),
            F("groups", Array(Struct(
                F("group_id", String),
                F("protocol_type", String),
                F("group_state", String, "4+"),
                F("group_type", String, "5+", default="classic"),
            ))),
        ),
    ),
)  # fmt: skip

DELETE_GROUPS = Api(
    ApiKey.DELETE_GROUPS,
    request=Message(
        "DeleteGroupsRequest",
        valid="0-2",
        flexible="2+",
        fields=(F("groups_names", Array(String)),),
    ),
    response=Message(
        "DeleteGroupsResponse",
        valid="0-2",
        flexible="2+",
        fields=(
            F("throttle_time_ms", Int32),
            F("results", Array(Struct(
                F("group_id", String),
                F("error_code", Int16),
            ))),
        ),
    ),
)  # fmt: skip

# KIP-848, the consumer group protocol: the coordinator assigns, members heartbeat their
# owned partitions. v1 (KIP-1082): the member id is the client's, and the regex field.
CONSUMER_GROUP_HEARTBEAT = Api(
    ApiKey.CONSUMER_GROUP_HEARTBEAT,
    request=Message(
        "ConsumerGroupHeartbeatRequest",
        valid="0-1",
        flexible="0+",
        fields=(
            F("group_id", String),
            F("member_id", String),
            F("member_epoch", Int32),
            F("instance_id", String, nullable="0+", default=None),
            F("rack_id", String, nullable="0+", default=None),
            F("rebalance_timeout_ms", Int32, default=-1),
            F("subscribed_topic_names", Array(String), nullable="0+", default=None),
            F("subscribed_topic_regex", String, "1+", nullable="1+", default=None),
            F("server_assignor", String, nullable="0+", default=None),
            F("topic_partitions", Array(Struct(
                F("topic_id", Uuid),
                F("partitions", Array(Int32)),
            )), nullable="0+", default=None),
        ),
    ),
    response=Message(
        "ConsumerGroupHeartbeatResponse",
        valid="0-1",
        flexible="0+",
        fields=(
            F("throttle_time_ms", Int32),
            F("error_code", Int16),
            F("error_message", String, nullable="0+", default=None),
            F("member_id", String, nullable="0+", default=None),
            F("member_epoch", Int32),
            F("heartbeat_interval_ms", Int32),
            F("assignment", Struct(
                F("topic_partitions", Array(Struct(
                    F("topic_id", Uuid),
                    F("partitions", Array(Int32)),
                ))),
            ), nullable="0+", default=None),
        ),
    ),
)  # fmt: skip

_DESCRIBED_ASSIGNMENT = Struct(
    F("topic_partitions", Array(Struct(
        F("topic_id", Uuid),
        F("topic_name", String),
        F("partitions", Array(Int32)),
    ))),
)  # fmt: skip

# KIP-848. v1 (KIP-1099) adds the member type; v0 is what librdkafka asks for.
CONSUMER_GROUP_DESCRIBE = Api(
    ApiKey.CONSUMER_GROUP_DESCRIBE,
    request=Message(
        "ConsumerGroupDescribeRequest",
        valid="0",
        flexible="0+",
        fields=(
            F("group_ids", Array(String)),
            F("include_authorized_operations", Boolean),
        ),
    ),
    response=Message(
        "ConsumerGroupDescribeResponse",
        valid="0",
        flexible="0+",
        fields=(
            F("throttle_time_ms", Int32),
            F("groups", Array(Struct(
                F("error_code", Int16),
                F("error_message", String, nullable="0+", default=None),
                F("group_id", String),
                F("group_state", String),
                F("group_epoch", Int32),
                F("assignment_epoch", Int32),
                F("assignor_name", String),
                F("members", Array(Struct(
                    F("member_id", String),
                    F("instance_id", String, nullable="0+", default=None),
                    F("rack_id", String, nullable="0+", default=None),
                    F("member_epoch", Int32),
                    F("client_id", String),
                    F("client_host", String),
                    F("subscribed_topic_names", Array(String)),
                    F("subscribed_topic_regex", String, nullable="0+", default=None),
                    F("assignment", _DESCRIBED_ASSIGNMENT),
                    F("target_assignment", _DESCRIBED_ASSIGNMENT),
                ))),
                F("authorized_operations", Int32, default=_NO_OPERATIONS),
            ))),
        ),
    ),
)  # fmt: skip

APIS = (
    FIND_COORDINATOR,
    JOIN_GROUP,
    HEARTBEAT,
    LEAVE_GROUP,
    SYNC_GROUP,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    OFFSET_DELETE,
    DESCRIBE_GROUPS,
    LIST_GROUPS,
    DELETE_GROUPS,
    CONSUMER_GROUP_HEARTBEAT,
    CONSUMER_GROUP_DESCRIBE,
)
