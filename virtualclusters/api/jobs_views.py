"""REST API: a cluster's background job runs (compaction, retention, …)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from tenancy.api.pagination import PAGE_PARAMETERS
from tenancy.api.typed import ModelSerializer
from virtualclusters.api.views import ClusterScopedView
from virtualclusters.jobs import selectors as jobs_selectors
from virtualclusters.jobs.models import JobRun

# What a run's details may show: counts and outcomes. The rest (partition row ids of
# key compaction's progress, object prefixes) is bookkeeping that stays inside.
PUBLIC_DETAILS = (
    "swapped",
    "conflict",
    "skipped",
    "batches",
    "partitions",
    "records_in",
    "records_kept",
    "batches_rewritten",
    "batches_dropped",
    "partitions_advanced",
    "batches_deleted",
    "files_released",
    "files_deleted",
    "orphans_deleted",
    "orphan_bytes_deleted",
    "tables",
    "appended",
    "conflicts",
    "dead_lettered",
    "errors",
)


class JobRunSerializer(ModelSerializer):
    id = serializers.CharField(source="public_id")
    duration_s = serializers.FloatField(allow_null=True, help_text="Running time in seconds.")
    details = serializers.SerializerMethodField()
    progress = serializers.JSONField(
        help_text="While running: {stage, bytes_done, bytes_total}, from the leasing agent."
    )
    lease_agent = serializers.CharField(help_text="The jobs-role agent that ran (or runs) it.")
    attempts = serializers.IntegerField(help_text="Leases so far (a lost lease is retried).")

    class Meta:
        model = JobRun
        fields = [
            "id",
            "kind",
            "state",
            "created_at",
            "started_at",
            "finished_at",
            "duration_s",
            "input_files",
            "input_bytes",
            "output_files",
            "output_bytes",
            "error",
            "details",
            "progress",
            "lease_agent",
            "attempts",
        ]
        read_only_fields = fields

    def get_details(self, run: JobRun) -> dict[str, Any]:

        return {k: v for k, v in run.details.items() if k in PUBLIC_DETAILS}


class JobRunListView(ClusterScopedView):
    @extend_schema(
        responses=JobRunSerializer(many=True),
        parameters=[
            OpenApiParameter("kind", str, enum=JobRun.Kind.values, description="Only this kind"),
            OpenApiParameter("state", str, enum=JobRun.State.values, description="Only this state"),
            *PAGE_PARAMETERS,
        ],
        summary="List a cluster's background job runs, newest first",
    )
    def get(self, request: Request, cluster_id: str) -> Response:
        runs = jobs_selectors.job_runs(self.cluster(cluster_id))
        errors = {}
        for name, choices in (("kind", JobRun.Kind.values), ("state", JobRun.State.values)):
            value = request.query_params.get(name)
            if value is None:
                continue
            if value not in choices:
                errors[name] = [f"Must be one of {', '.join(choices)}."]
            else:
                runs = runs.filter(**{name: value})
        if errors:
            raise ValidationError(errors)
        return self.paginated(runs, JobRunSerializer)
