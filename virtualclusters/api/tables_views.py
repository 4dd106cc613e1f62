"""REST API: a topic kept as an Iceberg table — ``PUT`` switches it on (or changes its
freshness), ``GET`` tells its state, ``DELETE`` stops the appends (the table stays)."""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from metadata_store.models import Topic
from tenancy.api.typed import Serializer
from tenancy.errors import conflict
from virtualclusters.api.views import ClusterScopedView
from virtualclusters.tables import topic_tables
from virtualclusters.tables.models import TopicTable


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "enum": ["raw"]},
            {
                "type": "object",
                "required": ["subject"],
                "additionalProperties": False,
                "properties": {
                    "subject": {"type": "string", "minLength": 1, "maxLength": 255},
                    "version": {
                        "oneOf": [
                            {"type": "string", "enum": ["latest"]},
                            {"type": "integer", "minimum": 1, "maximum": 2_147_483_647},
                        ]
                    },
                },
            },
        ]
    }
)
class TableSchemaField(serializers.JSONField):
    """ "raw", or a Schema Registry subject and version (a subject or version the registry
    does not have is a 409: the registry's state, not the request, is wrong)."""


class TopicTableRequestSerializer(Serializer):
    schema = TableSchemaField(
        help_text='"raw" (key and value as binary) or {"subject": "<subject>", "version": '
        '"latest" | n}: an Avro subject of the cluster\'s Schema Registry, whose fields '
        "become columns."
    )
    table = serializers.RegexField(
        r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,199}$",
        required=False,
        allow_blank=True,
        default="",
        help_text="The table's name in the namespace 'topics' (default: the topic's).",
    )
    partition_by = serializers.ChoiceField(
        choices=["day", "hour"],
        required=False,
        allow_blank=True,
        default="",
        help_text="Partition by the day or hour of the record timestamp (default: none).",
    )
    freshness_seconds = serializers.IntegerField(
        min_value=1, max_value=86_400, required=False, default=60
    )


class TableSnapshotSerializer(Serializer):
    id = serializers.IntegerField()
    committed_at = serializers.DateTimeField()
    operation = serializers.CharField(allow_null=True)
    files = serializers.IntegerField(help_text="The table's data files.")
    bytes = serializers.IntegerField(help_text="Their bytes.")


class BackfillSerializer(Serializer):
    done = serializers.IntegerField()
    total = serializers.IntegerField()


class TopicTableSerializer(Serializer):
    state = serializers.ChoiceField(choices=TopicTable.State.choices)
    catalog_url = serializers.CharField(help_text="The Iceberg REST catalog's base URI.")
    namespace = serializers.CharField()
    table = serializers.CharField()
    schema = serializers.JSONField(help_text='"raw", or {"subject", "version"}.')
    partition_by = serializers.CharField(allow_null=True)
    freshness_seconds = serializers.IntegerField()
    metadata_location = serializers.CharField()
    rows = serializers.IntegerField()
    last_offsets = serializers.DictField(child=serializers.IntegerField())
    lag_records = serializers.IntegerField()
    lag_seconds = serializers.IntegerField(
        help_text="Since the oldest record not in the table was committed to the topic."
    )
    snapshot = TableSnapshotSerializer(allow_null=True, help_text="The current snapshot.")
    backfill = BackfillSerializer(
        allow_null=True,
        help_text="While records the topic held before the table was switched on are "
        "missing: how many of them are in.",
    )
    last_appended_at = serializers.DateTimeField(allow_null=True)
    last_error = serializers.CharField(allow_blank=True)
    dead_letters = serializers.JSONField(
        allow_null=True,
        help_text="An Avro table's dead-letter table: {table, rows} (values that did not "
        "decode, with the error).",
    )


class TopicTableView(ClusterScopedView):
    def _topic(self, cluster_id: str, name: str) -> Topic:
        return get_object_or_404(Topic.objects.filter(cluster=self.cluster(cluster_id)), name=name)

    def _table(self, topic: Topic) -> TopicTable:
        found = (
            TopicTable.objects.filter(topic=topic)
            .select_related("table__namespace", "topic__cluster", "dead_letters")
            .first()
        )
        if found is None:
            raise Http404("The topic is not kept as a table.")
        return found

    @extend_schema(
        request=TopicTableRequestSerializer,
        responses=TopicTableSerializer,
        summary="Keep a topic as an Iceberg table",
    )
    def put(self, request: Request, cluster_id: str, name: str) -> Response:
        topic = self._topic(cluster_id, name)
        data = TopicTableRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            enabled = topic_tables.topic_table_enable(topic=topic, **data.validated_data)
        except topic_tables.TopicTableError as exc:
            if exc.conflict:
                raise conflict(exc.field, exc.message) from None
            raise ValidationError({exc.field: [exc.message]}) from None
        return Response(TopicTableSerializer(topic_tables.topic_table_state(enabled)).data)

    @extend_schema(responses=TopicTableSerializer, summary="A topic table's state")
    def get(self, request: Request, cluster_id: str, name: str) -> Response:
        found = self._table(self._topic(cluster_id, name))
        return Response(TopicTableSerializer(topic_tables.topic_table_state(found)).data)

    @extend_schema(responses={204: None}, summary="Stop appending to a topic's table")
    def delete(self, request: Request, cluster_id: str, name: str) -> Response:
        topic_tables.topic_table_stop(topic_table=self._table(self._topic(cluster_id, name)))
        return Response(status=status.HTTP_204_NO_CONTENT)
