"""The Iceberg catalog's rows (namespaces, tables: the pointer to each table's current
metadata) and the topic tables the append job keeps up to date."""

from __future__ import annotations

from django.db import models

from tenancy.ids import public_id
from tenancy.models import OrgScopedQuerySet


class IcebergNamespace(models.Model):
    """A namespace of a cluster's catalog; `name` is its levels joined by '.'."""

    cluster = models.ForeignKey(
        "metadata_store.VirtualCluster", on_delete=models.CASCADE, related_name="+"
    )
    name = models.CharField(max_length=255)
    properties = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = OrgScopedQuerySet.as_manager()
    org_lookup = "cluster__organization"

    class Meta:
        db_table = "floe_iceberg_namespace"
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="iceberg_namespace_unique")
        ]

    def __str__(self) -> str:
        return self.name


class IcebergTable(models.Model):
    """A table of the catalog: where its current metadata file is (in the cluster's
    bucket) and that metadata's document, which commits are applied to (the control
    plane never opens the bucket; the metadata holds no record, only schemas, snapshots
    and file pointers)."""

    namespace = models.ForeignKey(IcebergNamespace, on_delete=models.CASCADE, related_name="tables")
    name = models.CharField(max_length=255)
    metadata_location = models.CharField(max_length=2048)
    metadata = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = OrgScopedQuerySet.as_manager()
    org_lookup = "namespace__cluster__organization"

    class Meta:
        db_table = "floe_iceberg_table"
        constraints = [
            models.UniqueConstraint(fields=["namespace", "name"], name="iceberg_table_unique")
        ]

    def __str__(self) -> str:
        return f"{self.namespace.name}.{self.name}"


def _topic_table_id() -> str:
    return public_id("ttb")


class TopicTable(models.Model):
    """A topic kept as an Iceberg table: the append job adds each new range of records
    to it (the table's snapshot summary says where each partition got to)."""

    class State(models.TextChoices):
        ACTIVE = "active"
        STOPPED = "stopped"

    public_id = models.CharField(max_length=32, unique=True, default=_topic_table_id)
    topic = models.OneToOneField(
        "metadata_store.Topic", on_delete=models.CASCADE, related_name="iceberg_table"
    )
    # Dropping the table through the catalog stops the topic's appends with it.
    table = models.OneToOneField(IcebergTable, on_delete=models.CASCADE, related_name="topic_table")
    # An Avro table's values that do not decode go there (with the reason).
    dead_letters = models.OneToOneField(
        IcebergTable, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # {"kind": "raw"} (key and value as binary) or {"kind": "avro", "subject", "version"}.
    schema = models.JSONField()
    partition_by = models.CharField(max_length=64, blank=True, default="")
    freshness_seconds = models.PositiveIntegerField(default=60)
    state = models.CharField(max_length=16, choices=State.choices, default=State.ACTIVE)
    last_error = models.TextField(blank=True, default="")
    last_appended_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = OrgScopedQuerySet.as_manager()
    org_lookup = "topic__cluster__organization"

    class Meta:
        db_table = "floe_topic_table"

    def __str__(self) -> str:
        return f"{self.topic_id} → {self.table_id}"
