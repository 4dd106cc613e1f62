"""REST API: migrations into a cluster from another Kafka, offsets kept (issue 30)."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from tenancy.api.pagination import PAGE_PARAMETERS
from tenancy.api.strict import StrictSerializer
from tenancy.api.typed import Serializer
from tenancy.api.views import created
from tenancy.errors import conflict
from virtualclusters.api.views import ClusterScopedView
from virtualclusters.mirror import selectors, services
from virtualclusters.mirror.models import Migration


@extend_schema_field({"type": "string", "format": "regex", "minLength": 1, "maxLength": 1000})
class RegexField(serializers.CharField):
    """A Python regular expression (`re`), matched against whole names."""


class SourceSecuritySerializer(StrictSerializer):
    protocol = serializers.ChoiceField(
        choices=services.SECURITY_PROTOCOLS, required=False, default="PLAINTEXT"
    )
    sasl_mechanism = serializers.ChoiceField(
        choices=services.SASL_MECHANISMS,
        required=False,
        allow_blank=True,
        help_text="With a SASL protocol; PLAIN when left out.",
    )
    username = serializers.CharField(required=False, allow_blank=True, max_length=255)
    password = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=1024,
        write_only=True,
        help_text="Stored sealed; never shown again.",
    )
    ca = serializers.CharField(
        required=False, allow_blank=True, max_length=65536, help_text="PEM CA certificates."
    )


@extend_schema_field(
    {
        "type": "string",
        "pattern": f"^{services.REGISTRY_URL_PATTERN}$",
        "maxLength": 1024,
    }
)
class RegistryUrlField(serializers.CharField):
    """http(s)://host[:port][/path]: no credentials, query or fragment in it."""


class SchemaRegistrySourceSerializer(StrictSerializer):
    url = RegistryUrlField(
        max_length=1024, help_text="The source Schema Registry's base URL (Confluent's REST API)."
    )
    username = serializers.CharField(
        required=False, allow_blank=True, max_length=255, help_text="Basic auth, if any."
    )
    password = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=1024,
        write_only=True,
        help_text="Stored sealed; never shown again.",
    )


class MigrationCreateSerializer(StrictSerializer):
    source_bootstrap = serializers.CharField(
        max_length=1024, help_text="host:port[,host:port…] of the source Kafka."
    )
    source_security = SourceSecuritySerializer(required=False)
    topics = RegexField(max_length=1000, help_text="A regex of whole topic names.")
    groups = RegexField(
        max_length=1000, required=False, allow_blank=True, help_text="A regex of group ids."
    )
    start_from_now = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Copy from each source partition's end rather than its log start.",
    )
    source_schema_registry = SchemaRegistrySourceSerializer(
        required=False,
        help_text="Schema linking: the source's registry, whose subjects are imported "
        "(same ids and versions) and kept in sync until the schemas are cut over.",
    )
    subjects = RegexField(
        max_length=1000,
        required=False,
        allow_blank=True,
        help_text="A regex of whole subject names to link (blank: every subject).",
    )


class MigrationPartitionSerializer(Serializer):
    partition = serializers.IntegerField()
    source_log_start = serializers.IntegerField()
    source_end_offset = serializers.IntegerField()
    destination_log_start = serializers.IntegerField()
    destination_end_offset = serializers.IntegerField()
    records_behind = serializers.IntegerField(allow_null=True)
    bytes_copied = serializers.IntegerField()
    error = serializers.CharField(allow_blank=True)


class MigrationTopicSerializer(Serializer):
    name = serializers.CharField()
    state = serializers.CharField()
    error = serializers.CharField(allow_blank=True)
    cut_over_at = serializers.DateTimeField(allow_null=True)
    configs = serializers.JSONField(
        help_text="The source's topic configs as copied: {name: {value, origin: topic |"
        " source_default | kafka_default, error (Floe refused it: not set)}}."
    )
    retention_applies = serializers.ChoiceField(
        choices=["after cutover", "now"],
        help_text="Floe's retention and compaction leave a mirrored topic alone (it holds"
        " what the source holds): they apply from its cutover on.",
    )
    partitions = MigrationPartitionSerializer(many=True)


class MigrationSerializer(Serializer):
    id = serializers.CharField(source="public_id")
    state = serializers.CharField()
    source_bootstrap = serializers.CharField()
    source_security = serializers.JSONField(help_text="Never the password.")
    topics_regex = serializers.CharField()
    groups_regex = serializers.CharField()
    start_from_now = serializers.BooleanField()
    created_at = serializers.DateTimeField()
    stopped_at = serializers.DateTimeField(allow_null=True)
    lease_agent = serializers.CharField(help_text="The jobs-role agent running the copier.")
    waiting_for = serializers.CharField(help_text="What the copier waits for ('' copying).")
    reported_at = serializers.DateTimeField(allow_null=True)
    source_schema_registry = SchemaRegistrySourceSerializer(
        allow_null=True, help_text="Never the password."
    )
    subjects_regex = serializers.CharField()


class SchemaLinkSerializer(Serializer):
    state = serializers.ChoiceField(choices=["linking", "cut_over", "stopped"])
    cut_over_at = serializers.DateTimeField(allow_null=True)
    subjects_copied = serializers.IntegerField()
    versions_copied = serializers.IntegerField()
    last_sync = serializers.DateTimeField(
        allow_null=True, help_text="The linker's last complete look at the source registry."
    )
    error = serializers.CharField(allow_blank=True, help_text="Why the last look failed.")
    subject_errors = serializers.DictField(
        child=serializers.CharField(), help_text="Per subject: why it is not (all) copied."
    )


class MigrationDetailSerializer(MigrationSerializer):
    topics = MigrationTopicSerializer(many=True)
    schemas = SchemaLinkSerializer(allow_null=True, help_text="The schema link's progress.")
    groups = serializers.JSONField(
        help_text="Per group: state, error and its partitions' source and copied offsets."
    )


class MigrationCutoverSerializer(StrictSerializer):
    topics = serializers.ListField(
        child=serializers.CharField(max_length=249),
        required=False,
        default=list,
        max_length=10_000,
    )
    schemas = serializers.BooleanField(
        required=False,
        default=False,
        help_text="End the schema link: the linked subjects take registrations again.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:

        if not attrs.get("topics") and not attrs.get("schemas"):
            raise ValidationError({"topics": ["name topics to cut over, or schemas: true"]})
        return attrs


def _invalid(exc: services.MigrationInvalid) -> Exception:
    """A 400 naming the field, or a 409 for a conflict with what exists."""
    if exc.conflict:
        return conflict(exc.field, exc.message)
    return ValidationError({exc.field: [exc.message]})


class MigrationListView(ClusterScopedView):
    @extend_schema(
        responses=MigrationSerializer(many=True),
        parameters=PAGE_PARAMETERS,
        summary="List a cluster's migrations, newest first",
    )
    def get(self, request: Request, cluster_id: str) -> Response:
        cluster = self.cluster(cluster_id)
        return self.paginated(
            Migration.objects.filter(cluster=cluster).order_by("-id"), MigrationSerializer
        )

    @extend_schema(
        request=MigrationCreateSerializer,
        responses={201: MigrationDetailSerializer},
        summary="Start mirroring topics (and groups) from another Kafka, offsets kept",
    )
    def post(self, request: Request, cluster_id: str) -> Response:
        cluster = self.cluster(cluster_id)
        data = MigrationCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        try:
            migration = services.migration_create(
                cluster=cluster,
                source_bootstrap=values["source_bootstrap"],
                source_security=values.get("source_security"),
                topics=values["topics"],
                groups=values.get("groups") or "",
                start_from_now=values.get("start_from_now", False),
                source_schema_registry=values.get("source_schema_registry"),
                subjects=values.get("subjects") or "",
            )
        except services.MigrationInvalid as exc:
            raise _invalid(exc) from None
        return created(
            MigrationDetailSerializer(selectors.migration_detail(migration)).data,
            "api-migration",
            cluster_id=cluster.public_id,
            migration_id=migration.public_id,
        )


class _MigrationView(ClusterScopedView):
    def migration(self, cluster_id: str, migration_id: str) -> Migration:
        """A migration of a cluster of the caller's organization; else a 404."""
        return get_object_or_404(
            Migration.objects.filter(cluster=self.cluster(cluster_id)), public_id=migration_id
        )


class MigrationDetailView(_MigrationView):
    @extend_schema(
        responses=MigrationDetailSerializer,
        summary="A migration's state per topic, partition and group",
    )
    def get(self, request: Request, cluster_id: str, migration_id: str) -> Response:
        migration = self.migration(cluster_id, migration_id)
        return Response(MigrationDetailSerializer(selectors.migration_detail(migration)).data)

    @extend_schema(
        responses={204: None},
        summary="Stop a migration (every topic it still mirrors becomes writable)",
    )
    def delete(self, request: Request, cluster_id: str, migration_id: str) -> Response:
        services.migration_stop(migration=self.migration(cluster_id, migration_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class MigrationCutoverView(_MigrationView):
    @extend_schema(
        request=MigrationCutoverSerializer,
        responses=MigrationDetailSerializer,
        summary="Cut topics over: writable in Floe, continuing at their copied end offsets; "
        "or the schemas: the linked subjects take registrations again",
    )
    def post(self, request: Request, cluster_id: str, migration_id: str) -> Response:
        migration = self.migration(cluster_id, migration_id)
        data = MigrationCutoverSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            services.migration_cutover(
                migration=migration,
                topics=data.validated_data["topics"],
                schemas=data.validated_data["schemas"],
            )
        except services.MigrationInvalid as exc:
            raise _invalid(exc) from None
        return Response(MigrationDetailSerializer(selectors.migration_detail(migration)).data)
