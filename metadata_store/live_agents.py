"""Live agents: each heartbeat records where an agent serves and answers who else is up."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cache
from typing import Any

from django.conf import settings
from django.db import transaction
from django.dispatch import Signal
from django.utils import timezone
from django.utils.module_loading import import_string

from metadata_store.clusters import VirtualCluster
from metadata_store.models import Agent
from metadata_store.store import JSON

# Sent inside the heartbeat's transaction when an agent reports its read counters, with
# ``cluster``, ``before`` (the agent's previous ``consumed_by_topic`` counters, {} if
# none) and ``after`` (its new ones). The throughput pages' consumed totals
# (``virtualclusters.throughput``, above the store) connect to it.
agent_consumption_reported = Signal()


@dataclass(frozen=True)
class AgentBeat:
    """One heartbeat, as the store records it (the agent API checks the wire body and
    converts it: the store does not know the wire format). ``stats``: the read path's
    counters since the agent started (builtins), or None when the agent sent none."""

    agent_id: str
    host: str
    port: int
    zone: str = ""
    # [{"name", "protocol", "host", "port"}]: every Kafka listener, advertised addresses.
    listeners: list[dict[str, Any]] = field(default_factory=list)
    agent_group: str = "default"
    load: float = 0.0
    http_port: int = 0
    schema_registry_port: int = 0
    version: str = ""
    roles: list[str] = field(default_factory=list)
    stats: dict[str, Any] | None = None


def peer_secret_for(cluster: VirtualCluster) -> str:
    """The secret the agents of one cluster sign their peer calls with.

    Derived from the control plane's SECRET_KEY and the cluster id, so it is stable
    across control-plane processes, never stored, different for every cluster, and
    handed only to holders of that cluster's agent key (in the heartbeat answer).
    """
    message = b"floe-peer-secret\x00" + cluster.public_id.encode()
    return hmac.new(settings.SECRET_KEY.encode(), message, hashlib.sha256).hexdigest()


@cache
def _quota_check(path: str) -> Callable[[int], bool]:
    check: Callable[[int], bool] = import_string(path)
    return check


def produce_quota_exceeded(organization_id: int) -> bool:
    """Whether the organization may no longer produce: the project's check
    (``FLOE_PRODUCE_QUOTA_CHECK``, a dotted path — billing's plans and meters sit above
    the metadata store, so the store asks through a setting, never an import)."""
    path = settings.FLOE_PRODUCE_QUOTA_CHECK
    return bool(path) and _quota_check(path)(organization_id)


def agents_heartbeat(cluster: VirtualCluster, body: AgentBeat) -> JSON:
    """Record an agent's heartbeat; answer the live agents and the cluster config."""
    now = timezone.now()
    defaults: dict[str, Any] = {
        "host": body.host or "127.0.0.1",
        "port": body.port or 9092,
        "zone": body.zone,
        "listeners": list(body.listeners),
        "agent_group": body.agent_group,
        "load": body.load,
        "http_port": body.http_port,
        "schema_registry_port": body.schema_registry_port,
        "version": body.version,
        "roles": list(body.roles),
        "last_heartbeat": now,
    }
    if body.stats is None:
        Agent.objects.update_or_create(cluster=cluster, agent_id=body.agent_id, defaults=defaults)
    else:
        defaults["stats"] = body.stats
        with transaction.atomic():  # the previous counters, locked: growth counted once
            previous = (
                Agent.objects.select_for_update()
                .filter(cluster=cluster, agent_id=body.agent_id)
                .values_list("stats", flat=True)
                .first()
            )
            Agent.objects.update_or_create(
                cluster=cluster, agent_id=body.agent_id, defaults=defaults
            )
            agent_consumption_reported.send(
                sender=Agent,
                cluster=cluster,
                before=(previous or {}).get("consumed_by_topic") or {},
                after=body.stats["consumed_by_topic"],
            )
    live_since = now - timedelta(seconds=settings.FLOE_AGENT_LIVENESS_S)
    agents = Agent.objects.filter(cluster=cluster, last_heartbeat__gte=live_since).order_by(
        "agent_id"
    )
    return {
        "cluster": {
            "id": cluster.public_id,
            "name": cluster.name,
            "config": {
                **cluster.config(),
                "produce_quota_exceeded": produce_quota_exceeded(cluster.organization_id),
            },
            "bucket_url": cluster.bucket_url,
        },
        "agents": [
            {
                "agent_id": a.agent_id,
                "host": a.host,
                "port": a.port,
                "zone": a.zone,
                "listeners": a.listeners,
                "agent_group": a.agent_group,
                "load": a.load,
                "http_port": a.http_port,
                "roles": a.roles,
            }
            for a in agents
        ],
        "peer_secret": peer_secret_for(cluster),
    }
