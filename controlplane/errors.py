"""Errors the services raise that the REST API maps to a status of their own."""

from __future__ import annotations

from django.core.exceptions import ValidationError

# The code of a ValidationError for a name already taken: the REST API answers 409.
CONFLICT = "conflict"


def conflict(field: str, message: str) -> ValidationError:
    """``{field: [message]}``, marked as a conflict with what exists (not a bad value)."""
    return ValidationError({field: [ValidationError(message, code=CONFLICT)]})


def is_conflict(exc: ValidationError) -> bool:
    """Whether every message of ``exc`` is about a name already taken."""
    if not hasattr(exc, "error_dict"):
        return False
    return all(e.code == CONFLICT for errors in exc.error_dict.values() for e in errors)
