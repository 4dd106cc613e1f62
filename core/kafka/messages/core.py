"""Bootstrap and data-path APIs: ApiVersions, Metadata, Produce, Fetch, ListOffsets,
OffsetForLeaderEpoch, InitProducerId.

Field names, versions, nullability, defaults and tags are the facts of Kafka's
``clients/src/main/resources/common/message/*.json``, written here by hand in
snake_case. Only versions Floe supports are declared; fields that exist only
outside those versions are left out.
"""

from ..api_keys import ApiKey
from ..schema import Api, Array, Message, Struct
from ..schema import Field as F
from ..types import Boolean, Int8, Int16, Int32, Int64, Records, String, Uuid

_NO_OPERATIONS = -(2**31)  # INT32_MIN: "authorized operations not requested" (KIP-430)

# KIP-511: v3 adds the client's software name/version; ApiVersions responses
# keep response header v0 even in flexible versions so old clients can parse them.
API_VERSIONS = Api(
    ApiKey.API_VERSIONS,
    request=Message(
        "ApiVersionsRequest",
        valid="0-3",
        flexible="3+",
        fields=(
            F("client_software_name", String, "3+"),
            F("client_software_version", String, "3+"),
        ),
    ),
    response=Message(
        "ApiVersionsResponse",
        valid="0-3",
        flexible="3+",
        fields=(
            F("error_code", Int16),
            F("api_keys", Array(Struct(
                F("api_key", Int16),
                F("min_version", Int16),
                F("max_version", Int16),
            ))),
            F("throttle_time_ms", Int32, "1+"),
            # KIP-584 feature flags, tagged.
            F("supported_features", Array(Struct(
                F("name", String, "3+"),
                F("min_version", Int16, "3+"),
                F("max_version", Int16, "3+"),
            )), "3+", tag=0),
            F("finalized_features_epoch", Int64, "3+", tag=1, default=-1),
            F("finalized_features", Array(Struct(
                F("name", String, "3+"),
                F("max_version_level", Int16, "3+"),
                F("min_version_level", Int16, "3+"),
            )), "3+", tag=2),
            F("zk_migration_ready", Boolean, "3+", tag=3, default=False),
        ),
    ),
)  # fmt: skip

# v1: null topics = all topics (v0: empty = all); v4 auto-creation flag;
# v8 authorized operations (KIP-430); v10 topic ids (KIP-516).
METADATA = Api(
    ApiKey.METADATA,
    request=Message(
        "MetadataRequest",
        valid="0-12",
        flexible="9+",
        fields=(
            F("topics", Array(Struct(
                F("topic_id", Uuid, "10+"),
                F("name", String, nullable="10+"),
            )), nullable="1+"),
            F("allow_auto_topic_creation", Boolean, "4+", default=True),
            F("include_cluster_authorized_operations", Boolean, "8-10"),
            F("include_topic_authorized_operations", Boolean, "8+"),
        ),
    ),
    response=Message(
        "MetadataResponse",
        valid="0-12",
        flexible="9+",
        fields=(
            F("throttle_time_ms", Int32, "3+"),
            F("brokers", Array(Struct(
                F("node_id", Int32),
                F("host", String),
                F("port", Int32),
                F("rack", String, "1+", nullable="1+", default=None),
            ))),
            F("cluster_id", String, "2+", nullable="2+", default=None),
            F("controller_id", Int32, "1+", default=-1),
            F("topics", Array(Struct(
                F("error_code", Int16),
                F("name", String, nullable="12+"),
                F("topic_id", Uuid, "10+"),
                F("is_internal", Boolean, "1+", default=False),
                F("partitions", Array(Struct(
                    F("error_code", Int16),
                    F("partition_index", Int32),
                    F("leader_id", Int32),
                    F("leader_epoch", Int32, "7+", default=-1),
                    F("replica_nodes", Array(Int32)),
                    F("isr_nodes", Array(Int32)),
                    F("offline_replicas", Array(Int32), "5+"),
                ))),
                F("topic_authorized_operations", Int32, "8+", default=_NO_OPERATIONS),
            ))),
            F("cluster_authorized_operations", Int32, "8-10", default=_NO_OPERATIONS),
        ),
    ),
)  # fmt: skip

# v3 transactional id + message format v2 (KIP-98); v8 record errors (KIP-467);
# v9 flexible (KIP-482).
PRODUCE = Api(
    ApiKey.PRODUCE,
    request=Message(
        "ProduceRequest",
        valid="3-9",
        flexible="9+",
        fields=(
            F("transactional_id", String, "3+", nullable="3+", default=None),
            F("acks", Int16),
            F("timeout_ms", Int32),
            F("topic_data", Array(Struct(
                F("name", String),
                F("partition_data", Array(Struct(
                    F("index", Int32),
                    F("records", Records, nullable="0+"),
                ))),
            ))),
        ),
    ),
    response=Message(
        "ProduceResponse",
        valid="3-9",
        flexible="9+",
        fields=(
            F("responses", Array(Struct(
                F("name", String),
                F("partition_responses", Array(Struct(
                    F("index", Int32),
                    F("error_code", Int16),
                    F("base_offset", Int64),
                    F("log_append_time_ms", Int64, "2+", default=-1),
                    F("log_start_offset", Int64, "5+", default=-1),
                    F("record_errors", Array(Struct(
                        F("batch_index", Int32, "8+"),
                        F("batch_index_error_message", String, "8+", nullable="8+", default=None),
                    )), "8+"),
                    F("error_message", String, "8+", nullable="8+", default=None),
                ))),
            ))),
            F("throttle_time_ms", Int32, "1+", default=0),
        ),
    ),
)  # fmt: skip

# v4 isolation level (KIP-98); v7 fetch sessions (KIP-227); v9 leader epoch
# (KIP-320); v11 rack id (KIP-392); v12 flexible + diverging epoch (KIP-595);
# v13 topic ids instead of names (KIP-516).
FETCH = Api(
    ApiKey.FETCH,
    request=Message(
        "FetchRequest",
        valid="4-13",
        flexible="12+",
        fields=(
            F("cluster_id", String, "12+", nullable="12+", default=None, tag=0),
            F("replica_id", Int32, "0-14", default=-1),
            F("max_wait_ms", Int32),
            F("min_bytes", Int32),
            F("max_bytes", Int32, "3+", default=0x7FFFFFFF),
            F("isolation_level", Int8, "4+", default=0),
            F("session_id", Int32, "7+", default=0),
            F("session_epoch", Int32, "7+", default=-1),
            F("topics", Array(Struct(
                F("topic", String, "0-12"),
                F("topic_id", Uuid, "13+"),
                F("partitions", Array(Struct(
                    F("partition", Int32),
                    F("current_leader_epoch", Int32, "9+", default=-1),
                    F("fetch_offset", Int64),
                    F("last_fetched_epoch", Int32, "12+", default=-1),
                    F("log_start_offset", Int64, "5+", default=-1),
                    F("partition_max_bytes", Int32),
                ))),
            ))),
            F("forgotten_topics_data", Array(Struct(
                F("topic", String, "7-12"),
                F("topic_id", Uuid, "13+"),
                F("partitions", Array(Int32), "7+"),
            )), "7+"),
            F("rack_id", String, "11+", default=""),
        ),
    ),
    response=Message(
        "FetchResponse",
        valid="4-13",
        flexible="12+",
        fields=(
            F("throttle_time_ms", Int32, "1+"),
            F("error_code", Int16, "7+"),
            F("session_id", Int32, "7+", default=0),
            F("responses", Array(Struct(
                F("topic", String, "0-12"),
                F("topic_id", Uuid, "13+"),
                F("partitions", Array(Struct(
                    F("partition_index", Int32),
                    F("error_code", Int16),
                    F("high_watermark", Int64),
                    F("last_stable_offset", Int64, "4+", default=-1),
                    F("log_start_offset", Int64, "5+", default=-1),
                    F("diverging_epoch", Struct(
                        F("epoch", Int32, "12+", default=-1),
                        F("end_offset", Int64, "12+", default=-1),
                    ), "12+", tag=0),
                    F("current_leader", Struct(
                        F("leader_id", Int32, "12+", default=-1),
                        F("leader_epoch", Int32, "12+", default=-1),
                    ), "12+", tag=1),
                    F("snapshot_id", Struct(
                        F("end_offset", Int64, default=-1),
                        F("epoch", Int32, default=-1),
                    ), "12+", tag=2),
                    F("aborted_transactions", Array(Struct(
                        F("producer_id", Int64, "4+"),
                        F("first_offset", Int64, "4+"),
                    )), "4+", nullable="4+"),
                    F("preferred_read_replica", Int32, "11+", default=-1),
                    F("records", Records, nullable="0+"),
                ))),
            ))),
        ),
    ),
)  # fmt: skip

# v1 drops v0's offset lists; v2 isolation level; v4 leader epoch (KIP-320);
# v6 flexible; v7 max-timestamp lookups (KIP-734).
LIST_OFFSETS = Api(
    ApiKey.LIST_OFFSETS,
    request=Message(
        "ListOffsetsRequest",
        valid="1-7",
        flexible="6+",
        fields=(
            F("replica_id", Int32),
            F("isolation_level", Int8, "2+"),
            F("topics", Array(Struct(
                F("name", String),
                F("partitions", Array(Struct(
                    F("partition_index", Int32),
                    F("current_leader_epoch", Int32, "4+", default=-1),
                    F("timestamp", Int64),
                ))),
            ))),
        ),
    ),
    response=Message(
        "ListOffsetsResponse",
        valid="1-7",
        flexible="6+",
        fields=(
            F("throttle_time_ms", Int32, "2+"),
            F("topics", Array(Struct(
                F("name", String),
                F("partitions", Array(Struct(
                    F("partition_index", Int32),
                    F("error_code", Int16),
                    F("timestamp", Int64, "1+", default=-1),
                    F("offset", Int64, "1+", default=-1),
                    F("leader_epoch", Int32, "4+", default=-1),
                ))),
            ))),
        ),
    ),
)  # fmt: skip

# KIP-101/KIP-320: v2 current leader epoch, v3 replica id, v4 flexible.
OFFSET_FOR_LEADER_EPOCH = Api(
    ApiKey.OFFSET_FOR_LEADER_EPOCH,
    request=Message(
        "OffsetForLeaderEpochRequest",
        valid="0-4",
        flexible="4+",
        fields=(
            F("replica_id", Int32, "3+", default=-2),
            F("topics", Array(Struct(
                F("topic", String),
                F("partitions", Array(Struct(
                    F("partition", Int32),
                    F("current_leader_epoch", Int32, "2+", default=-1),
                    F("leader_epoch", Int32),
                ))),
            ))),
        ),
    ),
    response=Message(
        "OffsetForLeaderEpochResponse",
        valid="0-4",
        flexible="4+",
        fields=(
            F("throttle_time_ms", Int32, "2+"),
            F("topics", Array(Struct(
                F("topic", String),
                F("partitions", Array(Struct(
                    F("error_code", Int16),
                    F("partition", Int32),
                    F("leader_epoch", Int32, "1+", default=-1),
                    F("end_offset", Int64, default=-1),
                ))),
            ))),
        ),
    ),
)  # fmt: skip

# KIP-98 idempotent/transactional producers; v3 lets a producer bump its epoch (KIP-360).
INIT_PRODUCER_ID = Api(
    ApiKey.INIT_PRODUCER_ID,
    request=Message(
        "InitProducerIdRequest",
        valid="0-4",
        flexible="2+",
        fields=(
            F("transactional_id", String, nullable="0+"),
            F("transaction_timeout_ms", Int32),
            F("producer_id", Int64, "3+", default=-1),
            F("producer_epoch", Int16, "3+", default=-1),
        ),
    ),
    response=Message(
        "InitProducerIdResponse",
        valid="0-4",
        flexible="2+",
        fields=(
            F("throttle_time_ms", Int32),
            F("error_code", Int16),
            F("producer_id", Int64, default=-1),
            F("producer_epoch", Int16),
        ),
    ),
)  # fmt: skip

APIS = (
    API_VERSIONS,
    METADATA,
    PRODUCE,
    FETCH,
    LIST_OFFSETS,
    OFFSET_FOR_LEADER_EPOCH,
    INIT_PRODUCER_ID,
)
