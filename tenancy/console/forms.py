"""What every app's console forms share. Forms take typed input only; business rules live
in the services, whose ``ValidationError`` (keyed by field) ``add_service_errors`` shows
next to the fields."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError


def add_service_errors(
    form: forms.Form, error: ValidationError, *, fields: dict[str, str] | None = None
) -> None:
    """Attach a service's ``ValidationError`` to ``form``.

    Errors keyed by a field of the form (or by a service field that ``fields`` maps onto
    one) appear next to that field; anything else is shown above the form.
    """
    if not hasattr(error, "error_dict"):
        form.add_error(None, error)
        return
    for name, messages in error.message_dict.items():
        field = (fields or {}).get(name, name)
        form.add_error(field if field in form.fields else None, messages)
