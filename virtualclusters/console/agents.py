"""The agents page of a cluster: each agent's group, zone, listeners, version, roles, load, last
heartbeat and read-path counters (what the REST API's agent list says)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from metadata_store.selectors import agent_listeners, agents_of_cluster
from virtualclusters.console.lookup import cluster_or_404


@login_required
@require_GET
def cluster_agents(request: HttpRequest, cluster_id: str) -> HttpResponse:
    cluster = cluster_or_404(request, cluster_id)
    # Rows annotated with `live`, and given the display fields below.
    agents: list[Any] = list(agents_of_cluster(cluster))
    for agent in agents:
        stats = agent.stats or {}
        looked = stats.get("cache_hits", 0) + stats.get("cache_misses", 0)
        agent.hit_ratio = stats.get("cache_hits", 0) / looked if looked else None
        agent.get_bytes = stats.get("get_bytes", 0)
        agent.get_requests = stats.get("get_requests", 0)
        agent.listener_list = agent_listeners(agent)
    zones = sorted({a.zone for a in agents if a.live})
    return render(
        request, "console/agents.html", {"cluster": cluster, "agents": agents, "zones": zones}
    )
