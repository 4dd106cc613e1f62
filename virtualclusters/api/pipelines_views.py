"""REST API: a cluster's managed data pipelines — list, create, describe, delete,
configurations (versions), state, dry run (docs/ARCHITECTURE.md "Managed data
pipelines"). Thin over `virtualclusters.pipelines`."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from tenancy.api.pagination import PAGE_PARAMETERS
from tenancy.api.strict import StrictSerializer
from tenancy.api.typed import Serializer
from tenancy.api.views import created
from virtualclusters.api.views import AGENT_READ_ERRORS, ClusterScopedView, agent_read_errors
from virtualclusters.pipelines import dry_run, selectors, services
from virtualclusters.pipelines.config import MAX_CONFIG_CHARS, ConfigInvalid
from virtualclusters.pipelines.models import Pipeline, PipelineVersion

STATES = ["running", "paused"]
AGENT_STATES = ["running", "stopped", "failing", "silent"]  # as an agent last reported


class ConfigField(serializers.CharField):
    """A pipeline configuration, YAML or JSON text."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", MAX_CONFIG_CHARS)
        kwargs.setdefault("trim_whitespace", False)
        kwargs.setdefault(
            "help_text", "The configuration, YAML or JSON (input, processors, outputs, errors)."
        )
        super().__init__(**kwargs)


class PipelineCreateSerializer(StrictSerializer):
    name = serializers.RegexField(
        services.NAME.pattern, max_length=100, help_text=services.NAME_RULE
    )
    config = ConfigField()
    state = serializers.ChoiceField(choices=STATES, required=False, default="paused")


class ConfigurationCreateSerializer(StrictSerializer):
    config = ConfigField()


class StateSerializer(StrictSerializer):
    state = serializers.ChoiceField(choices=STATES)


class SampleSerializer(StrictSerializer):
    topic = serializers.CharField(required=False, max_length=249)
    partition = serializers.IntegerField(required=False, min_value=0, max_value=2**31 - 1)
    offset = serializers.IntegerField(required=False, min_value=0, max_value=2**62)
    timestamp = serializers.IntegerField(required=False, min_value=0, max_value=2**62)
    key = serializers.CharField(
        required=False, allow_null=True, allow_blank=True, max_length=1024 * 1024,
        trim_whitespace=False,
    )  # fmt: skip
    value = serializers.CharField(
        allow_null=True, allow_blank=True, max_length=1024 * 1024, trim_whitespace=False
    )
    headers = serializers.DictField(
        child=serializers.CharField(allow_blank=True, max_length=64 * 1024, trim_whitespace=False),
        required=False,
    )


class DryRunRequestSerializer(StrictSerializer):
    config = ConfigField(
        required=False,
        help_text="The configuration to try (the current version when left out).",
    )
    samples = serializers.ListField(
        child=SampleSerializer(),
        required=False,
        max_length=dry_run.MAX_SAMPLES,
        help_text="Records to try it on (key and value as text); when left out, the "
        "newest records of the input topics, read by a live agent of the cluster.",
    )
    limit = serializers.IntegerField(
        required=False,
        default=dry_run.DEFAULT_SAMPLES,
        min_value=1,
        max_value=dry_run.MAX_SAMPLES,
        help_text="How many of the input topics' newest records to try.",
    )


class ProblemSerializer(Serializer):
    line = serializers.IntegerField()
    column = serializers.IntegerField()
    path = serializers.CharField(allow_blank=True)
    message = serializers.CharField()


class ProblemsSerializer(Serializer):
    """A 400: a body that does not fit (``details`` per field), or a configuration with
    problems (``detail`` and every problem at its line and column)."""

    error = serializers.CharField()
    details = serializers.JSONField(required=False, help_text="Per field, what is wrong.")
    detail = serializers.CharField(required=False)
    problems = ProblemSerializer(
        many=True, required=False, help_text="The configuration's problems, each at its line."
    )


class PipelineErrorSerializer(Serializer):
    at = serializers.CharField()
    message = serializers.CharField()
    agent_id = serializers.CharField(required=False)


def _with_errors(
    fields: dict[str, serializers.Field[Any, Any, Any, Any]], help_text: str
) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
    """`fields` and ``errors``: declared here, as a class attribute it would shadow every
    serializer's ``errors``."""
    fields["errors"] = PipelineErrorSerializer(many=True, help_text=help_text)
    return fields


class PipelineAgentSerializer(Serializer):
    agent_id = serializers.CharField()
    state = serializers.ChoiceField(
        choices=AGENT_STATES,
        help_text="As the agent last reported; silent: no report for 30 s.",
    )
    version = serializers.IntegerField()
    reported_at = serializers.DateTimeField()
    records_in = serializers.IntegerField(help_text="Since the agent's process started.")
    records_out = serializers.IntegerField()
    records_dead_lettered = serializers.IntegerField()
    records_filtered = serializers.IntegerField()
    records_in_per_s = serializers.FloatField(
        allow_null=True, help_text="Between its last two reports (null: one report so far)."
    )
    records_out_per_s = serializers.FloatField(allow_null=True)
    lag = serializers.IntegerField(allow_null=True)

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        return _with_errors(super().get_fields(), "Its newest errors, oldest first.")


class PipelineSerializer(Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    state = serializers.ChoiceField(choices=STATES)
    version = serializers.IntegerField(help_text="The current configuration's version.")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    records_in_per_s = serializers.FloatField(help_text="Over the agents heard in 30 s.")
    records_out_per_s = serializers.FloatField()
    lag = serializers.IntegerField(allow_null=True)
    error_count = serializers.IntegerField(help_text="Errors the live agents last reported.")
    agents = serializers.IntegerField(help_text="Agents that reported in 30 s.")


class PipelineDetailSerializer(Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    state = serializers.ChoiceField(choices=STATES)
    version = serializers.IntegerField()
    config = serializers.CharField(help_text="The current version's configuration.")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    principal = serializers.CharField(
        help_text="The Kafka principal it runs as (a SASL/SCRAM user with ACLs for exactly "
        "its topics, group and transactional ids)."
    )
    agents = PipelineAgentSerializer(many=True)
    records_in_per_s = serializers.FloatField()
    records_out_per_s = serializers.FloatField()
    records_in = serializers.IntegerField()
    records_out = serializers.IntegerField()
    records_dead_lettered = serializers.IntegerField()
    records_filtered = serializers.IntegerField()
    lag = serializers.IntegerField(allow_null=True)
    error_count = serializers.IntegerField()

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        return _with_errors(super().get_fields(), "The newest errors of all agents, newest first.")


class PipelineVersionSerializer(Serializer):
    version = serializers.IntegerField()
    created_by = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()
    current = serializers.BooleanField()


class PipelineVersionDetailSerializer(PipelineVersionSerializer):
    config = serializers.CharField()
    canonical = serializers.JSONField(help_text="The configuration as the engine reads it.")


class DryRunSourceSerializer(Serializer):
    topic = serializers.CharField(allow_blank=True)
    partition = serializers.IntegerField()
    offset = serializers.IntegerField()


class DryRunErrorSerializer(Serializer):
    message = serializers.CharField()
    processor = serializers.IntegerField()


class DryRunRecordSerializer(Serializer):
    outputs = serializers.ListField(
        child=serializers.JSONField(), help_text="Each {output, key, value, headers}."
    )
    filtered = serializers.BooleanField()
    error = DryRunErrorSerializer(allow_null=True)

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        # Declared here: as a class attribute it would shadow every field's ``source``.
        fields = super().get_fields()
        fields["source"] = DryRunSourceSerializer(help_text="The sample record.")
        return fields


class DryRunSerializer(Serializer):
    ok = serializers.BooleanField()
    problems = ProblemSerializer(many=True)
    records = DryRunRecordSerializer(many=True)
    agent = serializers.CharField(
        allow_null=True, required=False, help_text="The agent that read the samples."
    )


def _problems(exc: ConfigInvalid) -> Response:
    problems = [p.as_dict() for p in exc.problems]
    first = problems[0]
    detail = f"The configuration has {len(problems)} problem(s); line {first['line']}: {first['message']}"
    return Response(
        {"error": detail, "detail": detail, "problems": problems},
        status=status.HTTP_400_BAD_REQUEST,
    )


def _version_data(version: PipelineVersion, current: int) -> dict[str, Any]:
    return {
        "version": version.version,
        "created_by": version.created_by,
        "created_at": version.created_at,
        "current": version.version == current,
        "config": version.config,
        "canonical": version.canonical,
    }


CONFIG_ERRORS = {400: ProblemsSerializer}


class PipelineListView(ClusterScopedView):
    @extend_schema(
        responses=PipelineSerializer(many=True),
        parameters=PAGE_PARAMETERS,
        summary="List a cluster's pipelines (state, version, throughput, lag, errors)",
    )
    def get(self, request: Request, cluster_id: str) -> Response:
        cluster = self.cluster(cluster_id)
        return self.paginated(selectors.pipelines_listed(cluster), PipelineSerializer)

    @extend_schema(
        request=PipelineCreateSerializer,
        responses={201: PipelineDetailSerializer, **CONFIG_ERRORS},
        summary="Create a pipeline with its first configuration (version 1)",
        description="The configuration is checked by the engine and against the cluster "
        "(every topic it reads or writes must exist): a 400 lists every problem with its "
        "line and column. The pipeline starts paused unless `state` says running.",
    )
    def post(self, request: Request, cluster_id: str) -> Response:
        cluster = self.cluster(cluster_id)
        data = PipelineCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        try:
            pipeline = services.pipeline_create(
                cluster=cluster, name=values["name"], config=values["config"], state=values["state"]
            )
        except ConfigInvalid as exc:
            return _problems(exc)
        return created(
            PipelineDetailSerializer(selectors.pipeline_detail(pipeline)).data,
            "api-pipeline",
            cluster_id=cluster.public_id,
            name=pipeline.name,
        )


class _PipelineView(ClusterScopedView):
    def pipeline(self, cluster_id: str, name: str) -> Pipeline:
        """A pipeline of a cluster of the caller's organization; else a 404."""
        return get_object_or_404(
            Pipeline.objects.filter(cluster=self.cluster(cluster_id)), name=name
        )


class PipelineDetailView(_PipelineView):
    @extend_schema(
        responses=PipelineDetailSerializer,
        summary="Describe a pipeline: state, current version, per-agent status, "
        "throughput, lag, last errors",
    )
    def get(self, request: Request, cluster_id: str, name: str) -> Response:
        pipeline = self.pipeline(cluster_id, name)
        return Response(PipelineDetailSerializer(selectors.pipeline_detail(pipeline)).data)

    @extend_schema(
        responses={204: None},
        summary="Delete a pipeline (its agents stop it; its SASL user and ACLs go too)",
    )
    def delete(self, request: Request, cluster_id: str, name: str) -> Response:
        services.pipeline_delete(pipeline=self.pipeline(cluster_id, name))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ConfigurationListView(_PipelineView):
    @extend_schema(
        responses=PipelineVersionSerializer(many=True),
        parameters=PAGE_PARAMETERS,
        summary="List a pipeline's configuration versions, newest first",
    )
    def get(self, request: Request, cluster_id: str, name: str) -> Response:
        pipeline = self.pipeline(cluster_id, name)
        versions = [
            _version_data(v, pipeline.current_version) for v in selectors.versions_of(pipeline)
        ]
        return self.paginated(versions, PipelineVersionSerializer)

    @extend_schema(
        request=ConfigurationCreateSerializer,
        responses={201: PipelineVersionDetailSerializer, **CONFIG_ERRORS},
        summary="Create a configuration version (checked); it becomes current at once",
    )
    def post(self, request: Request, cluster_id: str, name: str) -> Response:
        pipeline = self.pipeline(cluster_id, name)
        data = ConfigurationCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            version = services.pipeline_configure(
                pipeline=pipeline, config=data.validated_data["config"]
            )
        except ConfigInvalid as exc:
            return _problems(exc)
        return created(
            PipelineVersionDetailSerializer(_version_data(version, version.version)).data,
            "api-pipeline-configuration",
            cluster_id=pipeline.cluster.public_id,
            name=pipeline.name,
            version=version.version,
        )


class ConfigurationDetailView(_PipelineView):
    @extend_schema(responses=PipelineVersionDetailSerializer, summary="A configuration version")
    def get(self, request: Request, cluster_id: str, name: str, version: int) -> Response:
        pipeline = self.pipeline(cluster_id, name)
        found = get_object_or_404(
            PipelineVersion.objects.filter(pipeline=pipeline), version=version
        )
        return Response(
            PipelineVersionDetailSerializer(_version_data(found, pipeline.current_version)).data
        )


class PipelineStateView(_PipelineView):
    @extend_schema(
        request=StateSerializer,
        responses=PipelineDetailSerializer,
        summary="Run or pause a pipeline",
    )
    def post(self, request: Request, cluster_id: str, name: str) -> Response:
        pipeline = self.pipeline(cluster_id, name)
        data = StateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        services.pipeline_state_set(pipeline=pipeline, state=data.validated_data["state"])
        return Response(PipelineDetailSerializer(selectors.pipeline_detail(pipeline)).data)


class PipelineDryRunView(_PipelineView):
    @extend_schema(
        request=DryRunRequestSerializer,
        responses={
            200: DryRunSerializer,
            **{k: v for k, v in AGENT_READ_ERRORS.items() if k != 409},
            409: OpenApiResponse(description="No live agent of the cluster is connected"),
        },
        summary="Try a configuration on sample records (nothing is written)",
        description="On the records given, or on the newest records of the input topics "
        "read by a live agent of the cluster. A configuration with problems answers "
        "ok: false with them.",
    )
    def post(self, request: Request, cluster_id: str, name: str) -> Response:
        pipeline = self.pipeline(cluster_id, name)
        data = DryRunRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        config = values.get("config")
        if config is None:
            config = services.current_version(pipeline).config
        if values.get("samples"):
            result = dry_run.samples_dry_run(
                pipeline.cluster, config=config, samples=values["samples"]
            )
        else:
            with agent_read_errors():
                result = dry_run.topics_dry_run(
                    pipeline.cluster, config=config, limit=values["limit"]
                )
        return Response(DryRunSerializer(result).data)
