"""Tenancy: organizations, their members and invitations, and the one scoping queryset
every organization-owned model takes its manager from."""

from __future__ import annotations

from typing import Self

from django.conf import settings
from django.db import models

from tenancy.ids import public_id


def _org_id() -> str:
    return public_id("org")


class OrgScopedQuerySet(models.QuerySet):
    """The one choke point for tenancy (NetBox's ``RestrictedQuerySet.restrict()``).

    Every model an organization owns takes its manager from this queryset (or from a
    subclass adding its own filters), and every query made for a caller goes through
    ``for_org``. Deny by default: no organization, no rows. A model that reaches its
    organization through another row names the path in ``org_lookup``
    (``"cluster__organization"``); the default is its own ``organization`` field.
    ``tests/controlplane/test_org_scoping.py`` finds every model with such a path and
    checks it is scoped here.

    TODO(issue 26): the metadata store's cluster-owned models (``metadata_store/models.py``,
    being changed on another branch) do not use it yet; their callers scope them through
    an already scoped cluster.
    """

    def for_org(self, org: Organization | None) -> Self:
        if org is None:
            return self.none()
        return self.filter(**{getattr(self.model, "org_lookup", "organization"): org})


class Organization(models.Model):
    public_id = models.CharField(max_length=32, unique=True, default=_org_id, editable=False)
    name = models.CharField(max_length=100)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "controlplane_organization"  # made by controlplane, kept when it moved here

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner", "Owner"  # everything, and the only one who can hand ownership on
        ADMIN = "admin", "Admin"  # everything else: clusters, keys, the team
        MEMBER = "member", "Member (read-only)"  # sees everything, changes nothing

    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="memberships"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = OrgScopedQuerySet.as_manager()

    class Meta:
        db_table = "controlplane_membership"  # made by controlplane, kept when it moved here
        constraints = [
            models.UniqueConstraint(fields=["organization", "user"], name="one_membership_per_org")
        ]


def _invitation_id() -> str:
    return public_id("inv")


class Invitation(models.Model):
    """An invitation to join an organization with a role; the link's token is stored
    hashed, and works once."""

    public_id = models.CharField(max_length=32, unique=True, default=_invitation_id, editable=False)
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="invitations"
    )
    email = models.EmailField()
    role = models.CharField(max_length=16, choices=Membership.Role.choices)
    digest = models.CharField(max_length=64, unique=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    accepted_at = models.DateTimeField(null=True, blank=True)

    objects = OrgScopedQuerySet.as_manager()

    class Meta:
        db_table = "controlplane_invitation"  # made by controlplane, kept when it moved here
