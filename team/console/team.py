"""The team page: members and their roles, invitations (the link is shown once, and
emailed when a mail backend is set), removing members, handing ownership on; and the
invitation link's page, where an invited person joins (signed in, or with their account's
password; a new account through a link mailed to the invited email); and the organization
switcher."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from team import members as team
from team.console.forms import NewPasswordForm
from tenancy.console import one_time_secret
from tenancy.console.forms import add_service_errors
from tenancy.console.scope import ORG_SESSION_KEY, current_membership, membership_or_404, org_or_404
from tenancy.models import Membership
from tenancy.selectors import memberships_of

ROLE_CHOICES = [(Membership.Role.MEMBER, "Member (read-only)"), (Membership.Role.ADMIN, "Admin")]


class InviteForm(forms.Form):
    email = forms.EmailField()
    role = forms.ChoiceField(choices=ROLE_CHOICES)


class AcceptForm(forms.Form):
    password = forms.CharField(
        strip=False,
        required=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "current-password"}),
        help_text="If this email has a Floe account, its password. If not, leave it empty: "
        "we mail the invited email a link to choose one.",
    )


def _page(request: HttpRequest, form: Any = None, status: int = 200) -> HttpResponse:
    org = org_or_404(request)
    found = one_time_secret.take(request, "invitation", scope=org.public_id)
    context = {
        "members": org.memberships.select_related("user").order_by("role", "user__email"),
        "invitations": org.invitations.filter(accepted_at__isnull=True).order_by("-created_at"),
        "me": current_membership(request),
        "form": form or InviteForm(),
        "new_link": found[1] if found else None,
        "role_choices": ROLE_CHOICES,
    }
    response = render(request, "console/team.html", context, status=status)
    if found:
        response["Cache-Control"] = "no-store"
    return response


@login_required
@require_http_methods(["GET", "POST"])
def team_page(request: HttpRequest) -> HttpResponse:
    """The team; a POST invites someone (owners and admins only: see ReadOnlyMembers)."""
    if request.method == "GET":
        return _page(request)
    org = org_or_404(request)
    form = InviteForm(request.POST)
    if form.is_valid():
        try:
            invitation, link, sent = team.invitation_create(
                organization=org,
                invited_by=request.user,
                link_base=settings.FLOE_PUBLIC_URL,
                **form.cleaned_data,
            )
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            one_time_secret.keep(
                request, "invitation", scope=org.public_id, key_id=invitation.public_id,
                plaintext=link,
            )  # fmt: skip
            note = "An email is on its way; " if sent else "No email could be sent; "
            messages.success(request, note + "the link below works once.")
            return redirect("team")
    return _page(request, form=form, status=400)


@login_required
@require_POST
def member_change(request: HttpRequest, email: str) -> HttpResponse:
    """Change a member's role, remove them, or hand them ownership."""
    org = org_or_404(request)
    target = get_object_or_404(Membership, organization=org, user__email=email)
    actor = membership_or_404(request)
    action = request.POST.get("action", "")
    try:
        if action == "remove":
            team.member_remove(actor=actor, target=target)
            messages.success(request, f"{target.user.email} removed.")
        elif action == "transfer":
            team.ownership_transfer(actor=actor, target=target)
            messages.success(request, f"{target.user.email} now owns {org.name}.")
        else:
            team.member_role_change(actor=actor, target=target, role=request.POST.get("role", ""))
            messages.success(request, f"{target.user.email} is now {target.get_role_display()}.")
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    return redirect("team")


@require_http_methods(["GET", "POST"])
def invitation_accept(request: HttpRequest, token: str) -> HttpResponse:
    """The invitation link. Signed in as the invited email: one button joins. Otherwise
    the account's password joins; anything else mails the invited email (a link to
    choose a password when it has no account) and answers the same either way, so the
    link's holder — perhaps not the email's — learns nothing about the email."""
    invitation = team.invitation_for_token(token)
    if invitation is None:
        return render(request, "console/invitation.html", {"invalid": True}, status=404)
    signed_in_as_invited = (
        request.user.is_authenticated and request.user.username == invitation.email
    )
    form = AcceptForm(request.POST or None)
    mailed = False
    if request.method == "POST" and (signed_in_as_invited or form.is_valid()):
        try:
            if signed_in_as_invited:
                user = team.invitation_join(invitation=invitation, user=request.user)
            else:
                user = team.invitation_accept(
                    invitation=invitation,
                    token=token,
                    password=form.cleaned_data["password"],
                    link_base=settings.FLOE_PUBLIC_URL,
                )
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            if user is not None:
                return _joined(request, invitation, user, sign_in=not signed_in_as_invited)
            mailed = True
    context = {
        "invitation": invitation,
        "form": form,
        "signed_in_as_invited": signed_in_as_invited,
        "mailed": mailed,
    }
    return render(request, "console/invitation.html", context)


@require_http_methods(["GET", "POST"])
def invitation_account(request: HttpRequest, signed: str) -> HttpResponse:
    """The link mailed to an invited email without an account: choose a password, and
    the new account joins the organization."""
    invitation = team.invitation_account_link_read(signed)
    if invitation is None:
        return render(request, "console/invitation.html", {"invalid": True}, status=404)
    form = NewPasswordForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            password = form.cleaned_data["password"]
            user = team.invitation_account_create(invitation=invitation, password=password)
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            return _joined(request, invitation, user, sign_in=True)
    context = {"invitation": invitation, "form": form, "new_account": True}
    return render(request, "console/invitation.html", context)


def _joined(request: HttpRequest, invitation: Any, user: Any, *, sign_in: bool) -> HttpResponse:
    if sign_in:
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    request.session[ORG_SESSION_KEY] = invitation.organization.public_id
    messages.success(request, f"Welcome to {invitation.organization.name}.")
    return redirect("dashboard")


@login_required
@require_POST
def org_switch(request: HttpRequest) -> HttpResponse:
    """Work in another of the person's organizations (the nav's switcher)."""
    chosen = request.POST.get("org", "")
    membership = next(
        (m for m in memberships_of(request.user) if m.organization.public_id == chosen), None
    )
    if membership is None:
        raise Http404("You are not a member of that organization.")
    request.session[ORG_SESSION_KEY] = chosen
    messages.success(request, f"You are working in {membership.organization.name}.")
    return redirect("dashboard")
