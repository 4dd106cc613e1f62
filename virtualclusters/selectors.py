"""Reads for virtual clusters (querysets; no writes here)."""

from __future__ import annotations

from django.db.models import F, QuerySet, Sum
from django.db.models.functions import Coalesce

from metadata_store.models import Topic
from virtualclusters.models import VirtualCluster


def topics_with_stats(cluster: VirtualCluster) -> QuerySet[Topic]:
    """The cluster's topics with retained message counts and summed end offsets."""
    return (
        Topic.objects.filter(cluster=cluster)
        .annotate(
            end_offsets=Coalesce(Sum("partitions__high_watermark"), 0),
            messages=Coalesce(
                Sum(F("partitions__high_watermark") - F("partitions__log_start_offset")), 0
            ),
        )
        .order_by("name")
    )
