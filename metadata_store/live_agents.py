"""Live agents: each heartbeat records where an agent serves and answers who else is up."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from metadata_store.agent_api.schemas import HeartbeatRequest
from metadata_store.models import Agent
from virtualclusters.models import VirtualCluster


def agents_heartbeat(cluster: VirtualCluster, body: HeartbeatRequest) -> dict:
    """Record an agent's heartbeat; answer the live agents and the cluster config."""
    now = timezone.now()
    Agent.objects.update_or_create(
        cluster=cluster,
        agent_id=body.agent_id,
        defaults={
            "host": body.host or "127.0.0.1",
            "port": body.port or 9092,
            "zone": body.zone,
            "load": body.load,
            "last_heartbeat": now,
        },
    )
    live_since = now - timedelta(seconds=settings.FLOE_AGENT_LIVENESS_S)
    agents = Agent.objects.filter(cluster=cluster, last_heartbeat__gte=live_since).order_by(
        "agent_id"
    )
    return {
        "cluster": {"id": cluster.public_id, "name": cluster.name, "config": cluster.config()},
        "agents": [
            {"agent_id": a.agent_id, "host": a.host, "port": a.port, "zone": a.zone, "load": a.load}
            for a in agents
        ],
    }
