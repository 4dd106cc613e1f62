"""Sampling, pruning and reading the throughput history (and consumer-group lag).

Every minute (Celery beat) each cluster's topics get a row with their record count so far
(the sum of their partitions' high watermarks) and what their consumers were ever sent
(`TopicConsumed`, bytes and records), and the cluster a row with those sums and the bytes
of the segment files committed since the last minute. The consumed totals grow at each
heartbeat by the growth of the agent's cumulative `consumed_by_topic` counters
(`consumption_add`). Rates are differences
between consecutive rows; a 24-hour view reads a sample every 5 minutes, a 7-day view
one an hour. Rows older than
`FLOE_THROUGHPUT_RETENTION_DAYS` are deleted.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from metadata_store.models import SegmentFile, Topic
from metadata_store.selectors import cluster_topics_held
from virtualclusters.groups.lag import groups_describe
from virtualclusters.models import VirtualCluster
from virtualclusters.throughput.models import GroupLagSample, ThroughputSample, TopicConsumed

RANGES = {
    "1h": (timedelta(hours=1), 1),
    "24h": (timedelta(hours=24), 5),
    "7d": (timedelta(days=7), 60),
}
SAMPLE_EVERY = timedelta(minutes=1)


@transaction.atomic
def throughput_sample(*, cluster: VirtualCluster, at: datetime | None = None) -> None:
    """Record the cluster's and its topics' counters now."""
    at = at or timezone.now()
    topics = Topic.objects.filter(cluster=cluster).annotate(
        records=Coalesce(Sum("partitions__high_watermark"), 0)
    )
    consumed = {c.topic_id: c for c in TopicConsumed.objects.filter(topic__cluster=cluster)}
    none = TopicConsumed()
    rows = [
        ThroughputSample(
            cluster=cluster,
            topic=t,
            at=at,
            records_total=t.records,
            bytes_out_total=consumed.get(t.id, none).bytes_total,
            records_out_total=consumed.get(t.id, none).records_total,
        )
        for t in topics
    ]
    bytes_in = SegmentFile.objects.filter(
        cluster=cluster, level=0, created_at__gt=at - SAMPLE_EVERY, created_at__lte=at
    ).aggregate(total=Coalesce(Sum("size"), 0))["total"]
    rows.append(
        ThroughputSample(
            cluster=cluster,
            topic=None,
            at=at,
            records_total=sum(r.records_total for r in rows),
            bytes_in=bytes_in,
            bytes_out_total=sum(r.bytes_out_total for r in rows),
            records_out_total=sum(r.records_out_total for r in rows),
        )
    )
    ThroughputSample.objects.bulk_create(rows)
    GroupLagSample.objects.bulk_create(
        GroupLagSample(cluster=cluster, group_id=g["group_id"], at=at, lag=g["total_lag"])
        for g in groups_describe(cluster)
    )


def consumption_add(
    *, cluster: VirtualCluster, before: dict[str, list[int]], after: dict[str, list[int]]
) -> None:
    """Add to the cluster's topics' consumed totals the growth from an agent's previous
    `consumed_by_topic` counters (`before`, {topic id: [bytes, records]}) to its new ones
    (`after`). A counter that fell (the agent restarted under the same id) counts from
    zero; topic ids of other clusters, or of deleted topics, are ignored."""
    grew: dict[str, tuple[int, int]] = {}
    for topic_id, (nbytes, records) in after.items():
        old = before.get(topic_id)
        if old is not None and nbytes >= old[0] and records >= old[1]:
            nbytes, records = nbytes - old[0], records - old[1]
        if nbytes or records:
            grew[topic_id] = (nbytes, records)
    if not grew:
        return  # nothing to add: no statement at all (most heartbeats)
    held = cluster_topics_held(cluster, list(grew))
    ids = [t for t in grew if t in held]
    if not ids:
        return
    grew_bytes = [grew[t][0] for t in ids]
    grew_records = [grew[t][1] for t in ids]
    with connection.cursor() as cursor:  # one statement: add, don't overwrite
        cursor.execute(
            "INSERT INTO floe_topic_consumed (topic_id, bytes_total, records_total)"
            " SELECT g.id, g.nbytes, g.records"
            " FROM unnest(%s::uuid[], %s::bigint[], %s::bigint[]) AS g(id, nbytes, records)"
            " ON CONFLICT (topic_id) DO UPDATE SET"
            " bytes_total = floe_topic_consumed.bytes_total + EXCLUDED.bytes_total,"
            " records_total = floe_topic_consumed.records_total + EXCLUDED.records_total",
            [ids, grew_bytes, grew_records],
        )


def throughput_prune(*, now: datetime | None = None) -> int:
    """Delete samples past their retention; the number deleted."""
    days = settings.FLOE_THROUGHPUT_RETENTION_DAYS
    cutoff = (now or timezone.now()) - timedelta(days=days)
    deleted = ThroughputSample.objects.filter(at__lt=cutoff).delete()[0]
    return deleted + GroupLagSample.objects.filter(at__lt=cutoff).delete()[0]


def throughput_series(cluster: VirtualCluster, span: str = "1h") -> dict[str, Any]:
    """Per-second rates over ``span`` (1h, 24h, 7d): the cluster's records and bytes in,
    each topic's records in, and records and bytes out (sent to consumers) for both:
    ``{"span", "cluster": [points], "topics": {name: [points]}, "groups": {group:
    [lag points]}}``, a point being ``{"at", "records_per_s", "bytes_per_s" (cluster
    only), "records_out_per_s", "bytes_out_per_s"}``."""
    window, step = RANGES[span]
    since = timezone.now() - window - SAMPLE_EVERY * step
    samples = (
        ThroughputSample.objects.filter(cluster=cluster, at__gte=since)
        .select_related("topic")
        .order_by("at", "id")
    )
    by_series: dict[str | None, list[ThroughputSample]] = {}
    for sample in samples:
        by_series.setdefault(sample.topic.name if sample.topic else None, []).append(sample)
    lags: dict[str, list[GroupLagSample]] = {}
    for lag in GroupLagSample.objects.filter(cluster=cluster, at__gte=since).order_by("at"):
        lags.setdefault(lag.group_id, []).append(lag)
    return {
        "span": span,
        "groups": {
            group: [{"at": s.at, "lag": s.lag} for s in _spaced(rows, step)]
            for group, rows in sorted(lags.items())
        },
        "cluster": _rates(by_series.get(None, []), step, with_bytes=True),
        "topics": {
            name: _rates(rows, step, with_bytes=False)
            for name, rows in sorted(by_series.items(), key=lambda kv: kv[0] or "")
            if name is not None
        },
    }


_Sample = TypeVar("_Sample", ThroughputSample, GroupLagSample)


def _spaced(rows: list[_Sample], step: int) -> list[_Sample]:
    """Samples about `step` minutes apart, ending with the newest; the oldest always
    stays, so a young history still shows a point."""
    kept = rows[-1:]
    for row in reversed(rows[:-1]):
        if kept[-1].at - row.at >= SAMPLE_EVERY * step * 0.9 or row is rows[0]:
            kept.append(row)
    kept.reverse()
    return kept


def _rates(rows: list[ThroughputSample], step: int, *, with_bytes: bool) -> list[dict[str, Any]]:
    points = []
    kept = _spaced(rows, step)
    for before, after in zip(kept, kept[1:]):
        seconds = (after.at - before.at).total_seconds()
        if seconds <= 0:
            continue
        records = max(0, after.records_total - before.records_total)
        records_out = max(0, after.records_out_total - before.records_out_total)
        bytes_out = max(0, after.bytes_out_total - before.bytes_out_total)
        point = {
            "at": after.at,
            "records_per_s": round(records / seconds, 3),
            "records_out_per_s": round(records_out / seconds, 3),
            "bytes_out_per_s": round(bytes_out / seconds, 1),
        }
        if with_bytes:
            window_bytes = sum(r.bytes_in for r in rows if before.at < r.at <= after.at)
            point["bytes_per_s"] = round(window_bytes / seconds, 1)
        points.append(point)
    return points
