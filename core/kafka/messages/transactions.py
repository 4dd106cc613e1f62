"""Transaction APIs (KIP-98): AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
TxnOffsetCommit, and the admin tools' DescribeTransactions and ListTransactions (KIP-664).

Facts from Kafka's ``common/message/*.json``, written by hand (see core.py).
"""

from ..api_keys import ApiKey
from ..schema import Api, Array, Message, Struct
from ..schema import Field as F
from ..types import Boolean, Int16, Int32, Int64, String

_PARTITION_RESULTS = Array(Struct(
    F("name", String),
    F("results_by_partition", Array(Struct(
        F("partition_index", Int32),
        F("partition_error_code", Int16),
    ))),
))  # fmt: skip

_TOPICS = Array(Struct(
    F("name", String),
    F("partitions", Array(Int32)),
))  # fmt: skip

# v2 PRODUCER_FENCED; v3 flexible; v4 batches several transactions (brokers' form, with
# VerifyOnly, KIP-890) and a top-level error; v5 TRANSACTION_ABORTABLE.
ADD_PARTITIONS_TO_TXN = Api(
    ApiKey.ADD_PARTITIONS_TO_TXN,
    request=Message(
        "AddPartitionsToTxnRequest",
        valid="0-5",
        flexible="3+",
        fields=(
            F("transactions", Array(Struct(
                F("transactional_id", String, "4+"),
                F("producer_id", Int64, "4+"),
                F("producer_epoch", Int16, "4+"),
                F("verify_only", Boolean, "4+", default=False),
                F("topics", _TOPICS, "4+"),
            )), "4+"),
            F("v3_and_below_transactional_id", String, "0-3"),
            F("v3_and_below_producer_id", Int64, "0-3"),
            F("v3_and_below_producer_epoch", Int16, "0-3"),
            F("v3_and_below_topics", _TOPICS, "0-3"),
        ),
    ),
    response=Message(
        "AddPartitionsToTxnResponse",
        valid="0-5",
        flexible="3+",
        fields=(
            F("throttle_time_ms", Int32),
            F("error_code", Int16, "4+"),
            F("results_by_transaction", Array(Struct(
                F("transactional_id", String, "4+"),
                F("topic_results", _PARTITION_RESULTS, "4+"),
            )), "4+"),
            F("results_by_topic_v3_and_below", _PARTITION_RESULTS, "0-3"),
        ),
    ),
)  # fmt: skip

# v2 PRODUCER_FENCED; v3 flexible; v4 TRANSACTION_ABORTABLE.
ADD_OFFSETS_TO_TXN = Api(
    ApiKey.ADD_OFFSETS_TO_TXN,
    request=Message(
        "AddOffsetsToTxnRequest",
        valid="0-4",
        flexible="3+",
        fields=(
            F("transactional_id", String),
            F("producer_id", Int64),
            F("producer_epoch", Int16),
            F("group_id", String),
        ),
    ),
    response=Message(
        "AddOffsetsToTxnResponse",
        valid="0-4",
        flexible="3+",
        fields=(
            F("throttle_time_ms", Int32),
            F("error_code", Int16),
        ),
    ),
)

# v2 PRODUCER_FENCED; v3 flexible; v4 TRANSACTION_ABORTABLE. (v5, an epoch bump on every
# transaction, KIP-890 part 2, is not served.)
END_TXN = Api(
    ApiKey.END_TXN,
    request=Message(
        "EndTxnRequest",
        valid="0-4",
        flexible="3+",
        fields=(
            F("transactional_id", String),
            F("producer_id", Int64),
            F("producer_epoch", Int16),
            F("committed", Boolean),
        ),
    ),
    response=Message(
        "EndTxnResponse",
        valid="0-4",
        flexible="3+",
        fields=(
            F("throttle_time_ms", Int32),
            F("error_code", Int16),
        ),
    ),
)

# v2 committed leader epoch; v3 flexible, generation/member/instance ids (KIP-447).
TXN_OFFSET_COMMIT = Api(
    ApiKey.TXN_OFFSET_COMMIT,
    request=Message(
        "TxnOffsetCommitRequest",
        valid="0-3",
        flexible="3+",
        fields=(
            F("transactional_id", String),
            F("group_id", String),
            F("producer_id", Int64),
            F("producer_epoch", Int16),
            F("generation_id", Int32, "3+", default=-1),
            F("member_id", String, "3+", default=""),
            F("group_instance_id", String, "3+", nullable="3+", default=None),
            F("topics", Array(Struct(
                F("name", String),
                F("partitions", Array(Struct(
                    F("partition_index", Int32),
                    F("committed_offset", Int64),
                    F("committed_leader_epoch", Int32, "2+", default=-1),
                    F("committed_metadata", String, nullable="0+"),
                ))),
            ))),
        ),
    ),
    response=Message(
        "TxnOffsetCommitResponse",
        valid="0-3",
        flexible="3+",
        fields=(
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

DESCRIBE_TRANSACTIONS = Api(
    ApiKey.DESCRIBE_TRANSACTIONS,
    request=Message(
        "DescribeTransactionsRequest",
        valid="0",
        flexible="0+",
        fields=(F("transactional_ids", Array(String)),),
    ),
    response=Message(
        "DescribeTransactionsResponse",
        valid="0",
        flexible="0+",
        fields=(
            F("throttle_time_ms", Int32),
            F("transaction_states", Array(Struct(
                F("error_code", Int16),
                F("transactional_id", String),
                F("transaction_state", String),
                F("transaction_timeout_ms", Int32),
                F("transaction_start_time_ms", Int64),
                F("producer_id", Int64),
                F("producer_epoch", Int16),
                F("topics", Array(Struct(
                    F("topic", String),
                    F("partitions", Array(Int32)),
                ))),
            ))),
        ),
    ),
)  # fmt: skip

# v1 duration filter.
LIST_TRANSACTIONS = Api(
    ApiKey.LIST_TRANSACTIONS,
    request=Message(
        "ListTransactionsRequest",
        valid="0-1",
        flexible="0+",
        fields=(
            F("state_filters", Array(String)),
            F("producer_id_filters", Array(Int64)),
            F("duration_filter", Int64, "1+", default=-1),
        ),
    ),
    response=Message(
        "ListTransactionsResponse",
        valid="0-1",
        flexible="0+",
        fields=(
            F("throttle_time_ms", Int32),
            F("error_code", Int16),
            F("unknown_state_filters", Array(String)),
            F("transaction_states", Array(Struct(
                F("transactional_id", String),
                F("producer_id", Int64),
                F("transaction_state", String),
            ))),
        ),
    ),
)  # fmt: skip

APIS = (
    ADD_PARTITIONS_TO_TXN,
    ADD_OFFSETS_TO_TXN,
    END_TXN,
    TXN_OFFSET_COMMIT,
    DESCRIBE_TRANSACTIONS,
    LIST_TRANSACTIONS,
)
