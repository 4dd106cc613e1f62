"""Whose memberships: a signed-in person's organizations and the one they work in."""

from __future__ import annotations

from tenancy.models import Membership


def memberships_of(user) -> list[Membership]:
    """A signed-in person's memberships (with their organizations), oldest first."""
    if not getattr(user, "is_authenticated", False):
        return []
    return list(Membership.objects.filter(user=user).select_related("organization").order_by("id"))


def membership_for(
    memberships: list[Membership], organization_id: str | None = None
) -> Membership | None:
    """Of a person's memberships, the one they work in: that of the organization they
    chose (its public id), else their first."""
    chosen = [m for m in memberships if m.organization.public_id == organization_id]
    return next(iter(chosen or memberships), None)
