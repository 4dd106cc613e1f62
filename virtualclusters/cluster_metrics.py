"""One cluster's metrics in Prometheus' data model, for its hosted endpoint
(``GET /api/v1/clusters/{id}/metrics``): what the control plane already knows from the
agents' heartbeats and the metadata store, so an operator scrapes one URL with an API key
and needs no access to the agents.

Every family is built at the scrape from a fixed number of queries — however many
topics, partitions, groups or agents the cluster has (the consumer-group lag is
`groups_describe`'s, a handful of queries). Nothing is kept between scrapes: the view
puts these families in a registry of its own per request.

Labels name only the cluster's own things (topics, groups, agents, job kinds, tables),
never another organization's.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

from django.conf import settings
from django.db.models import Count, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from metadata_store.models import Partition, Topic
from metadata_store.selectors import agents_of_cluster
from virtualclusters.groups.lag import groups_describe
from virtualclusters.jobs.models import JobRun
from virtualclusters.models import VirtualCluster
from virtualclusters.tables.models import TopicTable
from virtualclusters.tables.selectors import table_last_offsets
from virtualclusters.throughput.models import ThroughputSample, TopicConsumed

MAX_TABLES = 1000  # per scrape: the most recently appended ones beyond that


def _agents(cluster: VirtualCluster) -> Iterator[Metric]:
    live = GaugeMetricFamily("floe_agents_live", "Agents with a heartbeat in the liveness window.")
    up = GaugeMetricFamily(
        "floe_agent_up",
        "1 when the agent heartbeated within the liveness window, 0 when it was heard from in "
        "the last day but not since.",
        labels=["agent", "zone", "version"],
    )
    age = GaugeMetricFamily(
        "floe_agent_heartbeat_age_seconds",
        "Seconds since the agent's last heartbeat.",
        labels=["agent", "zone", "version"],
    )
    load = GaugeMetricFamily(
        "floe_agent_load", "Kafka requests per second, last heartbeat.", labels=["agent"]
    )
    now = timezone.now()
    live_since = now - timedelta(seconds=settings.FLOE_AGENT_LIVENESS_S)
    count = 0
    for agent in agents_of_cluster(cluster):
        labels = [agent.agent_id, agent.zone, agent.version]
        is_live = agent.last_heartbeat >= live_since
        up.add_metric(labels, 1 if is_live else 0)
        age.add_metric(labels, max((now - agent.last_heartbeat).total_seconds(), 0.0))
        load.add_metric([agent.agent_id], float(agent.load))
        count += 1 if is_live else 0
    live.add_metric([], count)
    yield from (live, up, age, load)


def _topics(cluster: VirtualCluster) -> Iterator[Metric]:
    partitions = GaugeMetricFamily("floe_topic_partitions", "Partitions.", labels=["topic"])
    records_in = CounterMetricFamily(
        "floe_topic_records_in",
        "Records ever written to the topic (the sum of its high watermarks).",
        labels=["topic"],
    )
    records_out = CounterMetricFamily(
        "floe_topic_records_out",
        "Records ever sent to the topic's consumers (agents' heartbeat counters).",
        labels=["topic"],
    )
    bytes_out = CounterMetricFamily(
        "floe_topic_bytes_out",
        "Record bytes ever sent to the topic's consumers (agents' heartbeat counters).",
        labels=["topic"],
    )
    consumed = {c.topic_id: c for c in TopicConsumed.objects.filter(topic__cluster=cluster)}
    topics = (
        Topic.objects.filter(cluster=cluster)
        .annotate(records=Coalesce(Sum("partitions__high_watermark"), 0))
        .order_by("name")
        .values_list("id", "name", "partition_count", "records")
    )
    for topic_id, name, partition_count, records in topics:
        partitions.add_metric([name], partition_count)
        records_in.add_metric([name], records)
        sent = consumed.get(topic_id)
        records_out.add_metric([name], sent.records_total if sent else 0)
        bytes_out.add_metric([name], sent.bytes_total if sent else 0)
    bytes_in = GaugeMetricFamily(
        "floe_cluster_bytes_in_per_minute",
        "Bytes of segment files committed in the minute before the last throughput sample.",
    )
    last = (
        ThroughputSample.objects.filter(cluster=cluster, topic=None)
        .order_by("-at")
        .values_list("bytes_in", flat=True)
        .first()
    )
    bytes_in.add_metric([], last or 0)
    yield from (partitions, records_in, records_out, bytes_out, bytes_in)


def _groups(cluster: VirtualCluster) -> Iterator[Metric]:
    labels = ["group", "topic", "partition"]
    lag = GaugeMetricFamily(
        "floe_consumer_group_lag",
        "High watermark − the group's committed offset (partitions it committed).",
        labels=labels,
    )
    lag_seconds = GaugeMetricFamily(
        "floe_consumer_group_lag_seconds",
        "Age of the next record the group will read (0 when caught up).",
        labels=labels,
    )
    members = GaugeMetricFamily(
        "floe_consumer_group_members", "Live members of the group.", labels=["group"]
    )
    for group in groups_describe(cluster):
        members.add_metric([group["group_id"]], len(group["members"]))
        for p in group["partitions"]:
            key = [group["group_id"], p["topic"], str(p["partition"])]
            if p["lag"] is not None:
                lag.add_metric(key, p["lag"])
            if p["lag_seconds"] is not None:
                lag_seconds.add_metric(key, p["lag_seconds"])
    yield from (lag, lag_seconds, members)


def _jobs(cluster: VirtualCluster) -> Iterator[Metric]:
    runs = GaugeMetricFamily(
        "floe_job_runs",
        "Background job runs the control plane keeps, by kind and state "
        "(failed: runs that ended in an error).",
        labels=["kind", "state"],
    )
    counted = {
        (kind, state): n
        for kind, state, n in JobRun.objects.filter(cluster=cluster)
        .values_list("kind", "state")
        .annotate(n=Count("id"))
        .order_by()
    }
    for kind in JobRun.Kind.values:
        for state in JobRun.State.values:
            runs.add_metric([kind, state], counted.get((kind, state), 0))
    yield runs


def _tables(cluster: VirtualCluster) -> Iterator[Metric]:
    lag = GaugeMetricFamily(
        "floe_table_lag_records",
        "Records of the topic not yet in its table (active topic tables).",
        labels=["table", "topic"],
    )
    active = list(
        TopicTable.objects.filter(topic__cluster=cluster, state=TopicTable.State.ACTIVE)
        .select_related("table__namespace", "topic")
        .order_by("-last_appended_at")[:MAX_TABLES]
    )
    by_topic: dict[object, list[tuple[int, int, int]]] = {}
    for topic_id, index, start, end in Partition.objects.filter(
        topic_id__in=[t.topic_id for t in active]
    ).values_list("topic_id", "index", "log_start_offset", "high_watermark"):
        by_topic.setdefault(topic_id, []).append((index, start, end))
    for topic_table in active:
        offsets = table_last_offsets(topic_table.table)
        behind = sum(
            max(0, end - max(start, offsets.get(index, -1) + 1))
            for index, start, end in by_topic.get(topic_table.topic_id, [])
        )
        lag.add_metric([str(topic_table.table), topic_table.topic.name], behind)
    yield lag


def cluster_metric_families(cluster: VirtualCluster) -> list[Metric]:
    """The cluster's agents, topics' throughput, consumer-group lag, job runs and table
    lag, as metric families (the schema registry adds its own: `schema_registry.metrics`)."""
    info = GaugeMetricFamily("floe_cluster_info", "The cluster.", labels=["cluster", "name"])
    info.add_metric([cluster.public_id, cluster.name], 1)
    return [
        info,
        *_agents(cluster),
        *_topics(cluster),
        *_groups(cluster),
        *_jobs(cluster),
        *_tables(cluster),
    ]
