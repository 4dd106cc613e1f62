"""REST API: virtual clusters, their configuration, agent keys and topics."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.http import Http404
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from core.kafka.errors import ErrorCode
from metadata_store.models import Topic
from metadata_store.topics import TopicError, topic_configs_alter, topic_create, topic_delete
from tenancy.api.pagination import PAGE_PARAMETERS, KeyListQuerySerializer, query_params
from tenancy.api.typed import Serializer
from tenancy.api.views import OrgScopedView, created
from tenancy.errors import conflict
from virtualclusters import selectors, services
from virtualclusters.api.serializers import (
    AgentKeyCreatedSerializer,
    AgentKeyCreateSerializer,
    AgentKeySerializer,
    ClusterBucketSerializer,
    ClusterConfigSerializer,
    ClusterCreateSerializer,
    ClusterDeleteSerializer,
    ClusterRenameSerializer,
    ClusterSerializer,
    TopicConfigsUpdateSerializer,
    TopicCreateSerializer,
    TopicSerializer,
)
from virtualclusters.diagnostics import cluster_diagnostics
from virtualclusters.models import AgentKey, VirtualCluster
from virtualclusters.record_browser import BrowseNotFound, BrowseUnavailable, records_browse
from virtualclusters.throughput.services import RANGES as THROUGHPUT_RANGES
from virtualclusters.throughput.services import throughput_series


class ClusterScopedView(OrgScopedView):
    def cluster(self, cluster_id: str) -> VirtualCluster:
        """A cluster of the caller's organization; anyone else's is a 404."""
        return get_object_or_404(
            VirtualCluster.objects.for_org(self.organization), public_id=cluster_id
        )


class ClusterListView(ClusterScopedView):
    @extend_schema(
        responses=ClusterSerializer(many=True),
        parameters=PAGE_PARAMETERS,
        summary="List virtual clusters",
    )
    def get(self, request: Request) -> Response:
        clusters = VirtualCluster.objects.for_org(self.organization).order_by("name")
        return self.paginated(clusters, ClusterSerializer)

    @extend_schema(
        request=ClusterCreateSerializer,
        responses={201: ClusterSerializer},
        summary="Create a virtual cluster",
    )
    def post(self, request: Request) -> Response:
        data = ClusterCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        cluster = services.cluster_create(
            organization=self.organization,
            name=data.validated_data["name"],
            config=data.validated_data.get("config") or {},
            bucket_url=data.validated_data.get("bucket_url") or "",
        )
        return created(ClusterSerializer(cluster).data, "api-cluster", cluster_id=cluster.public_id)


class ClusterDetailView(ClusterScopedView):
    @extend_schema(responses=ClusterSerializer, summary="Describe a virtual cluster")
    def get(self, request: Request, cluster_id: str) -> Response:
        return Response(ClusterSerializer(self.cluster(cluster_id)).data)

    @extend_schema(
        request=ClusterRenameSerializer,
        responses=ClusterSerializer,
        summary="Rename a virtual cluster",
    )
    def patch(self, request: Request, cluster_id: str) -> Response:
        cluster = self.cluster(cluster_id)
        data = ClusterRenameSerializer(data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        if "name" in data.validated_data:  # PATCH {} changes nothing
            services.cluster_rename(cluster=cluster, name=data.validated_data["name"])
        return Response(ClusterSerializer(cluster).data)

    @extend_schema(
        request=ClusterDeleteSerializer,
        parameters=[
            OpenApiParameter(
                "confirm_name", str, description="The cluster's name, typed to confirm"
            )
        ],
        responses={204: None},
        summary="Delete a virtual cluster (type its name to confirm)",
    )
    def delete(self, request: Request, cluster_id: str) -> Response:
        cluster = self.cluster(cluster_id)
        confirm = request.query_params.get("confirm_name")
        if confirm is None and isinstance(request.data, dict):
            confirm = request.data.get("confirm_name")
        services.cluster_delete(cluster=cluster, confirm_name=confirm or "")
        return Response(status=status.HTTP_204_NO_CONTENT)


class ClusterConfigView(ClusterScopedView):
    @extend_schema(responses=ClusterConfigSerializer, summary="Describe a cluster's configuration")
    def get(self, request: Request, cluster_id: str) -> Response:
        return Response(self.cluster(cluster_id).config())

    @extend_schema(
        request=ClusterConfigSerializer,
        responses=ClusterConfigSerializer,
        summary="Update a cluster's configuration",
    )
    def patch(self, request: Request, cluster_id: str) -> Response:
        cluster = self.cluster(cluster_id)
        if not isinstance(request.data, dict):
            raise ValidationError(
                {"non_field_errors": ["Send a JSON object with the fields to change."]}
            )
        data = ClusterConfigSerializer(data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        unknown = set(request.data) - set(VirtualCluster.CONFIG_FIELDS)
        if unknown:
            raise ValidationError(
                {name: ["Unknown configuration field."] for name in sorted(unknown)}
            )
        services.cluster_config_update(cluster=cluster, config=dict(data.validated_data))
        return Response(cluster.config())

    put = patch


class ClusterBucketView(ClusterScopedView):
    @extend_schema(
        request=ClusterBucketSerializer,
        responses=ClusterSerializer,
        summary="Change a cluster's bucket (after copying its files there; agents with "
        "the old bucket URL are refused from then on)",
    )
    def put(self, request: Request, cluster_id: str) -> Response:
        cluster = self.cluster(cluster_id)
        data = ClusterBucketSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        services.cluster_bucket_change(
            cluster=cluster, bucket_url=data.validated_data["bucket_url"]
        )
        return Response(ClusterSerializer(cluster).data)


class AgentKeyListView(ClusterScopedView):
    @extend_schema(
        responses=AgentKeySerializer(many=True),
        parameters=[KeyListQuerySerializer, *PAGE_PARAMETERS],
        summary="List a cluster's agent keys (active ones; revoked ones too on request)",
    )
    def get(self, request: Request, cluster_id: str) -> Response:
        keys = self.cluster(cluster_id).agent_keys.order_by("-created_at", "id")
        if not query_params(request, KeyListQuerySerializer)["include_revoked"]:
            keys = keys.active()
        return self.paginated(keys, AgentKeySerializer)

    @extend_schema(
        request=AgentKeyCreateSerializer,
        responses={201: AgentKeyCreatedSerializer},
        summary="Create an agent key",
    )
    def post(self, request: Request, cluster_id: str) -> Response:
        cluster = self.cluster(cluster_id)
        data = AgentKeyCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        key, plaintext = services.agent_key_create(
            cluster=cluster,
            name=data.validated_data.get("name", ""),
            agent_group=data.validated_data.get("agent_group", ""),
        )
        return created(
            {**AgentKeyCreatedSerializer(key).data, "key": plaintext},
            "api-agent-key",
            cluster_id=cluster.public_id,
            key_id=key.public_id,
        )


class AgentKeyDetailView(ClusterScopedView):
    def _key(self, cluster_id: str, key_id: str) -> AgentKey:
        """An active key of the cluster: a revoked (deleted) key is a 404."""
        return get_object_or_404(self.cluster(cluster_id).agent_keys.active(), public_id=key_id)

    @extend_schema(responses=AgentKeySerializer, summary="Describe an agent key")
    def get(self, request: Request, cluster_id: str, key_id: str) -> Response:
        return Response(AgentKeySerializer(self._key(cluster_id, key_id)).data)

    @extend_schema(responses={204: None}, summary="Revoke an agent key")
    def delete(self, request: Request, cluster_id: str, key_id: str) -> Response:
        services.agent_key_revoke(key=self._key(cluster_id, key_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class TopicListView(ClusterScopedView):
    @extend_schema(
        responses=TopicSerializer(many=True),
        parameters=PAGE_PARAMETERS,
        summary="List a cluster's topics",
    )
    def get(self, request: Request, cluster_id: str) -> Response:
        topics = selectors.topics_with_stats(self.cluster(cluster_id))
        return self.paginated(topics, TopicSerializer)

    @extend_schema(
        request=TopicCreateSerializer, responses={201: TopicSerializer}, summary="Create a topic"
    )
    def post(self, request: Request, cluster_id: str) -> Response:
        cluster = self.cluster(cluster_id)
        data = TopicCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            topic = topic_create(cluster=cluster, **data.validated_data)
        except TopicError as exc:
            if exc.code == ErrorCode.TOPIC_ALREADY_EXISTS:
                raise conflict("name", exc.message) from None
            raise ValidationError(
                {"name" if exc.code != ErrorCode.INVALID_CONFIG else "configs": [exc.message]}
            ) from None
        return created(
            TopicSerializer(selectors.topics_with_stats(cluster).get(pk=topic.pk)).data,
            "api-topic",
            cluster_id=cluster.public_id,
            name=topic.name,
        )


class TopicDetailView(ClusterScopedView):
    def _topic(self, cluster_id: str, name: str) -> Topic:

        return get_object_or_404(selectors.topics_with_stats(self.cluster(cluster_id)), name=name)

    @extend_schema(responses=TopicSerializer, summary="Describe a topic")
    def get(self, request: Request, cluster_id: str, name: str) -> Response:
        return Response(TopicSerializer(self._topic(cluster_id, name)).data)

    @extend_schema(
        request=TopicConfigsUpdateSerializer,
        responses=TopicSerializer,
        summary="Change a topic's configs (null: back to the default)",
    )
    def patch(self, request: Request, cluster_id: str, name: str) -> Response:
        topic = self._topic(cluster_id, name)
        data = TopicConfigsUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        ops = [
            {"name": key, "op": "delete"} if value is None else {"name": key, "value": value}
            for key, value in data.validated_data["configs"].items()
        ]
        try:
            topic_configs_alter(topic=topic, ops=ops, incremental=True)
        except TopicError as exc:
            raise ValidationError({"configs": [exc.message]}) from None
        return Response(TopicSerializer(self._topic(cluster_id, name)).data)

    @extend_schema(responses={204: None}, summary="Delete a topic")
    def delete(self, request: Request, cluster_id: str, name: str) -> Response:
        topic_delete(topic=self._topic(cluster_id, name))
        return Response(status=status.HTTP_204_NO_CONTENT)


class DecodedSerializer(Serializer):
    schema_id = serializers.IntegerField(
        allow_null=True, help_text="The id the frame names (null: the frame itself is bad)."
    )
    subject = serializers.CharField(
        allow_null=True,
        help_text="The subject the schema is shown as: the topic's own (`<topic>-value`, "
        "`<topic>-key`) when it uses the schema, else another (null: unknown id, or no "
        "subject uses it).",
    )
    version = serializers.IntegerField(allow_null=True)
    schema_type = serializers.ChoiceField(choices=["AVRO", "JSON", "PROTOBUF"], allow_null=True)
    json = serializers.JSONField(
        allow_null=True, help_text="The decoded value as JSON (null when not decoded)."
    )
    error = serializers.CharField(
        allow_null=True,
        help_text="Why it could not be decoded (unknown id, bad frame, schema text "
        "unreadable or unparsable, payload that does not read), then read the hex of "
        "`key`/`value`; null when decoded.",
    )


class RecordSerializer(Serializer):
    offset = serializers.IntegerField()
    timestamp = serializers.IntegerField(help_text="Milliseconds since the epoch.")
    key = serializers.CharField(allow_null=True, help_text="Base64.")
    value = serializers.CharField(allow_null=True, help_text="Base64.")
    headers = serializers.ListField(
        child=serializers.ListField(child=serializers.CharField(allow_null=True)),
        help_text="[name, base64 value] pairs.",
    )
    key_decoded = DecodedSerializer(
        allow_null=True,
        help_text="The key decoded through the cluster's schema registry when it is framed "
        "with a schema id (magic byte 0, 4-byte id); null when it is not.",
    )
    value_decoded = DecodedSerializer(
        allow_null=True, help_text="The value, as `key_decoded` says of the key."
    )


class RecordPageSerializer(Serializer):
    topic = serializers.CharField()
    partition = serializers.IntegerField()
    log_start_offset = serializers.IntegerField()
    high_watermark = serializers.IntegerField()
    agent = serializers.CharField(help_text="The agent that read them.")
    from_offset = serializers.IntegerField(
        required=False,
        allow_null=True,
        help_text="By time: the offset the timestamp resolved to, as ListOffsets by time "
        "answers it (-1: every record is older); null when the records were not asked by time.",
    )
    records = RecordSerializer(many=True)


class RecordQuerySerializer(Serializer):
    partition = serializers.IntegerField(required=False, default=0, min_value=0, max_value=9999)
    offset = serializers.IntegerField(
        required=False, min_value=0, max_value=2**62, help_text="Left out: the newest records."
    )
    timestamp = serializers.IntegerField(
        required=False,
        min_value=0,
        max_value=2**62,
        help_text="Milliseconds since the epoch: the records from the first one at or after "
        "this time (as ListOffsets by time finds it); takes precedence over `offset`.",
    )
    limit = serializers.IntegerField(required=False, default=20, min_value=1, max_value=500)


class RecordsUnavailable(APIException):
    status_code: int = status.HTTP_409_CONFLICT  # the cluster's state: no agent is connected
    default_detail = "No agent of this cluster could read the records."

    def __init__(self, detail: str, status_code: int) -> None:
        super().__init__(detail)
        self.status_code = status_code


# What a read through a live agent of the cluster (records, schema texts) answers when
# it gets no page, besides a 404 for what the agent does not know.
AGENT_READ_ERRORS = {
    409: OpenApiResponse(description="No live agent of the cluster is connected"),
    502: OpenApiResponse(description="The agent's answer was refused or an error"),
    503: OpenApiResponse(description="The browse channel (Redis) is unavailable"),
    504: OpenApiResponse(description="No agent answered in time"),
}


@contextmanager
def agent_read_errors() -> Iterator[None]:
    """The browse channel's errors, as the REST API answers them (`AGENT_READ_ERRORS`)."""
    try:
        yield
    except BrowseNotFound:
        raise Http404 from None
    except BrowseUnavailable as exc:
        raise RecordsUnavailable(str(exc), exc.status) from None


class TopicRecordsView(ClusterScopedView):
    @extend_schema(
        parameters=[RecordQuerySerializer],
        responses={200: RecordPageSerializer, **AGENT_READ_ERRORS},
        summary="Read records of a topic's partition (through a live agent of the cluster)",
        description="The control plane holds no bucket credentials: a live agent of the "
        "cluster, connected to the control plane over the channel it opens, reads the "
        "records and they are passed on, never stored.",
    )
    def get(self, request: Request, cluster_id: str, name: str) -> Response:
        cluster = self.cluster(cluster_id)
        topic = get_object_or_404(cluster.topics, name=name)
        query = query_params(request, RecordQuerySerializer)
        if query["partition"] >= topic.partition_count:
            raise Http404("The topic has no such partition.")
        with agent_read_errors():
            page = records_browse(
                cluster, topic=topic.name, partition=query["partition"],
                offset=query.get("offset"), limit=query["limit"],
                timestamp=query.get("timestamp"),
            )  # fmt: skip
        return Response(RecordPageSerializer(page).data)


class DiagnosticsAgentSerializer(Serializer):
    agent_id = serializers.CharField()
    zone = serializers.CharField()
    uptime_s = serializers.IntegerField(help_text="Since the agent started: its counters'.")
    files_committed = serializers.IntegerField()
    commits_per_min = serializers.FloatField(allow_null=True)
    avg_file_bytes = serializers.IntegerField(allow_null=True)
    flush_reasons = serializers.DictField(
        child=serializers.IntegerField(), help_text="Segments sealed, by why (age, size…)."
    )


class DiagnosticsClientSerializer(Serializer):
    client_id = serializers.CharField(
        allow_blank=True, help_text='"": none, or past the first 32 an agent counts.'
    )
    requests = serializers.IntegerField()
    batches = serializers.IntegerField()
    records = serializers.IntegerField()
    records_per_batch = serializers.FloatField(allow_null=True)


class DiagnosticsFindingSerializer(Serializer):
    kind = serializers.ChoiceField(choices=["small_files", "tiny_batches", "no_zone_hint"])
    title = serializers.CharField(help_text="The kind, for people.")
    subject = serializers.CharField(help_text="The agent or the client.id it is about.")
    message = serializers.CharField()
    advice = serializers.CharField()


class DiagnosticsSerializer(Serializer):
    agents = DiagnosticsAgentSerializer(many=True)
    clients = DiagnosticsClientSerializer(many=True)
    findings = DiagnosticsFindingSerializer(many=True)


class DiagnosticsView(ClusterScopedView):
    @extend_schema(
        responses=DiagnosticsSerializer,
        summary="Small files per agent and clients' configuration problems, with advice",
        description="From the live agents' heartbeats (counters since each started).",
    )
    def get(self, request: Request, cluster_id: str) -> Response:
        return Response(DiagnosticsSerializer(cluster_diagnostics(self.cluster(cluster_id))).data)


class ThroughputPointSerializer(Serializer):
    at = serializers.DateTimeField()
    records_per_s = serializers.FloatField(help_text="Records in (produced).")
    bytes_per_s = serializers.FloatField(
        required=False, help_text="Bytes in: segment files committed (the cluster only)."
    )
    records_out_per_s = serializers.FloatField(help_text="Records out: sent to consumers.")
    bytes_out_per_s = serializers.FloatField(help_text="Record batch bytes sent to consumers.")


class LagPointSerializer(Serializer):
    at = serializers.DateTimeField()
    lag = serializers.IntegerField()


class ThroughputSerializer(Serializer):
    span = serializers.ChoiceField(choices=list(THROUGHPUT_RANGES))
    groups = serializers.DictField(
        child=LagPointSerializer(many=True), help_text="Each consumer group's total lag."
    )
    cluster = ThroughputPointSerializer(many=True)
    topics = serializers.DictField(child=ThroughputPointSerializer(many=True))


class ThroughputQuerySerializer(Serializer):
    range = serializers.ChoiceField(choices=list(THROUGHPUT_RANGES), default="1h", required=False)


class ThroughputView(ClusterScopedView):
    @extend_schema(
        parameters=[ThroughputQuerySerializer],
        responses=ThroughputSerializer,
        summary="Records and bytes in and out per second over 1h, 24h or 7d (sampled every minute)",
    )
    def get(self, request: Request, cluster_id: str) -> Response:
        cluster = self.cluster(cluster_id)
        span = query_params(request, ThroughputQuerySerializer)["range"]
        return Response(ThroughputSerializer(throughput_series(cluster, span)).data)
