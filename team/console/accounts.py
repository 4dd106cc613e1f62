"""Sign-up, log-in and log-out."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.views import LoginView, LogoutView
from django.core.exceptions import ValidationError
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from team.console.forms import EmailAuthenticationForm, SignupForm
from team.services import user_signup
from tenancy.console.forms import add_service_errors


@require_http_methods(["GET", "POST"])
def signup(request):
    """Create an account and its organization, then sign in and go to the dashboard."""
    if request.user.is_authenticated:
        return redirect("dashboard")
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            user, org = user_signup(**form.cleaned_data)
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            login(request, user)
            messages.success(
                request, f"Welcome to Floe. {org.name} is ready for its first cluster."
            )
            return redirect("dashboard")
    return render(request, "registration/signup.html", {"form": form})


log_in = LoginView.as_view(
    template_name="registration/login.html",
    authentication_form=EmailAuthenticationForm,
    redirect_authenticated_user=True,
)

# POST only (Django's LogoutView); the nav's "Log out" is a small form.
log_out = LogoutView.as_view()
