"""The schema registry's part of a cluster's hosted metrics endpoint
(``GET /api/v1/clusters/{id}/metrics``): how many subjects, versions and schemas it holds
— three counting queries however large the registry is."""

from __future__ import annotations

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from schema_registry.models import RegisteredSchema, Subject, SubjectVersion
from virtualclusters.models import VirtualCluster


def registry_metric_families(cluster: VirtualCluster) -> list[Metric]:
    """Subjects (those with a live version), live versions and distinct schemas."""
    live = SubjectVersion.objects.filter(subject__registry__cluster=cluster, deleted=False)
    subjects = GaugeMetricFamily(
        "floe_registry_subjects", "Subjects with at least one version not deleted."
    )
    subjects.add_metric(
        [],
        Subject.objects.filter(registry__cluster=cluster, versions__in=live).distinct().count(),
    )
    versions = GaugeMetricFamily("floe_registry_versions", "Subject versions not deleted.")
    versions.add_metric([], live.count())
    schemas = GaugeMetricFamily("floe_registry_schemas", "Distinct schemas registered.")
    schemas.add_metric([], RegisteredSchema.objects.filter(registry__cluster=cluster).count())
    return [subjects, versions, schemas]
