"""Errors the services raise that the REST API maps to a status of their own."""

from __future__ import annotations

from django.core.exceptions import ValidationError

# The code of a ValidationError for a name already taken: the REST API answers 409.
CONFLICT = "conflict"
# The code of a ValidationError for a request beyond the caller's authority (a key with
# more rights than who makes or holds it): the REST API answers 403.
BEYOND_AUTHORITY = "beyond_authority"


def conflict(field: str, message: str) -> ValidationError:
    """``{field: [message]}``, marked as a conflict with what exists (not a bad value)."""
    return ValidationError({field: [ValidationError(message, code=CONFLICT)]})


def beyond_authority(field: str, message: str) -> ValidationError:
    """``{field: [message]}``, marked as more than the caller may grant (not a bad value)."""
    return ValidationError({field: [ValidationError(message, code=BEYOND_AUTHORITY)]})


def marked(exc: ValidationError, code: str) -> bool:
    """Whether every message of ``exc`` carries ``code`` (CONFLICT, BEYOND_AUTHORITY)."""
    if not hasattr(exc, "error_dict"):
        return False
    return all(e.code == code for errors in exc.error_dict.values() for e in errors)


def is_conflict(exc: ValidationError) -> bool:
    """Whether every message of ``exc`` is about a name already taken."""
    return marked(exc, CONFLICT)
