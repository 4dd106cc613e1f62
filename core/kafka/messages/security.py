"""Security APIs: SaslHandshake, SaslAuthenticate, DescribeAcls, CreateAcls, DeleteAcls,
DescribeUserScramCredentials, AlterUserScramCredentials.

Facts from Kafka's ``common/message/*.json``, written by hand (see core.py).
"""

from ..api_keys import ApiKey
from ..schema import Api, Array, Message, Struct
from ..schema import Field as F
from ..types import Bytes, Int8, Int16, Int32, Int64, String

# ResourcePatternType.LITERAL (KIP-290): the filter value before pattern types existed.
_LITERAL = 3

# v1: SASL tokens travel in SaslAuthenticate requests instead of raw frames (KIP-152).
SASL_HANDSHAKE = Api(
    ApiKey.SASL_HANDSHAKE,
    request=Message(
        "SaslHandshakeRequest",
        valid="0-1",
        flexible="none",
        fields=(F("mechanism", String),),
    ),
    response=Message(
        "SaslHandshakeResponse",
        valid="0-1",
        flexible="none",
        fields=(
            F("error_code", Int16),
            F("mechanisms", Array(String)),
        ),
    ),
)

# KIP-152; v1 session lifetime (KIP-368).
SASL_AUTHENTICATE = Api(
    ApiKey.SASL_AUTHENTICATE,
    request=Message(
        "SaslAuthenticateRequest",
        valid="0-2",
        flexible="2+",
        fields=(F("auth_bytes", Bytes),),
    ),
    response=Message(
        "SaslAuthenticateResponse",
        valid="0-2",
        flexible="2+",
        fields=(
            F("error_code", Int16),
            F("error_message", String, nullable="0+"),
            F("auth_bytes", Bytes),
            F("session_lifetime_ms", Int64, "1+", default=0),
        ),
    ),
)

# v1 resource pattern types (KIP-290).
DESCRIBE_ACLS = Api(
    ApiKey.DESCRIBE_ACLS,
    request=Message(
        "DescribeAclsRequest",
        valid="0-3",
        flexible="2+",
        fields=(
            F("resource_type_filter", Int8),
            F("resource_name_filter", String, nullable="0+"),
            F("pattern_type_filter", Int8, "1+", default=_LITERAL),
            F("principal_filter", String, nullable="0+"),
            F("host_filter", String, nullable="0+"),
            F("operation", Int8),
            F("permission_type", Int8),
        ),
    ),
    response=Message(
        "DescribeAclsResponse",
        valid="0-3",
        flexible="2+",
        fields=(
            F("throttle_time_ms", Int32),
            F("error_code", Int16),
            F("error_message", String, nullable="0+"),
            F("resources", Array(Struct(
                F("resource_type", Int8),
                F("resource_name", String),
                F("pattern_type", Int8, "1+", default=_LITERAL),
                F("acls", Array(Struct(
                    F("principal", String),
                    F("host", String),
                    F("operation", Int8),
                    F("permission_type", Int8),
                ))),
            ))),
        ),
    ),
)  # fmt: skip

CREATE_ACLS = Api(
    ApiKey.CREATE_ACLS,
    request=Message(
        "CreateAclsRequest",
        valid="0-3",
        flexible="2+",
        fields=(
            F("creations", Array(Struct(
                F("resource_type", Int8),
                F("resource_name", String),
                F("resource_pattern_type", Int8, "1+", default=_LITERAL),
                F("principal", String),
                F("host", String),
                F("operation", Int8),
                F("permission_type", Int8),
            ))),
        ),
    ),
    response=Message(
        "CreateAclsResponse",
        valid="0-3",
        flexible="2+",
        fields=(
            F("throttle_time_ms", Int32),
            F("results", Array(Struct(
                F("error_code", Int16),
                F("error_message", String, nullable="0+"),
            ))),
        ),
    ),
)  # fmt: skip

DELETE_ACLS = Api(
    ApiKey.DELETE_ACLS,
    request=Message(
        "DeleteAclsRequest",
        valid="0-3",
        flexible="2+",
        fields=(
            F("filters", Array(Struct(
                F("resource_type_filter", Int8),
                F("resource_name_filter", String, nullable="0+"),
                F("pattern_type_filter", Int8, "1+", default=_LITERAL),
                F("principal_filter", String, nullable="0+"),
                F("host_filter", String, nullable="0+"),
                F("operation", Int8),
                F("permission_type", Int8),
            ))),
        ),
    ),
    response=Message(
        "DeleteAclsResponse",
        valid="0-3",
        flexible="2+",
        fields=(
            F("throttle_time_ms", Int32),
            F("filter_results", Array(Struct(
                F("error_code", Int16),
                F("error_message", String, nullable="0+"),
                F("matching_acls", Array(Struct(
                    F("error_code", Int16),
                    F("error_message", String, nullable="0+"),
                    F("resource_type", Int8),
                    F("resource_name", String),
                    F("pattern_type", Int8, "1+", default=_LITERAL),
                    F("principal", String),
                    F("host", String),
                    F("operation", Int8),
                    F("permission_type", Int8),
                ))),
            ))),
        ),
    ),
)  # fmt: skip

# KIP-554: SCRAM credentials managed over the Kafka protocol. Mechanism 1 is
# SCRAM-SHA-256, 2 SCRAM-SHA-512; the client sends the salted password, never the password.
DESCRIBE_USER_SCRAM_CREDENTIALS = Api(
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
    request=Message(
        "DescribeUserScramCredentialsRequest",
        valid="0",
        flexible="0+",
        fields=(F("users", Array(Struct(F("name", String))), nullable="0+"),),
    ),
    response=Message(
        "DescribeUserScramCredentialsResponse",
        valid="0",
        flexible="0+",
        fields=(
            F("throttle_time_ms", Int32),
            F("error_code", Int16),
            F("error_message", String, nullable="0+", default=None),
            F("results", Array(Struct(
                F("user", String),
                F("error_code", Int16),
                F("error_message", String, nullable="0+", default=None),
                F("credential_infos", Array(Struct(
                    F("mechanism", Int8),
                    F("iterations", Int32),
                ))),
            ))),
        ),
    ),
)  # fmt: skip

ALTER_USER_SCRAM_CREDENTIALS = Api(
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
    request=Message(
        "AlterUserScramCredentialsRequest",
        valid="0",
        flexible="0+",
        fields=(
            F("deletions", Array(Struct(F("name", String), F("mechanism", Int8)))),
            F("upsertions", Array(Struct(
                F("name", String),
                F("mechanism", Int8),
                F("iterations", Int32),
                F("salt", Bytes),
                F("salted_password", Bytes),
            ))),
        ),
    ),
    response=Message(
        "AlterUserScramCredentialsResponse",
        valid="0",
        flexible="0+",
        fields=(
            F("throttle_time_ms", Int32),
            F("results", Array(Struct(
                F("user", String),
                F("error_code", Int16),
                F("error_message", String, nullable="0+", default=None),
            ))),
        ),
    ),
)  # fmt: skip

APIS = (
    SASL_HANDSHAKE,
    SASL_AUTHENTICATE,
    DESCRIBE_ACLS,
    CREATE_ACLS,
    DELETE_ACLS,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
    ALTER_USER_SCRAM_CREDENTIALS,
)
