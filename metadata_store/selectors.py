"""Reads of the metadata store for the console and the REST API (querysets, no writes)."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models import BooleanField, Case, Q, QuerySet, Value, When
from django.utils import timezone

from metadata_store.models import Agent
from virtualclusters.models import VirtualCluster

# Agents that stopped heartbeating stay listed (as not live) this long, so an operator
# sees what went away; agent ids are random per start, so older rows are noise.
RECENT_AGENTS = timedelta(hours=24)


def agents_of_cluster(cluster: VirtualCluster) -> QuerySet[Agent]:
    """The cluster's agents heard from in the last day, annotated with `live` (a
    heartbeat within the liveness window), by zone then id."""
    now = timezone.now()
    live_since = now - timedelta(seconds=settings.FLOE_AGENT_LIVENESS_S)
    return (
        Agent.objects.filter(cluster=cluster, last_heartbeat__gte=now - RECENT_AGENTS)
        .annotate(
            live=Case(
                When(Q(last_heartbeat__gte=live_since), then=Value(True)),
                default=Value(False),
                output_field=BooleanField(),
            )
        )
        .order_by("-live", "zone", "agent_id")
    )
