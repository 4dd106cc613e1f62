"""A cluster's registry: its schemas (by fingerprint, never by text), subjects and their
versions, and compatibility levels.

Ids and versions are assigned under a lock on the cluster's `Registry` row (one per
cluster, made on first use), so two agents registering at once never give one schema two
ids or two schemas one id; the unique constraints say the same to the database.
"""

from __future__ import annotations

from django.db import models

from metadata_store.clusters import VirtualCluster
from tenancy.models import OrgScopedQuerySet

COMPATIBILITY_LEVELS = (
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
    "NONE",
)
DEFAULT_COMPATIBILITY = "BACKWARD"
# Confluent's modes: READONLY (and READONLY_OVERRIDE) refuse registrations and deletes;
# IMPORT takes registrations only with the id (and version) they are to have.
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
DEFAULT_MODE = "READWRITE"
SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")


class Registry(models.Model):
    """A cluster's registry: the global compatibility level and mode, and the next
    schema id."""

    cluster = models.OneToOneField(
        VirtualCluster, on_delete=models.CASCADE, related_name="schema_registry"
    )
    compatibility = models.CharField(max_length=32, default=DEFAULT_COMPATIBILITY)
    mode = models.CharField(max_length=32, default=DEFAULT_MODE)
    next_id = models.PositiveIntegerField(default=1)

    org_lookup = "cluster__organization"
    objects = OrgScopedQuerySet.as_manager()

    class Meta:
        db_table = "floe_sr_registry"


class RegisteredSchema(models.Model):
    """One distinct schema of a cluster: its id, and the fingerprint (SHA-256) of its
    canonical form, type and references — the text is in the bucket under it."""

    registry = models.ForeignKey(Registry, on_delete=models.CASCADE, related_name="schemas")
    schema_id = models.PositiveIntegerField()
    fingerprint = models.CharField(max_length=64)
    schema_type = models.CharField(max_length=16, default="AVRO")
    references = models.JSONField(default=list)  # [{"name", "subject", "version"}]

    org_lookup = "registry__cluster__organization"
    objects = OrgScopedQuerySet.as_manager()

    class Meta:
        db_table = "floe_sr_schema"
        constraints = [
            models.UniqueConstraint(fields=["registry", "schema_id"], name="sr_schema_id_unique"),
            models.UniqueConstraint(
                fields=["registry", "fingerprint"], name="sr_schema_fingerprint_unique"
            ),
        ]


class Subject(models.Model):
    registry = models.ForeignKey(Registry, on_delete=models.CASCADE, related_name="subjects")
    name = models.CharField(max_length=255)
    compatibility = models.CharField(max_length=32, null=True, blank=True)
    mode = models.CharField(max_length=32, null=True, blank=True)  # None: the global one

    org_lookup = "registry__cluster__organization"
    objects = OrgScopedQuerySet.as_manager()

    class Meta:
        db_table = "floe_sr_subject"
        constraints = [
            models.UniqueConstraint(fields=["registry", "name"], name="sr_subject_unique"),
        ]


class SubjectVersion(models.Model):
    """A version of a subject. Soft-deleted versions keep their row (`deleted`) until a
    permanent delete; version numbers are never reused while a row holds them."""

    subject = models.ForeignKey(Subject, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    # RESTRICT, not PROTECT: a schema a version uses is never deleted alone, but deleting the
    # cluster (its registry, schemas and subjects, by cascade) takes both.
    schema = models.ForeignKey(RegisteredSchema, on_delete=models.RESTRICT, related_name="uses")
    deleted = models.BooleanField(default=False)

    class Meta:
        db_table = "floe_sr_version"
        constraints = [
            models.UniqueConstraint(fields=["subject", "version"], name="sr_version_unique"),
        ]
