"""Throughput samples: cumulative counters, one row per cluster (topic null) or topic and
minute; rates are differences between consecutive samples."""

from __future__ import annotations

from django.db import models

from tenancy.models import OrgScopedQuerySet


class ThroughputSample(models.Model):
    cluster = models.ForeignKey(
        "metadata_store.VirtualCluster", on_delete=models.CASCADE, related_name="+"
    )
    topic = models.ForeignKey(
        "metadata_store.Topic", on_delete=models.CASCADE, null=True, related_name="+"
    )
    at = models.DateTimeField()
    # Records ever written (the sum of the high watermarks).
    records_total = models.BigIntegerField()
    # Bytes of segment files committed in the minute before `at` (cluster rows only).
    bytes_in = models.BigIntegerField(default=0)
    # Record bytes and records ever sent to consumers (`TopicConsumed`; the cluster row
    # sums its topics').
    bytes_out_total = models.BigIntegerField(default=0)
    records_out_total = models.BigIntegerField(default=0)

    objects = OrgScopedQuerySet.as_manager()
    org_lookup = "cluster__organization"

    class Meta:
        db_table = "floe_throughput_sample"
        indexes = [models.Index(fields=["cluster", "at"], name="throughput_cluster_at")]


class TopicConsumed(models.Model):
    """Record bytes and records ever sent to a topic's consumers: the growth of the
    agents' `consumed_by_topic` heartbeat counters, added up at each heartbeat."""

    topic = models.OneToOneField(
        "metadata_store.Topic", on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    bytes_total = models.BigIntegerField(default=0)
    records_total = models.BigIntegerField(default=0)

    objects = OrgScopedQuerySet.as_manager()
    org_lookup = "topic__cluster__organization"

    class Meta:
        db_table = "floe_topic_consumed"


class GroupLagSample(models.Model):
    """A consumer group's total offset lag at one minute."""

    cluster = models.ForeignKey(
        "metadata_store.VirtualCluster", on_delete=models.CASCADE, related_name="+"
    )
    group_id = models.CharField(max_length=255)
    at = models.DateTimeField()
    lag = models.BigIntegerField()

    objects = OrgScopedQuerySet.as_manager()
    org_lookup = "cluster__organization"

    class Meta:
        db_table = "floe_group_lag_sample"
        indexes = [models.Index(fields=["cluster", "at"], name="group_lag_cluster_at")]
