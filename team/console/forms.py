"""The console's forms: typed input only. Business rules live in the services, whose
``ValidationError`` (keyed by field) ``add_service_errors`` shows next to the fields."""

from __future__ import annotations

from django import forms
from django.contrib.auth.forms import AuthenticationForm

from tenancy.models import Membership

# --- accounts ------------------------------------------------------------------------


class SignupForm(forms.Form):
    email = forms.CharField(
        max_length=254,
        widget=forms.EmailInput(attrs={"autocomplete": "email", "autofocus": True}),
    )
    organization_name = forms.CharField(
        label="Organization name",
        max_length=100,
        required=False,
        help_text="Defaults to the first part of your email.",
    )


class NewPasswordForm(forms.Form):
    """The password of a new account, chosen on the page a mailed link opens."""

    password = forms.CharField(
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password", "autofocus": True}),
        help_text="At least 10 characters, not a common password.",
    )


class EmailAuthenticationForm(AuthenticationForm):
    """Log in with an email: usernames are the lower-cased email."""

    username = forms.CharField(
        label="Email",
        max_length=254,
        widget=forms.EmailInput(attrs={"autocomplete": "email", "autofocus": True}),
    )
    error_messages = {
        **AuthenticationForm.error_messages,
        "invalid_login": "That email and password do not match an account.",
    }

    def clean_username(self) -> str:
        return str(self.cleaned_data["username"]).strip().lower()


class ApiKeyCreateForm(forms.Form):
    name = forms.CharField(
        max_length=100, widget=forms.TextInput(attrs={"placeholder": "e.g. terraform"})
    )
    role = forms.ChoiceField(choices=Membership.Role.choices, initial=Membership.Role.ADMIN)
    service_account = forms.BooleanField(
        required=False,
        label="Service account key",
        help_text="The organization's, not yours: it stays when you leave (at most admin).",
    )
