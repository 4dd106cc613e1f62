"""SASL users and ACLs of a virtual cluster (imported into ``virtualclusters/models.py``).

A SASL credential stores verifiers only — SCRAM-SHA-256/512 (salt, iterations, StoredKey,
ServerKey; RFC 5802) and a PBKDF2 hash for PLAIN — computed by ``core.security.scram``.
Its password is shown once when created and exists nowhere after that.

ACL bindings use Kafka's vocabulary by name (``core.security.acl``): resource type,
name and pattern, principal (``User:<name>``), host, operation, allow/deny. Rows are never
updated, only created and deleted, which makes ``acl_version`` (count + highest id) a
correct change marker for agents' caches.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum
from typing import Any

from django.db import models

from core.security.acl import (
    BINDING_OPERATIONS,
    BINDING_PATTERN_TYPES,
    BINDING_PERMISSIONS,
    BINDING_RESOURCE_TYPES,
    enum_name,
)
from tenancy.ids import public_id
from tenancy.models import OrgScopedQuerySet


def _credential_id() -> str:
    return public_id("scr")


def _acl_id() -> str:
    return public_id("acl")


def _choices(members: Iterable[IntEnum]) -> list[tuple[str, str]]:

    return [(enum_name(m), enum_name(m).replace("_", " ")) for m in members]


class SaslCredential(models.Model):
    """A SASL/PLAIN and SASL/SCRAM user of one virtual cluster."""

    public_id = models.CharField(max_length=32, unique=True, default=_credential_id, editable=False)
    cluster = models.ForeignKey(
        "metadata_store.VirtualCluster", on_delete=models.CASCADE, related_name="sasl_credentials"
    )
    username = models.CharField(max_length=128)
    superuser = models.BooleanField(default=False, help_text="Bypasses ACLs")
    read_only = models.BooleanField(
        default=False, help_text="May only read and describe, whatever the ACLs say"
    )
    plain_hash = models.CharField(max_length=255)
    scram_sha256 = models.JSONField()
    scram_sha512 = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    objects = OrgScopedQuerySet.as_manager()
    org_lookup = "cluster__organization"

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "username"], name="sasl_username_unique_in_cluster"
            )
        ]

    def __str__(self) -> str:
        return f"{self.username} ({self.public_id})"

    @property
    def mechanisms(self) -> list[str]:
        """The mechanisms this user can log in with: all three for a user made with a
        password here; only the SCRAM ones it was given for a user made over Kafka's
        AlterUserScramCredentials (PLAIN needs the password, which never came)."""
        held = (
            ("PLAIN", self.plain_hash),
            ("SCRAM-SHA-256", self.scram_sha256),
            ("SCRAM-SHA-512", self.scram_sha512),
        )
        return [name for name, verifier in held if verifier]


class Acl(models.Model):
    """One ACL binding: `principal` from `host` is allowed/denied `operation` on resources."""

    public_id = models.CharField(max_length=32, unique=True, default=_acl_id, editable=False)
    cluster = models.ForeignKey(
        "metadata_store.VirtualCluster", on_delete=models.CASCADE, related_name="acls"
    )
    resource_type = models.CharField(max_length=32, choices=_choices(BINDING_RESOURCE_TYPES))
    resource_name = models.CharField(max_length=255)
    pattern_type = models.CharField(
        max_length=16, choices=_choices(BINDING_PATTERN_TYPES), default="literal"
    )
    principal = models.CharField(max_length=255)
    host = models.CharField(max_length=255, default="*")
    operation = models.CharField(max_length=32, choices=_choices(BINDING_OPERATIONS))
    permission = models.CharField(
        max_length=8, choices=_choices(BINDING_PERMISSIONS), default="allow"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = OrgScopedQuerySet.as_manager()
    org_lookup = "cluster__organization"

    @classmethod
    def choices_of(cls, name: str) -> list[tuple[str, str]]:
        """The ``(value, label)`` choices of one of its fields."""
        field = cls._meta.get_field(name)
        assert isinstance(field, models.Field)
        return [(str(value), str(label)) for value, label in field.choices or []]

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=[
                    "cluster",
                    "resource_type",
                    "resource_name",
                    "pattern_type",
                    "principal",
                    "host",
                    "operation",
                    "permission",
                ],
                name="acl_binding_unique",
            )
        ]

    def __str__(self) -> str:
        return (
            f"{self.permission} {self.principal} {self.operation} on {self.resource_type} "
            f"{self.pattern_type}:{self.resource_name}"
        )

    BINDING_FIELDS = (
        "resource_type",
        "resource_name",
        "pattern_type",
        "principal",
        "host",
        "operation",
        "permission",
    )

    def binding_json(self) -> dict[str, Any]:
        """The binding in the JSON shape of the agent API."""
        return {name: getattr(self, name) for name in self.BINDING_FIELDS}
