"""Admin APIs: CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords,
DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, DescribeCluster.

Facts from Kafka's ``common/message/*.json``, written by hand (see core.py).
"""

from ..api_keys import ApiKey
from ..schema import Api, Array, Message, Struct
from ..schema import Field as F
from ..types import Boolean, Int8, Int16, Int32, Int64, String, Uuid

_NO_OPERATIONS = -(2**31)  # INT32_MIN: "authorized operations not requested" (KIP-430)

# v5 flexible + the created topic's effective configs (KIP-525); v7 topic id (KIP-516).
CREATE_TOPICS = Api(
    ApiKey.CREATE_TOPICS,
    request=Message(
        "CreateTopicsRequest",
        valid="2-7",
        flexible="5+",
        fields=(
            F("topics", Array(Struct(
                F("name", String),
                F("num_partitions", Int32),
                F("replication_factor", Int16),
                F("assignments", Array(Struct(
                    F("partition_index", Int32),
                    F("broker_ids", Array(Int32)),
                ))),
                F("configs", Array(Struct(
                    F("name", String),
                    F("value", String, nullable="0+"),
                ))),
            ))),
            F("timeout_ms", Int32, default=60000),
            F("validate_only", Boolean, "1+", default=False),
        ),
    ),
    response=Message(
        "CreateTopicsResponse",
        valid="2-7",
        flexible="5+",
        fields=(
            F("throttle_time_ms", Int32, "2+"),
            F("topics", Array(Struct(
                F("name", String),
                F("topic_id", Uuid, "7+"),
                F("error_code", Int16),
                F("error_message", String, "1+", nullable="0+"),
                F("topic_config_error_code", Int16, "5+", tag=0),
                F("num_partitions", Int32, "5+", default=-1),
                F("replication_factor", Int16, "5+", default=-1),
                F("configs", Array(Struct(
                    F("name", String, "5+"),
                    F("value", String, "5+", nullable="5+"),
                    F("read_only", Boolean, "5+"),
                    F("config_source", Int8, "5+", default=-1),
                    F("is_sensitive", Boolean, "5+"),
                )), "5+", nullable="5+"),
            ))),
        ),
    ),
)  # fmt: skip

# v4 flexible; v6 delete by topic id (KIP-516).
DELETE_TOPICS = Api(
    ApiKey.DELETE_TOPICS,
    request=Message(
        "DeleteTopicsRequest",
        valid="1-6",
        flexible="4+",
        fields=(
            F("topics", Array(Struct(
                F("name", String, "6+", nullable="6+", default=None),
                F("topic_id", Uuid, "6+"),
            )), "6+"),
            F("topic_names", Array(String), "0-5"),
            F("timeout_ms", Int32),
        ),
    ),
    response=Message(
        "DeleteTopicsResponse",
        valid="1-6",
        flexible="4+",
        fields=(
            F("throttle_time_ms", Int32, "1+"),
            F("responses", Array(Struct(
                F("name", String, nullable="6+"),
                F("topic_id", Uuid, "6+"),
                F("error_code", Int16),
                F("error_message", String, "5+", nullable="5+", default=None),
            ))),
        ),
    ),
)  # fmt: skip

# KIP-107.
DELETE_RECORDS = Api(
    ApiKey.DELETE_RECORDS,
    request=Message(
        "DeleteRecordsRequest",
        valid="0-2",
        flexible="2+",
        fields=(
            F("topics", Array(Struct(
                F("name", String),
                F("partitions", Array(Struct(
                    F("partition_index", Int32),
                    F("offset", Int64),
                ))),
            ))),
            F("timeout_ms", Int32),
        ),
    ),
    response=Message(
        "DeleteRecordsResponse",
        valid="0-2",
        flexible="2+",
        fields=(
            F("throttle_time_ms", Int32),
            F("topics", Array(Struct(
                F("name", String),
                F("partitions", Array(Struct(
                    F("partition_index", Int32),
                    F("low_watermark", Int64),
                    F("error_code", Int16),
                ))),
            ))),
        ),
    ),
)  # fmt: skip

# KIP-195.
CREATE_PARTITIONS = Api(
    ApiKey.CREATE_PARTITIONS,
    request=Message(
        "CreatePartitionsRequest",
        valid="0-3",
        flexible="2+",
        fields=(
            F("topics", Array(Struct(
                F("name", String),
                F("count", Int32),
                F("assignments", Array(Struct(
                    F("broker_ids", Array(Int32)),
                )), nullable="0+"),
            ))),
            F("timeout_ms", Int32),
            F("validate_only", Boolean),
        ),
    ),
    response=Message(
        "CreatePartitionsResponse",
        valid="0-3",
        flexible="2+",
        fields=(
            F("throttle_time_ms", Int32),
            F("results", Array(Struct(
                F("name", String),
                F("error_code", Int16),
                F("error_message", String, nullable="0+", default=None),
            ))),
        ),
    ),
)  # fmt: skip

# v1 synonyms + config source (KIP-226); v3 documentation and type (KIP-569).
DESCRIBE_CONFIGS = Api(
    ApiKey.DESCRIBE_CONFIGS,
    request=Message(
        "DescribeConfigsRequest",
        valid="1-4",
        flexible="4+",
        fields=(
            F("resources", Array(Struct(
                F("resource_type", Int8),
                F("resource_name", String),
                F("configuration_keys", Array(String), nullable="0+"),
            ))),
            F("include_synonyms", Boolean, "1+", default=False),
            F("include_documentation", Boolean, "3+", default=False),
        ),
    ),
    response=Message(
        "DescribeConfigsResponse",
        valid="1-4",
        flexible="4+",
        fields=(
            F("throttle_time_ms", Int32),
            F("results", Array(Struct(
                F("error_code", Int16),
                F("error_message", String, nullable="0+"),
                F("resource_type", Int8),
                F("resource_name", String),
                F("configs", Array(Struct(
                    F("name", String),
                    F("value", String, nullable="0+"),
                    F("read_only", Boolean),
                    F("config_source", Int8, "1+", default=-1),
                    F("is_sensitive", Boolean),
                    F("synonyms", Array(Struct(
                        F("name", String, "1+"),
                        F("value", String, "1+", nullable="0+"),
                        F("source", Int8, "1+"),
                    )), "1+"),
                    F("config_type", Int8, "3+", default=0),
                    F("documentation", String, "3+", nullable="0+"),
                ))),
            ))),
        ),
    ),
)  # fmt: skip

ALTER_CONFIGS = Api(
    ApiKey.ALTER_CONFIGS,
    request=Message(
        "AlterConfigsRequest",
        valid="0-2",
        flexible="2+",
        fields=(
            F("resources", Array(Struct(
                F("resource_type", Int8),
                F("resource_name", String),
                F("configs", Array(Struct(
                    F("name", String),
                    F("value", String, nullable="0+"),
                ))),
            ))),
            F("validate_only", Boolean),
        ),
    ),
    response=Message(
        "AlterConfigsResponse",
        valid="0-2",
        flexible="2+",
        fields=(
            F("throttle_time_ms", Int32),
            F("responses", Array(Struct(
                F("error_code", Int16),
                F("error_message", String, nullable="0+"),
                F("resource_type", Int8),
                F("resource_name", String),
            ))),
        ),
    ),
)  # fmt: skip

# KIP-339.
INCREMENTAL_ALTER_CONFIGS = Api(
    ApiKey.INCREMENTAL_ALTER_CONFIGS,
    request=Message(
        "IncrementalAlterConfigsRequest",
        valid="0-1",
        flexible="1+",
        fields=(
            F("resources", Array(Struct(
                F("resource_type", Int8),
                F("resource_name", String),
                F("configs", Array(Struct(
                    F("name", String),
                    F("config_operation", Int8),
                    F("value", String, nullable="0+"),
                ))),
            ))),
            F("validate_only", Boolean),
        ),
    ),
    response=Message(
        "IncrementalAlterConfigsResponse",
        valid="0-1",
        flexible="1+",
        fields=(
            F("throttle_time_ms", Int32),
            F("responses", Array(Struct(
                F("error_code", Int16),
                F("error_message", String, nullable="0+"),
                F("resource_type", Int8),
                F("resource_name", String),
            ))),
        ),
    ),
)  # fmt: skip

# KIP-700; v1 endpoint type (KIP-919).
DESCRIBE_CLUSTER = Api(
    ApiKey.DESCRIBE_CLUSTER,
    request=Message(
        "DescribeClusterRequest",
        valid="0-1",
        flexible="0+",
        fields=(
            F("include_cluster_authorized_operations", Boolean),
            F("endpoint_type", Int8, "1+", default=1),
        ),
    ),
    response=Message(
        "DescribeClusterResponse",
        valid="0-1",
        flexible="0+",
        fields=(
            F("throttle_time_ms", Int32),
            F("error_code", Int16),
            F("error_message", String, nullable="0+", default=None),
            F("endpoint_type", Int8, "1+", default=1),
            F("cluster_id", String),
            F("controller_id", Int32, default=-1),
            F("brokers", Array(Struct(
                F("broker_id", Int32),
                F("host", String),
                F("port", Int32),
                F("rack", String, nullable="0+", default=None),
            ))),
            F("cluster_authorized_operations", Int32, default=_NO_OPERATIONS),
        ),
    ),
)  # fmt: skip

APIS = (
    CREATE_TOPICS,
    DELETE_TOPICS,
    DELETE_RECORDS,
    CREATE_PARTITIONS,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
    INCREMENTAL_ALTER_CONFIGS,
    DESCRIBE_CLUSTER,
)
