"""The topic tables' lag on the control plane's ``/metrics``: computed at each scrape
from the metadata store (each active table's last offsets against its topic's high
watermarks), in a registry of its own that ``controlplane.metrics`` adds to the
exposition (a collector that reads the database has no place in the multiprocess
files)."""

from __future__ import annotations

from collections.abc import Iterator

from django.utils import timezone
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from virtualclusters.tables.models import TopicTable
from virtualclusters.tables.selectors import lag_records, table_behind, table_last_offsets

MAX_TABLES = 1000  # per scrape: the lag of the most recently appended ones beyond that


class TableLagCollector(Collector):
    def collect(self) -> Iterator[GaugeMetricFamily]:
        labels = ["cluster", "table"]
        records = GaugeMetricFamily(
            "floe_table_lag_records", "Records of the topic not yet in its table.", labels=labels
        )
        seconds = GaugeMetricFamily(
            "floe_table_lag_seconds",
            "Seconds since the oldest record not in the table was committed to its topic.",
            labels=labels,
        )
        now = timezone.now()
        active = (
            TopicTable.objects.filter(state=TopicTable.State.ACTIVE)
            .select_related("table__namespace", "topic__cluster")
            .order_by("-last_appended_at")[:MAX_TABLES]
        )
        for topic_table in active:
            offsets = table_last_offsets(topic_table.table)
            names = [topic_table.topic.cluster.public_id, str(topic_table.table)]
            records.add_metric(names, lag_records(topic_table, offsets))
            seconds.add_metric(names, table_behind(topic_table, offsets, now=now)["lag_seconds"])
        yield records
        yield seconds


TABLES_REGISTRY = CollectorRegistry(auto_describe=False)
TABLES_REGISTRY.register(TableLagCollector())
