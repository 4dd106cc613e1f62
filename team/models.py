"""Team & audit: the organization's application API keys and its audit log."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from tenancy.ids import public_id
from tenancy.models import Membership, Organization, OrgScopedQuerySet


def _api_key_id() -> str:
    return public_id("key")


class AuditEvent(models.Model):
    """Who created, changed, revoked or deleted what (`team.audit` records them)."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    actor_label = models.CharField(max_length=255)
    action = models.CharField(max_length=16)  # created, changed, revoked, deleted
    target_type = models.CharField(max_length=32)
    target_id = models.CharField(max_length=64)
    target_name = models.CharField(max_length=255, blank=True)

    objects = OrgScopedQuerySet.as_manager()

    class Meta:
        db_table = "controlplane_auditevent"  # made by controlplane, kept when it moved here
        indexes = [models.Index(fields=["organization", "-at"], name="audit_org_at")]


class ApiKeyQuerySet(OrgScopedQuerySet["ApiKey"]):
    def active(self) -> ApiKeyQuerySet:
        return self.filter(revoked_at__isnull=True)


class ApiKey(models.Model):
    """An application API key of an organization, with a role. It belongs to a person
    (`owner`) or to the organization's service account (`service_account`, made on
    purpose by an owner or an admin); a person's key acts with the lower of its role and
    its owner's current role, and stops when its owner leaves (``tenancy.permissions``,
    ``services.api_key_authenticate``)."""

    public_id = models.CharField(max_length=32, unique=True, default=_api_key_id, editable=False)
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="api_keys"
    )
    name = models.CharField(max_length=100)
    role = models.CharField(
        max_length=16, choices=Membership.Role.choices, default=Membership.Role.ADMIN
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="api_keys",
    )
    service_account = models.BooleanField(default=False)
    display_prefix = models.CharField(max_length=32)
    digest = models.CharField(max_length=64, unique=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiKeyQuerySet.as_manager()

    class Meta:
        db_table = "controlplane_apikey"  # made by controlplane, kept when it moved here
        constraints = [
            models.CheckConstraint(
                condition=~models.Q(owner__isnull=False, service_account=True),
                name="api_key_person_or_service_account",
            )
        ]

    @property
    def owner_label(self) -> str:
        if self.service_account:
            return "service account"
        return self.owner.email if self.owner is not None else "(left the organization)"
