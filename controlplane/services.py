"""Writes for tenancy: sign-up, memberships, API keys."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.utils import timezone

from controlplane.errors import conflict
from controlplane.ids import new_secret, secret_digest
from controlplane.models import ApiKey, Membership, Organization

User = get_user_model()


@transaction.atomic
def user_signup(
    *, email: str, password: str, organization_name: str = ""
) -> tuple[object, Organization]:
    """Create a user, their organization, and make them its owner.

    Raises ``ValidationError`` (keyed by field) on a bad email, a taken email or a weak
    password.
    """
    email = (email or "").strip().lower()
    errors: dict[str, list[str]] = {}
    try:
        validate_email(email)
    except ValidationError:
        errors["email"] = ["Enter a valid email address."]
    else:
        if User.objects.filter(username=email).exists():
            errors["email"] = ["An account with this email already exists."]
    try:
        validate_password(password or "", user=User(username=email, email=email))
    except ValidationError as exc:
        errors["password"] = list(exc.messages)
    if errors:
        raise ValidationError(errors)
    user = User.objects.create_user(username=email, email=email, password=password)
    org = Organization.objects.create(name=(organization_name or "").strip() or email.split("@")[0])
    Membership.objects.create(organization=org, user=user, role=Membership.Role.OWNER)
    return user, org


def organization_for_user(user) -> Organization | None:
    """The organization a signed-in user works in (their first membership)."""
    if not getattr(user, "is_authenticated", False):
        return None
    membership = (
        Membership.objects.filter(user=user).select_related("organization").order_by("id").first()
    )
    return membership.organization if membership else None


@transaction.atomic
def api_key_create(
    *, organization: Organization, name: str, scope: str = ApiKey.Scope.ADMIN, created_by=None
) -> tuple[ApiKey, str]:
    """A new API key; the plaintext is returned once and never stored. Two active keys
    of an organization never share a name."""
    name = (name or "").strip()
    if not name:
        raise ValidationError({"name": ["An API key needs a name."]})
    if ApiKey.objects.for_org(organization).active().filter(name=name).exists():
        raise conflict("name", "An active API key with this name already exists.")
    secret = new_secret("api")
    key = ApiKey.objects.create(
        organization=organization,
        name=name,
        scope=scope,
        display_prefix=secret.display_prefix,
        digest=secret.digest,
        created_by=created_by,
    )
    return key, secret.plaintext


def api_key_revoke(*, key: ApiKey) -> None:
    """Revoke a key: it stops working at once and stays listed as revoked."""
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])


def api_key_authenticate(plaintext: str) -> ApiKey | None:
    """The active key with this plaintext, or ``None``."""
    if not plaintext or not plaintext.startswith("floe_api_"):
        return None
    key = (
        ApiKey.objects.active()
        .select_related("organization")
        .filter(digest=secret_digest(plaintext))
        .first()
    )
    if key is not None:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=timezone.now())
    return key
