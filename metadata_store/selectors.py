"""Reads of the metadata store for the console and the REST API (querysets, no writes)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import BooleanField, Case, Q, QuerySet, Value, When
from django.utils import timezone

from metadata_store.clusters import VirtualCluster
from metadata_store.models import Agent

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


def bootstrap_servers(cluster: VirtualCluster) -> list[str]:
    """The Kafka addresses the cluster's live agents advertise (``host:port``), sorted;
    empty when no agent of this cluster has heartbeated within the liveness window.

    This is what a client of *this* cluster bootstraps from: never a global setting,
    which would point every cluster at one organization's agent."""
    rows = live_agents(cluster).values_list("host", "port")
    return sorted({f"{host}:{port}" for host, port in rows})


@dataclass(frozen=True)
class Bootstrap:
    """The addresses clients of one agent group bootstrap from through one listener kind
    (``listener`` and ``security_protocol`` empty for agents older than listeners)."""

    agent_group: str
    listener: str
    security_protocol: str
    servers: tuple[str, ...]


def agent_listeners(agent: Agent) -> list[dict[str, Any]]:
    """An agent's listeners as its last heartbeat gave them, ``name``, ``protocol`` and
    ``address``; one unnamed listener at host:port for an agent older than listeners."""
    listed = [
        {"name": x["name"], "protocol": x["protocol"], "address": f"{x['host']}:{x['port']}"}
        for x in agent.listeners or ()
        if isinstance(x, dict) and {"name", "protocol", "host", "port"} <= x.keys()
    ]
    return listed or [{"name": "", "protocol": "", "address": f"{agent.host}:{agent.port}"}]


def bootstraps(cluster: VirtualCluster) -> list[Bootstrap]:
    """The cluster's bootstrap addresses per agent group and listener kind, from its live
    agents: a client is only ever sent to agents of its agent's group and listener kind,
    so each is its own ``bootstrap.servers``. Sorted by group, then listener."""
    found: dict[tuple[str, str, str], set[str]] = {}
    for agent in live_agents(cluster).only("host", "port", "agent_group", "listeners"):
        for listener in agent_listeners(agent):
            key = (agent.agent_group, listener["name"], listener["protocol"])
            found.setdefault(key, set()).add(listener["address"])
    return [
        Bootstrap(group, name, protocol, tuple(sorted(servers)))
        for (group, name, protocol), servers in sorted(found.items())
    ]


@dataclass(frozen=True)
class SchemaRegistryUrls:
    """The Schema Registry URLs of one agent group: its live schema-registry agents'."""

    agent_group: str
    urls: tuple[str, ...]


def schema_registries(cluster: VirtualCluster) -> list[SchemaRegistryUrls]:
    """The cluster's Schema Registry URLs per agent group, sorted: like a Kafka client,
    a Schema Registry client is given the agents of its own group (a group is a VPC,
    region or cloud: another group's agents may not be reachable), and every group's
    registry serves the cluster's one set of subjects."""
    found: dict[str, set[str]] = {}
    rows = live_agents(cluster).filter(schema_registry_port__gt=0)
    for group, host, port in rows.values_list("agent_group", "host", "schema_registry_port"):
        found.setdefault(group, set()).add(f"http://{host}:{port}")
    return [SchemaRegistryUrls(group, tuple(sorted(urls))) for group, urls in sorted(found.items())]


def agent_runs_jobs(cluster: VirtualCluster, agent_id: str) -> bool:
    """Whether `agent_id` may lease the cluster's jobs (table appends among them) and
    migrations: the cluster's ``jobs_agent_groups`` is empty (any group) or names the
    agent's group, as its heartbeats give it (an agent never seen: no)."""
    if not cluster.jobs_agent_groups:
        return True
    group = (
        Agent.objects.filter(cluster=cluster, agent_id=agent_id)
        .values_list("agent_group", flat=True)
        .first()
    )
    return group is not None and group in cluster.jobs_agent_groups


def live_agents(cluster: VirtualCluster) -> QuerySet[Agent]:
    """The cluster's agents that heartbeated within the liveness window."""
    live_since = timezone.now() - timedelta(seconds=settings.FLOE_AGENT_LIVENESS_S)
    return Agent.objects.filter(cluster=cluster, last_heartbeat__gte=live_since)


def journal_backlog(cluster: VirtualCluster) -> tuple[int, int]:
    """What the cluster's live agents last reported journaled and not yet sequenced:
    the bytes (summed) and the oldest entry's age in milliseconds (the largest)."""
    total = oldest = 0
    for stats in live_agents(cluster).values_list("stats", flat=True):
        stats = stats or {}
        total += int(stats.get("journal_unsequenced_bytes") or 0)
        oldest = max(oldest, int(stats.get("journal_oldest_ms") or 0))
    return total, oldest


_BATCH_TIMESTAMPS = """
SELECT r.pid, r.off,
       (SELECT b.max_timestamp FROM floe_batch b
         WHERE b.partition_id = r.pid AND b.last_offset >= r.off
         ORDER BY b.last_offset LIMIT 1)
  FROM unnest(%s::bigint[], %s::bigint[]) AS r(pid, off)
"""


def batch_max_timestamps(pairs: list[tuple[int, int]]) -> dict[tuple[int, int], int | None]:
    """(partition id, offset) → max timestamp of the batch holding that offset (None
    past the last batch): a consumer group's time lag."""
    if not pairs:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(_BATCH_TIMESTAMPS, [[p for p, _ in pairs], [o for _, o in pairs]])
        return {(pid, off): ts for pid, off, ts in cursor.fetchall()}


def cluster_topics_held(cluster: VirtualCluster, topic_ids: list[str]) -> set[str]:
    """Of `topic_ids`, those naming the cluster's topics (another cluster's, a deleted
    topic's or a malformed id are left out), each row held FOR KEY SHARE until the
    caller's transaction ends — a row that points at one (the throughput pages' consumed
    totals) can be written without the topic's deletion slipping in between."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT t.id::text FROM floe_topic t"
            " WHERE t.cluster_id = %s AND t.id::text = ANY(%s::text[])"
            " ORDER BY t.id FOR KEY SHARE",
            [cluster.pk, topic_ids],
        )
        return {row[0] for row in cursor.fetchall()}
