"""Writes for an organization's team: invitations (a link, and an email when a mail
backend is configured), roles, removing members, handing ownership on.

Who may do what is `tenancy.permissions` (for every console form and REST
operation); here the rules about the team itself: an admin does not touch the owner, only
the owner hands ownership on, and a person who leaves loses their API keys at once.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any

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
from team.services import api_key_revoke
from tenancy import permissions
from tenancy.errors import conflict
from tenancy.ids import secret_digest
from tenancy.models import Invitation, Membership, Organization

logger = logging.getLogger(__name__)
User = get_user_model()
Role = Membership.Role


@transaction.atomic
def invitation_create(
    *, organization: Organization, email: str, role: str, invited_by: Any, link_base: str
) -> tuple[Invitation, str, bool]:
    """An invitation and its link (shown once); ``sent`` says whether an email went."""
    email = (email or "").strip().lower()
    try:
        validate_email(email)
    except ValidationError:
        raise ValidationError({"email": ["Enter a valid email address."]}) from None
    if role not in (Role.ADMIN, Role.MEMBER):
        raise ValidationError({"role": ["Invite as an admin or a member."]})
    if organization.memberships.filter(user__username=email).exists():
        raise conflict("email", "This person is already a member.")
    token = secrets.token_urlsafe(32)
    invitation = Invitation.objects.create(
        organization=organization,
        email=email,
        role=role,
        digest=secret_digest(token),
        created_by=invited_by,
    )
    link = f"{link_base.rstrip('/')}/invite/{token}"
    try:
        send_mail(
            f"Join {organization.name} on Floe",
            f"{getattr(invited_by, 'email', None) or 'Someone'} invited you to "
            f"{organization.name} on Floe ({role}).\n\n{link}\n",
            settings.DEFAULT_FROM_EMAIL,
            [email],
        )
        sent = True
    except OSError:  # no mail server: the console shows the link to pass on
        sent = False
    return invitation, link, sent


def invitation_for_token(token: str) -> Invitation | None:
    return (
        Invitation.objects.select_related("organization")
        .filter(digest=secret_digest(token or ""), accepted_at__isnull=True)
        .first()
    )


# How long a link mailed to finish joining (or signing up) works.
ACCOUNT_LINK_MAX_AGE_S = 3 * 24 * 3600
_ACCOUNT_LINK_SALT = "floe.team.invitation-account"


def invitation_accept(*, invitation: Invitation, token: str, password: str, link_base: str) -> Any:
    """Whoever holds an invitation's link and is not signed in: the invited email's
    account joins with its own password; any other password joins nothing, and the
    invited email gets a mail — a link to choose a password and join when it has no
    account, a notice when it has one. The caller learns only "joined" (the account's
    password) or ``None``, alike whether the email has an account or not: the link may
    be in another hand than the email's (the inviter sees it)."""
    user = User.objects.filter(username=invitation.email).first()
    if user is not None and user.check_password(password or ""):
        return invitation_join(invitation=invitation, user=user)
    base = link_base.rstrip("/")
    if user is None:
        signed = invitation_account_link_token(token)
        body = (
            f"To join {invitation.organization.name} on Floe, choose a password for your new "
            f"account here (the link works for 3 days):\n\n{base}/invite/account/{signed}\n"
        )
    else:
        body = (
            f"Someone tried to join {invitation.organization.name} on Floe as {invitation.email} "
            "with a password that is not your account's. If it was you, log in and open the "
            f"invitation link again:\n\n{base}/login\n"
        )
    _mail(f"Join {invitation.organization.name} on Floe", body, invitation.email)
    return None


def invitation_account_link_token(token: str) -> str:
    """The signed part of the mailed link that makes an invited email's account."""
    return signing.TimestampSigner(salt=_ACCOUNT_LINK_SALT).sign(token)


def invitation_account_link_read(signed: str) -> Invitation | None:
    """The open invitation a mailed "choose a password" link names, while it works."""
    try:
        token = signing.TimestampSigner(salt=_ACCOUNT_LINK_SALT).unsign(
            signed, max_age=ACCOUNT_LINK_MAX_AGE_S
        )
    except signing.BadSignature:
        return None
    return invitation_for_token(token)


@transaction.atomic
def invitation_account_create(*, invitation: Invitation, password: str) -> Any:
    """A new account for the invited email, joining the invitation's organization — for
    whoever followed the link mailed to that email (so it may say the email is taken)."""
    if User.objects.filter(username=invitation.email).exists():
        raise conflict("password", "This email has an account already: log in to join.")
    try:
        validate_password(password or "", user=User(username=invitation.email))
    except ValidationError as exc:
        raise ValidationError({"password": list(exc.messages)}) from None
    user = User.objects.create_user(
        username=invitation.email, email=invitation.email, password=password
    )
    return invitation_join(invitation=invitation, user=user)


def _mail(subject: str, body: str, to: str) -> None:
    try:
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, [to])
    except OSError:  # no mail server: the log says so; the answer cannot (it would tell)
        logger.warning("could not mail %s: %s", to, subject)


@transaction.atomic
def invitation_join(*, invitation: Invitation, user: Any) -> Any:
    """`user` (signed in as the invited email) joins the invitation's organization."""
    if user.username != invitation.email:
        raise ValidationError("This invitation is for another email.")
    locked = Invitation.objects.select_for_update().get(pk=invitation.pk)
    if locked.accepted_at is not None:
        raise ValidationError("This invitation was used already.")
    Membership.objects.get_or_create(
        organization=invitation.organization, user=user, defaults={"role": invitation.role}
    )
    locked.accepted_at = timezone.now()
    locked.save(update_fields=["accepted_at"])
    return user


def _check_actor(actor: Membership, target: Membership) -> None:
    if not permissions.at_most(Role.ADMIN, actor.role):
        raise ValidationError("Only owners and admins change the team.")
    if target.role == Role.OWNER:
        raise conflict("role", "The owner stays: hand ownership on first.")


@transaction.atomic
def member_role_change(*, actor: Membership, target: Membership, role: str) -> None:
    _check_actor(actor, target)
    if role not in (Role.ADMIN, Role.MEMBER):
        raise ValidationError("A member is an admin or a member.")
    target.role = role
    target.save(update_fields=["role"])


@transaction.atomic
def member_remove(*, actor: Membership, target: Membership) -> None:
    """Remove a member; their API keys of the organization are revoked with them (each
    revocation is in the audit log)."""
    _check_actor(actor, target)
    keys = ApiKey.objects.for_org(target.organization).active().filter(owner=target.user)
    for key in keys.select_for_update():
        api_key_revoke(key=key)
    target.delete()


@transaction.atomic
def ownership_transfer(*, actor: Membership, target: Membership) -> None:
    """The owner hands ownership to another member and becomes an admin."""
    if actor.role != Role.OWNER:
        raise ValidationError("Only the owner hands ownership on.")
    if target.pk == actor.pk:
        return
    actor.role, target.role = Role.ADMIN, Role.OWNER
    actor.save(update_fields=["role"])
    target.save(update_fields=["role"])
