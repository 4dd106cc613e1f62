"""``GET /api/v1/clusters/{id}/metrics``: one cluster's metrics in Prometheus' text
format, for a stock Prometheus that scrapes with an API key as its bearer token — the
agents' heartbeats and the metadata store as the control plane knows them
(`virtualclusters.cluster_metrics`, `schema_registry.metrics`), no access to the agents
needed. A registry per request: nothing is kept between scrapes.

It lives in the project, above the apps, because it composes two of them (the schema
registry's families and the clusters')."""

from __future__ import annotations

from collections.abc import Iterable

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from rest_framework.renderers import JSONRenderer

from schema_registry.metrics import registry_metric_families
from virtualclusters.api.views import ClusterScopedView
from virtualclusters.cluster_metrics import cluster_metric_families


class _Families(Collector):
    def __init__(self, families: Iterable[Metric]) -> None:
        self.families = list(families)

    def collect(self) -> Iterable[Metric]:
        return self.families


class ClusterMetricsView(ClusterScopedView):
    pagination_class = None

    def perform_content_negotiation(self, request, force=False):
        """Whatever the scraper's Accept names (Prometheus sends OpenMetrics, then
        text/plain), a 200 is the text format and an error the API's JSON error shape —
        never a 406."""
        renderer = JSONRenderer()
        return renderer, renderer.media_type

    @extend_schema(
        responses={
            (200, "text/plain"): OpenApiResponse(
                OpenApiTypes.STR,
                description="Prometheus text exposition format (version 0.0.4): agents "
                "live, throughput per topic, consumer-group lag per group and partition "
                "(floe_consumer_group_lag{group,topic,partition}), job runs, table lag and "
                "the schema registry's size.",
            )
        },
        summary="Scrape a cluster's metrics (Prometheus text format)",
        description="For a Prometheus scrape job with an API key as its bearer token "
        "(any role). Built at each request from the agents' heartbeats and the metadata "
        "store; the same few queries however many groups and partitions the cluster has.",
    )
    def get(self, request, cluster_id: str):
        cluster = self.cluster(cluster_id)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(
            _Families([*cluster_metric_families(cluster), *registry_metric_families(cluster)])
        )
        return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
