"""Sign-up (an email, then a password on the page its mailed link opens), log-in and
log-out."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.views import LoginView, LogoutView
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from team.console.forms import EmailAuthenticationForm, NewPasswordForm, SignupForm
from team.services import signup_link_read, signup_request, user_signup
from tenancy.console.forms import add_service_errors


@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    """Ask for an email (and an organization's name) and mail it the link that finishes
    the sign-up; the answer is the same whether the email has an account or not."""
    if request.user.is_authenticated:
        return redirect("dashboard")
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            email = signup_request(**form.cleaned_data, link_base=settings.FLOE_PUBLIC_URL)
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            return render(
                request,
                "registration/signup_sent.html",
                {"email": email, "playground": settings.DEBUG},
            )
    return render(request, "registration/signup.html", {"form": form})


@require_http_methods(["GET", "POST"])
def signup_finish(request: HttpRequest, signed: str) -> HttpResponse:
    """The mailed link's page: choose a password, then the account and its organization
    are made, and the person is signed in on the dashboard."""
    found = signup_link_read(signed)
    if found is None:
        return render(request, "registration/signup_finish.html", {"invalid": True}, status=404)
    form = NewPasswordForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            user, org = user_signup(
                email=found["email"],
                password=form.cleaned_data["password"],
                organization_name=found["organization_name"],
            )
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
            messages.success(
                request, f"Welcome to Floe. {org.name} is ready for its first cluster."
            )
            return redirect("dashboard")
    return render(request, "registration/signup_finish.html", {"form": form, **found})


log_in = LoginView.as_view(
    template_name="registration/login.html",
    authentication_form=EmailAuthenticationForm,
    redirect_authenticated_user=True,
)

# POST only (Django's LogoutView); the nav's "Log out" is a small form.
log_out = LogoutView.as_view()
