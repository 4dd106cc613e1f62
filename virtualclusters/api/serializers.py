"""Serializers for the virtual-cluster REST API (shapes only; no business logic)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.topic_types import TOPIC_TYPES
from metadata_store.models import Topic
from metadata_store.selectors import Bootstrap, bootstrap_servers, bootstraps, schema_registries
from metadata_store.topic_configs import MAX_PARTITIONS, configs_schema
from tenancy.api.strict import StrictSerializer
from tenancy.api.typed import ModelSerializer, Serializer
from virtualclusters.models import AgentKey, VirtualCluster
from virtualclusters.services import AGENT_GROUP_PATTERN, CONFIG_BOUNDS, MAX_JOBS_AGENT_GROUPS


class ClusterConfigSerializer(StrictSerializer):
    auto_create_topics = serializers.BooleanField(required=False)
    default_partitions = serializers.IntegerField(
        required=False,
        min_value=CONFIG_BOUNDS["default_partitions"][0],
        max_value=CONFIG_BOUNDS["default_partitions"][1],
    )
    default_retention_ms = serializers.IntegerField(
        required=False,
        min_value=CONFIG_BOUNDS["default_retention_ms"][0],
        max_value=CONFIG_BOUNDS["default_retention_ms"][1],
    )
    acls_enabled = serializers.BooleanField(required=False)
    max_flush_age_ms = serializers.IntegerField(
        required=False,
        min_value=CONFIG_BOUNDS["max_flush_age_ms"][0],
        max_value=CONFIG_BOUNDS["max_flush_age_ms"][1],
    )
    max_flush_bytes = serializers.IntegerField(
        required=False,
        min_value=CONFIG_BOUNDS["max_flush_bytes"][0],
        max_value=CONFIG_BOUNDS["max_flush_bytes"][1],
    )
    consumer_session_timeout_ms = serializers.IntegerField(
        required=False,
        min_value=CONFIG_BOUNDS["consumer_session_timeout_ms"][0],
        max_value=CONFIG_BOUNDS["consumer_session_timeout_ms"][1],
        help_text="group.consumer.session.timeout.ms of KIP-848 (group.protocol=consumer) groups.",
    )
    consumer_heartbeat_interval_ms = serializers.IntegerField(
        required=False,
        min_value=CONFIG_BOUNDS["consumer_heartbeat_interval_ms"][0],
        max_value=CONFIG_BOUNDS["consumer_heartbeat_interval_ms"][1],
        help_text="group.consumer.heartbeat.interval.ms of KIP-848 groups.",
    )
    default_topic_type = serializers.ChoiceField(
        required=False,
        choices=list(TOPIC_TYPES),
        help_text="floe.topic.type of topics that do not set it: lightning topics acknowledge "
        "a produce once its file is in the bucket and commit it asynchronously.",
    )
    ripcord = serializers.BooleanField(
        required=False,
        help_text="Ripcord: while the control plane is unreachable, agents acknowledge produce "
        "once it is journaled in the bucket (committed when the control plane is back) and "
        "answer metadata, groups and reads of committed data from what they know.",
    )
    jobs_agent_groups = serializers.ListField(
        child=serializers.RegexField(rf"^{AGENT_GROUP_PATTERN}$", max_length=63),
        max_length=MAX_JOBS_AGENT_GROUPS,
        required=False,
        help_text="The agent groups whose jobs-role agents run the cluster's jobs (compaction, "
        "retention, table appends) and migrations; empty: any group.",
    )


class BootstrapSerializer(Serializer):
    agent_group = serializers.CharField()
    listener = serializers.CharField(
        allow_blank=True, help_text="Listener name (empty: agents older than listeners)."
    )
    security_protocol = serializers.CharField(allow_blank=True)
    bootstrap = serializers.SerializerMethodField(help_text="bootstrap.servers, comma-separated.")

    def get_bootstrap(self, bootstrap: Bootstrap) -> str:
        return ",".join(bootstrap.servers)


class SchemaRegistrySerializer(Serializer):
    agent_group = serializers.CharField()
    urls = serializers.ListField(
        child=serializers.CharField(),
        help_text="The group's schema-registry agents' REST API (a Confluent client's url).",
    )


class ClusterSerializer(ModelSerializer):
    id = serializers.CharField(source="public_id", read_only=True)
    config = serializers.SerializerMethodField()
    bootstrap = serializers.SerializerMethodField(
        help_text="bootstrap.servers for this cluster's Kafka clients: the addresses its live "
        "agents advertise (each one's first listener), comma-separated; null until an agent of "
        "this cluster runs. With several agent groups or listener kinds, use `bootstraps`."
    )

    bootstraps = serializers.SerializerMethodField(
        help_text="bootstrap.servers per agent group and listener kind: a client is only "
        "ever sent to agents of the group and listener kind it connected to."
    )

    schema_registries = serializers.SerializerMethodField(
        help_text="Schema Registry URLs per agent group (its live schema-registry agents'): "
        "like Kafka clients, a registry client uses its own group's agents."
    )

    class Meta:
        model = VirtualCluster
        fields = [
            "id",
            "name",
            "created_at",
            "bootstrap",
            "bootstraps",
            "schema_registries",
            "bucket_url",
            "config",
        ]
        read_only_fields = fields

    def get_config(self, cluster: VirtualCluster) -> dict[str, Any]:

        return cluster.config()

    @extend_schema_field({"type": "string", "nullable": True, "example": "10.0.1.2:9092"})
    def get_bootstrap(self, cluster: VirtualCluster) -> str | None:
        return ",".join(bootstrap_servers(cluster)) or None

    @extend_schema_field(BootstrapSerializer(many=True))
    def get_bootstraps(self, cluster: VirtualCluster) -> list[dict[str, Any]]:
        return list(BootstrapSerializer(bootstraps(cluster), many=True).data)

    @extend_schema_field(SchemaRegistrySerializer(many=True))
    def get_schema_registries(self, cluster: VirtualCluster) -> list[dict[str, Any]]:
        return list(SchemaRegistrySerializer(schema_registries(cluster), many=True).data)


# What bucket_url_clean accepts, as the schema's pattern: file://, s3:// or mem://, no
# white space, no credentials (no "@"), nothing urlsplit cannot parse (printable ASCII
# but "@", "[", "]" and "\\"; percent-encode the rest). Empty is allowed by allow_blank,
# which the schema writes as its own oneOf branch: the pattern must not match "" too.
BUCKET_URL_PATTERN = r"^(file|s3|mem)://[A-Za-z0-9._/~-][!-?A-Z^-~]*$"


class ClusterCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=100)
    config = ClusterConfigSerializer(required=False)
    bucket_url = serializers.RegexField(
        BUCKET_URL_PATTERN,
        max_length=1024,
        required=False,
        allow_blank=True,
        help_text="The cluster's bucket (file://, s3://…; no credentials). Default: the "
        "first agent's.",
    )


class ClusterBucketSerializer(StrictSerializer):
    bucket_url = serializers.RegexField(
        BUCKET_URL_PATTERN,
        max_length=1024,
        allow_blank=True,
        help_text="The new bucket; empty: the next agent to register fixes it.",
    )


class ClusterRenameSerializer(StrictSerializer):
    name = serializers.CharField(max_length=100)


class ClusterDeleteSerializer(StrictSerializer):
    confirm_name = serializers.CharField()


class AgentKeySerializer(ModelSerializer):
    id = serializers.CharField(source="public_id", read_only=True)
    cluster = serializers.CharField(source="cluster.public_id", read_only=True)

    class Meta:
        model = AgentKey
        fields = [
            "id",
            "cluster",
            "name",
            "display_prefix",
            "created_at",
            "last_used_at",
            "revoked_at",
            "agent_group",
        ]
        read_only_fields = fields
        extra_kwargs = {
            "agent_group": {
                "help_text": "The agent group (--agent-group) agents with this key must be "
                'of; "" = any.'
            }
        }


class AgentKeyCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=100, required=False, allow_blank=True)
    agent_group = serializers.RegexField(
        rf"^{AGENT_GROUP_PATTERN}$",
        max_length=63,
        required=False,
        allow_blank=True,
        help_text="Limit the key to agents of this agent group (--agent-group); "
        "empty or absent: any group.",
    )


class AgentKeyCreatedSerializer(AgentKeySerializer):
    key = serializers.CharField(read_only=True, help_text="The secret. Shown once; store it now.")

    class Meta(AgentKeySerializer.Meta):
        fields = [*AgentKeySerializer.Meta.fields, "key"]
        read_only_fields = fields


class TopicSerializer(ModelSerializer):
    id = serializers.UUIDField(read_only=True)
    partitions = serializers.IntegerField(source="partition_count", read_only=True)
    messages = serializers.IntegerField(read_only=True, help_text="Records currently retained")
    end_offsets = serializers.IntegerField(read_only=True, help_text="Sum of high watermarks")

    class Meta:
        model = Topic
        fields = ["id", "name", "partitions", "configs", "messages", "end_offsets", "created_at"]
        read_only_fields = fields


TOPIC_NAME_RULE = "1-249 ASCII letters, digits, '.', '_' and '-'; not '.' or '..'."


@extend_schema_field(
    {"oneOf": [{"type": "integer", "enum": [-1]}, {"type": "integer", "minimum": 1,
     "maximum": MAX_PARTITIONS}], "description": "-1 (or left out): the cluster's default."}
)  # fmt: skip
class PartitionCountField(serializers.IntegerField):
    pass


@extend_schema_field(configs_schema())
class TopicConfigsField(serializers.DictField):
    pass


@extend_schema_field(configs_schema(nullable=True))
class TopicConfigChangesField(serializers.DictField):
    pass


class TopicConfigsUpdateSerializer(StrictSerializer):
    configs = TopicConfigChangesField(
        child=serializers.CharField(allow_null=True),
        required=False,
        default=dict,
        help_text="Config name → new value, or null for its default. Others are kept.",
    )


class TopicCreateSerializer(StrictSerializer):
    name = serializers.RegexField(
        r"^(?!\.\.?$)[a-zA-Z0-9._-]{1,249}$",
        help_text=TOPIC_NAME_RULE,
        error_messages={"invalid": f"The topic name is illegal: {TOPIC_NAME_RULE}"},
    )
    num_partitions = PartitionCountField(required=False, default=-1)
    configs = TopicConfigsField(child=serializers.CharField(), required=False, default=dict)
