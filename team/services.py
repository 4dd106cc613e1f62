"""Writes for tenancy: sign-up, memberships, API keys."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core import signing
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import transaction
from django.utils import timezone

from team.models import ApiKey
from tenancy import permissions
from tenancy.errors import beyond_authority, conflict
from tenancy.ids import new_secret, secret_digest
from tenancy.models import Membership, Organization

logger = logging.getLogger(__name__)
User = get_user_model()

# A sign-up is confirmed by a link mailed to its email, which works this long.
SIGNUP_LINK_MAX_AGE_S = 3 * 24 * 3600
_SIGNUP_SALT = "floe.team.signup"

if TYPE_CHECKING:
    from django.contrib.auth.models import User as UserModel


@transaction.atomic
def user_signup(
    *, email: str, password: str, organization_name: str = ""
) -> tuple[UserModel, Organization]:
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


def signup_request(*, email: str, organization_name: str = "", link_base: str) -> str:
    """The first step of a sign-up: mail ``email`` a link that finishes it (a password,
    then the account and its organization), or, when the email has an account already, a
    notice saying so. The answer (the normalized email) is the same either way: the form
    must not tell whoever fills it in whether an email has a Floe account. Raises
    ``ValidationError`` on a malformed email."""
    email = (email or "").strip().lower()
    try:
        validate_email(email)
    except ValidationError:
        raise ValidationError({"email": ["Enter a valid email address."]}) from None
    organization_name = (organization_name or "").strip()[:100]
    base = link_base.rstrip("/")
    if User.objects.filter(username=email).exists():
        body = (
            f"Someone asked to sign up to Floe with {email}, which has an account already. "
            f"Log in here:\n\n{base}/login\n\nIf it was not you, nothing changed."
        )
    else:
        signed = signup_link_token(email=email, organization_name=organization_name)
        body = (
            "Choose a password to finish signing up to Floe (the link works for 3 days):"
            f"\n\n{base}/signup/{signed}\n\nIf it was not you, ignore this mail."
        )
    try:
        send_mail("Your Floe sign-up", body, settings.DEFAULT_FROM_EMAIL, [email])
    except OSError:  # no mail server: the log says so; the answer cannot (it would tell)
        logger.warning("could not mail the sign-up link to %s", email)
    return email


def signup_link_token(*, email: str, organization_name: str) -> str:
    """The signed part of a sign-up link (`signup_link_read` reads it back)."""
    return signing.TimestampSigner(salt=_SIGNUP_SALT).sign_object(
        {"email": email, "organization_name": organization_name}
    )


def signup_link_read(signed: str) -> dict[str, str] | None:
    """What a mailed sign-up link carries (``email``, ``organization_name``), while it works."""
    try:
        found: dict[str, str] = signing.TimestampSigner(salt=_SIGNUP_SALT).unsign_object(
            signed, max_age=SIGNUP_LINK_MAX_AGE_S
        )
    except signing.BadSignature:
        return None
    return found


@transaction.atomic
def api_key_create(
    *,
    organization: Organization,
    name: str,
    role: str = Membership.Role.ADMIN,
    owner: Any = None,
    service_account: bool = False,
    created_by: Any = None,
    ceiling: str | None = None,
) -> tuple[ApiKey, str]:
    """A new API key — `owner`'s, or the organization's service account's — with `role`;
    the plaintext is returned once and never stored. Two active keys of an organization
    never share a name. A key never gets a role above its creator's (`ceiling`, the
    caller's own role) or its owner's; a service account is at most an admin."""
    name = (name or "").strip()
    if not name:
        raise ValidationError({"name": ["An API key needs a name."]})
    if role not in permissions.RANK:
        raise ValidationError({"role": ["A key's role is owner, admin or member."]})
    if service_account == (owner is not None):
        raise ValidationError({"owner": ["A key belongs to a person or to the service account."]})
    limit = Membership.Role.ADMIN if service_account else _member_role(organization, owner)
    if limit is None:
        raise ValidationError({"owner": ["The key's owner is not a member."]})
    if ceiling is not None:
        limit = permissions.lower(limit, ceiling)
    if not permissions.at_most(role, limit):
        raise beyond_authority(
            "role", f"A key cannot do more than who makes and holds it ({limit or 'none'})."
        )
    if ApiKey.objects.for_org(organization).active().filter(name=name).exists():
        raise conflict("name", "An active API key with this name already exists.")
    secret = new_secret("api")
    key = ApiKey.objects.create(
        organization=organization,
        name=name,
        role=role,
        owner=owner,
        service_account=service_account,
        display_prefix=secret.display_prefix,
        digest=secret.digest,
        created_by=created_by,
    )
    return key, secret.plaintext


def _member_role(organization: Organization | int, user: Any) -> str | None:
    if user is None:
        return None
    return (
        Membership.objects.filter(organization=organization, user=user)
        .values_list("role", flat=True)
        .first()
    )


def api_key_role(key: ApiKey) -> str | None:
    """What a key may do now: its role, lowered to its owner's current role; None once
    its owner is no longer a member."""
    if key.service_account:
        return key.role
    return permissions.lower(key.role, _member_role(key.organization_id, key.owner_id))


def api_key_revoke(*, key: ApiKey) -> None:
    """Revoke a key: it stops working at once and stays listed as revoked."""
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])


def api_key_authenticate(plaintext: str) -> tuple[ApiKey, str] | None:
    """The active key with this plaintext and the role it acts with now, or ``None``
    (unknown, revoked, or its owner left the organization)."""
    if not plaintext or not plaintext.startswith("floe_api_"):
        return None
    key = (
        ApiKey.objects.active()
        .select_related("organization", "owner")
        .filter(digest=secret_digest(plaintext))
        .first()
    )
    if key is None:
        return None
    role = api_key_role(key)
    if role is None:
        return None
    ApiKey.objects.filter(pk=key.pk).update(last_used_at=timezone.now())
    return key, role
