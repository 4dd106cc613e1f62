"""REST API: a cluster's agents — where they run, what they report, whether they are live."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from metadata_store.models import Agent
from metadata_store.selectors import agent_listeners, agents_of_cluster
from tenancy.api.pagination import PAGE_PARAMETERS
from tenancy.api.typed import Serializer
from virtualclusters.api.views import ClusterScopedView


class AgentStatsSerializer(Serializer):
    get_requests = serializers.IntegerField(help_text="Object-store GET requests.")
    get_bytes = serializers.IntegerField(help_text="Bytes read from the object store.")
    peer_served_bytes = serializers.IntegerField(
        help_text="Cached chunk bytes sent to agents of the same zone."
    )
    peer_fetched_bytes = serializers.IntegerField(
        help_text="Cached chunk bytes received from agents of the same zone."
    )
    cache_hits = serializers.IntegerField()
    cache_misses = serializers.IntegerField()
    cache_hit_ratio = serializers.FloatField(allow_null=True)
    client_bytes_by_zone = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Record bytes sent to consumers by the zone the client named in its "
        'client.id ("" = no zone hint, "other" = a zone no agent is in).',
    )


class AgentListenerSerializer(Serializer):
    name = serializers.CharField(
        allow_blank=True, help_text="The listener's name (empty: an agent older than listeners)."
    )
    security_protocol = serializers.CharField(
        source="protocol",
        allow_blank=True,
        help_text="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (empty: not reported).",
    )
    address = serializers.CharField(help_text="host:port clients are told (advertised).")


class AgentSerializer(Serializer):
    agent_id = serializers.CharField()
    agent_group = serializers.CharField(
        help_text="The agent's group (--agent-group): its clients only learn this group's agents."
    )
    zone = serializers.CharField(allow_blank=True)
    address = serializers.SerializerMethodField(
        help_text="host:port of the first (primary) Kafka listener."
    )
    listeners = serializers.SerializerMethodField()
    http_port = serializers.IntegerField(help_text="/metrics, /healthz and the peer channel.")
    version = serializers.CharField(allow_blank=True)
    roles = serializers.ListField(child=serializers.CharField())
    load = serializers.FloatField(help_text="Kafka requests per second, last heartbeat.")
    live = serializers.BooleanField(help_text="Heartbeat within the liveness window.")
    started_at = serializers.DateTimeField()
    last_heartbeat = serializers.DateTimeField()
    stats = serializers.SerializerMethodField()

    def get_address(self, agent: Agent) -> str:
        return f"{agent.host}:{agent.port}"

    @extend_schema_field(AgentListenerSerializer(many=True))
    def get_listeners(self, agent: Agent) -> list[dict[str, Any]]:
        return list(AgentListenerSerializer(agent_listeners(agent), many=True).data)

    @extend_schema(responses=AgentStatsSerializer)
    def get_stats(self, agent: Agent) -> dict[str, Any]:

        fields: list[str] = list(AgentStatsSerializer().fields.keys())
        # What the schema declares, no more (not the per-topic counters of throughput out).
        stats: dict[str, Any] = {name: (agent.stats or {}).get(name, 0) for name in fields}
        stats["client_bytes_by_zone"] = dict((agent.stats or {}).get("client_bytes_by_zone", {}))
        looked = stats["cache_hits"] + stats["cache_misses"]
        stats["cache_hit_ratio"] = round(stats["cache_hits"] / looked, 4) if looked else None
        return stats


class AgentListView(ClusterScopedView):
    @extend_schema(
        responses=AgentSerializer(many=True),
        parameters=PAGE_PARAMETERS,
        summary="List a cluster's agents (live first, then those gone in the last day)",
    )
    def get(self, request: Request, cluster_id: str) -> Response:
        agents = agents_of_cluster(self.cluster(cluster_id))
        return self.paginated(agents, AgentSerializer)
