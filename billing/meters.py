"""Meters: usage per cluster and UTC hour, derived from what the metadata store holds.

Nothing here runs on the commit path. Celery beat runs `meters_run` every minute or so:

- **written** — level-0 files (one per committed segment, one object PUT each) after a
  high-water mark on the file id. A file's record bytes are those of the batches its
  commit gave offsets to (``data_bytes``, set by the commit function: an idempotent
  producer's resent duplicate is in the file but counts once, where it was first
  committed; files older than that column: the size less the index footer), so a commit
  retried with the same file key (one row), a resent batch, or a file never committed
  (no row) can never count twice or at all. Only files older than
  ``FLOE_BILLING_METER_LAG_S`` are taken, and the mark stops before the first younger
  one, so a commit still in flight when the meter runs is counted by the next run.
- **stored** — live file bytes (and partitions) sampled at each run and weighted by the
  time since the previous run, split at hour boundaries: byte-seconds, partition-seconds.
- **reads** — object GETs, bytes sent to consumers and the uncompressed size of what
  they committed, from the cumulative counters agents report on each heartbeat; only
  their growth since the last run counts.
- **cluster time** — each 15-minute interval in which an agent heartbeated (its row's
  ``started_at`` … ``last_heartbeat``), recorded once (a unique row per interval).

Each meter advances its mark in the transaction that adds its usage, under a row lock,
so running it twice (or two beats at once) counts everything exactly once.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from billing.models import ActiveInterval, AgentCounterMark, MeterMark
from metadata_store import usage

INTERVAL = timedelta(minutes=15)

_ADD_USAGE = """
INSERT INTO billing_usagehour AS u (organization_id, cluster_id, cluster_public_id, hour,
    bytes_written, files_written, stored_byte_seconds, partition_seconds, object_gets,
    bytes_read, bytes_written_uncompressed)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (cluster_public_id, hour) DO UPDATE SET
    bytes_written = u.bytes_written + EXCLUDED.bytes_written,
    files_written = u.files_written + EXCLUDED.files_written,
    stored_byte_seconds = u.stored_byte_seconds + EXCLUDED.stored_byte_seconds,
    partition_seconds = u.partition_seconds + EXCLUDED.partition_seconds,
    object_gets = u.object_gets + EXCLUDED.object_gets,
    bytes_read = u.bytes_read + EXCLUDED.bytes_read,
    bytes_written_uncompressed = u.bytes_written_uncompressed
        + EXCLUDED.bytes_written_uncompressed
"""


_ADD_TOPIC_USAGE = """
INSERT INTO billing_usagetopichour AS u (organization_id, cluster_public_id, topic, hour,
    bytes_written, stored_byte_seconds)
VALUES (%s, %s, %s, %s, %s, %s)
ON CONFLICT (cluster_public_id, topic, hour) DO UPDATE SET
    bytes_written = u.bytes_written + EXCLUDED.bytes_written,
    stored_byte_seconds = u.stored_byte_seconds + EXCLUDED.stored_byte_seconds
"""


def _mark(name: str) -> MeterMark:
    mark, _ = MeterMark.objects.get_or_create(name=name)
    return MeterMark.objects.select_for_update().get(pk=mark.pk)


def _add(cursor: Any, rows: list[tuple[Any, ...]]) -> None:
    """Add (org, cluster, public id, hour, written, files, byte-s, partition-s[, gets,
    read, written uncompressed]) to the hour's row."""
    if rows:
        cursor.executemany(_ADD_USAGE, [row + (0,) * (11 - len(row)) for row in rows])


@transaction.atomic
def meter_written(*, now: datetime | None = None) -> int:
    """Count the files committed since the last run; returns how many."""
    now = now or timezone.now()
    mark = _mark("written")
    settled = now - timedelta(seconds=settings.FLOE_BILLING_METER_LAG_S)
    with connection.cursor() as cursor:
        # The first file too young to count bounds this run (ids are handed out in
        # order, but a younger transaction may commit before an older one).
        bound = usage.files_written_bound(after_id=mark.position, settled=settled)
        found = usage.files_written_by_hour(after_id=mark.position, before_id=bound)
        # The topics' shares, from the files' partition runs (a breakdown: the totals
        # above come from the file rows, which compaction never removes).
        topics = [
            (org, pid, topic, hour.replace(tzinfo=UTC), int(written), 0)
            for org, pid, topic, hour, written in usage.topic_bytes_written_by_hour(
                after_id=mark.position, before_id=bound
            )
        ]
        if topics:
            cursor.executemany(_ADD_TOPIC_USAGE, topics)
        _add(
            cursor,
            [
                (org, cid, pid, hour.replace(tzinfo=UTC), int(written), files, 0, 0)
                for org, cid, pid, hour, written, files, _ in found
            ],
        )
    mark.position = bound - 1
    mark.mark = now
    mark.save(update_fields=["position", "mark"])
    return sum(row[5] for row in found)


def _hour_pieces(start: datetime, end: datetime) -> Any:
    """[start, end) cut at hour boundaries: (hour start, microseconds in it)."""
    cursor = start
    while cursor < end:
        hour = cursor.replace(minute=0, second=0, microsecond=0)
        piece_end = min(end, hour + timedelta(hours=1))
        yield hour, (piece_end - cursor) // timedelta(microseconds=1)
        cursor = piece_end


@transaction.atomic
def meter_stored(*, now: datetime | None = None) -> None:
    """Add live bytes × seconds and partitions × seconds since the previous sample."""
    now = (now or timezone.now()).astimezone(UTC)
    mark = _mark("stored")
    previous = mark.mark
    mark.mark = now
    mark.save(update_fields=["mark"])
    if previous is None or previous >= now:
        return
    with connection.cursor() as cursor:
        rows = []
        for org, cid, pid, stored, partitions in usage.stored_by_cluster():
            if not stored and not partitions:
                continue
            for hour, micros in _hour_pieces(previous.astimezone(UTC), now):
                rows.append(
                    (
                        org,
                        cid,
                        pid,
                        hour,
                        0,
                        0,
                        int(stored) * micros // 1_000_000,
                        int(partitions) * micros // 1_000_000,
                    )
                )
        _add(cursor, rows)


@transaction.atomic
def meter_stored_topics(*, now: datetime | None = None) -> None:
    """Each topic's live bytes × seconds since the previous sample. It reads the index
    (every live run), so it samples every ``FLOE_BILLING_TOPIC_SAMPLE_S``, not every run;
    the cluster totals come from `meter_stored`."""
    now = (now or timezone.now()).astimezone(UTC)
    mark = _mark("stored_topics")
    previous = mark.mark
    if previous is not None and now - previous < timedelta(
        seconds=settings.FLOE_BILLING_TOPIC_SAMPLE_S
    ):
        return
    mark.mark = now
    mark.save(update_fields=["mark"])
    if previous is None:
        return
    with connection.cursor() as cursor:
        rows = [
            (org, pid, topic, hour, 0, int(stored) * micros // 1_000_000)
            for org, pid, topic, stored in usage.stored_by_topic()
            for hour, micros in _hour_pieces(previous.astimezone(UTC), now)
        ]
        if rows:
            cursor.executemany(_ADD_TOPIC_USAGE, rows)


def _interval_start(moment: datetime) -> datetime:
    moment = moment.astimezone(UTC)
    return moment.replace(minute=moment.minute - moment.minute % 15, second=0, microsecond=0)


@transaction.atomic
def meter_cluster_time(*, now: datetime | None = None) -> None:
    """Record the 15-minute intervals in which each cluster had a live agent."""
    now = now or timezone.now()
    mark = _mark("cluster_time")
    since = (mark.mark or now - timedelta(hours=1)) - timedelta(
        seconds=settings.FLOE_AGENT_LIVENESS_S
    )
    mark.mark = now
    mark.save(update_fields=["mark"])
    intervals = set()
    for org, pid, started, last in usage.agents_alive_since(since):
        start = _interval_start(max(started, since))
        while start <= last:
            intervals.add((org, pid, start))
            start += INTERVAL
    ActiveInterval.objects.bulk_create(
        [ActiveInterval(organization_id=o, cluster_public_id=p, start=s) for o, p, s in intervals],
        ignore_conflicts=True,
    )


@transaction.atomic
def meter_reads(*, now: datetime | None = None) -> None:
    """Object GETs and bytes sent to consumers, from the counters agents report on every
    heartbeat (cumulative since each agent process started): only the growth since the
    last run is added, so a heartbeat seen twice or a meter run twice adds nothing, and
    an agent whose counters fell (it restarted under the same id) counts from zero."""
    now = now or timezone.now()
    hour = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    _mark("reads")  # one run at a time
    marks = {(m.cluster_public_id, m.agent_id): m for m in AgentCounterMark.objects.all()}
    with connection.cursor() as cursor:
        rows, changed = [], []
        for org, cid, pid, agent_id, raw in usage.agent_counters():
            stats = json.loads(raw) if isinstance(raw, str) else raw
            gets = int(stats.get("get_requests") or 0)
            read = sum(int(v or 0) for v in (stats.get("client_bytes_by_zone") or {}).values())
            mark = marks.get((pid, agent_id)) or AgentCounterMark(
                cluster_public_id=pid, agent_id=agent_id
            )
            grew_gets = gets - mark.get_requests if gets >= mark.get_requests else gets
            grew_read = read - mark.bytes_read if read >= mark.bytes_read else read
            logical = int(stats.get("written_uncompressed_bytes") or 0)
            grew_logical = (
                logical - mark.written_uncompressed
                if logical >= mark.written_uncompressed
                else logical
            )
            if grew_gets or grew_read or grew_logical:
                rows.append((org, cid, pid, hour, 0, 0, 0, 0, grew_gets, grew_read, grew_logical))
                mark.get_requests, mark.bytes_read = gets, read
                mark.written_uncompressed = logical
                changed.append(mark)
        _add(cursor, rows)
    for mark in changed:
        mark.save()


def meters_run(*, now: datetime | None = None) -> None:
    """Every meter, once (what the beat task calls)."""
    now = now or timezone.now()
    meter_written(now=now)
    meter_stored(now=now)
    meter_stored_topics(now=now)
    meter_cluster_time(now=now)
    meter_reads(now=now)
