"""JSON errors for the REST API: always ``{"error": message, "details": {...}}``."""

from __future__ import annotations

from django.core.exceptions import ObjectDoesNotExist
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DatabaseError, DataError
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from controlplane.unavailable import MESSAGE, RETRY_AFTER_S, is_database_unavailable
from tenancy.errors import BEYOND_AUTHORITY, is_conflict, marked


def _first_message(detail) -> str:
    if isinstance(detail, dict):
        for field, value in detail.items():
            message = _first_message(value)
            return message if field in ("non_field_errors", "detail") else f"{field}: {message}"
    if isinstance(detail, list) and detail:
        return _first_message(detail[0])
    return str(detail)


# A row the view found is gone when the service reads it again under a lock
# (ObjectDoesNotExist) or saves it (a DatabaseError with one of these messages; Django 6
# names it Model.NotUpdated): a concurrent request deleted it — a topic deleted while its
# configs change, a cluster while one of its keys is revoked. The 404 a moment later's.
_ROW_GONE = (
    "Save with update_fields did not affect any rows.",
    "Forced update did not affect any rows.",
)


class DatabaseUnavailable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = MESSAGE


def exception_handler(exc, context):
    if is_database_unavailable(exc):
        exc = DatabaseUnavailable()
        exc.wait = RETRY_AFTER_S  # DRF sends it as Retry-After
    if isinstance(exc, ObjectDoesNotExist) or (
        isinstance(exc, DatabaseError) and str(exc) in _ROW_GONE
    ):
        exc = exceptions.NotFound("Not found: it was deleted while this request ran.")
    if isinstance(exc, DataError):
        # A value the database cannot hold (a NUL in a text, a number out of range) is bad
        # input whichever field it came in: a 400 that says why, never a 500.
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else "invalid value"
        exc = exceptions.ValidationError({"non_field_errors": [f"bad value: {reason}"]})
    conflict = isinstance(exc, DjangoValidationError) and is_conflict(exc)
    forbidden = isinstance(exc, DjangoValidationError) and marked(exc, BEYOND_AUTHORITY)
    if isinstance(exc, DjangoValidationError):
        detail = (
            exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
        )
        exc = exceptions.ValidationError(detail)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    detail = response.data
    if isinstance(exc, exceptions.ValidationError):
        body = {"error": _first_message(detail), "details": detail}
        if conflict:  # a name already taken: the request was fine, the state is not
            response.status_code = status.HTTP_409_CONFLICT
        elif forbidden:  # a well-formed request for more than the caller may grant
            response.status_code = status.HTTP_403_FORBIDDEN
    else:
        body = {
            "error": str(detail.get("detail", detail)) if isinstance(detail, dict) else str(detail)
        }
    if response.status_code == status.HTTP_405_METHOD_NOT_ALLOWED:
        body["error"] = f"Method {context['request'].method} is not allowed here."
    return Response(body, status=response.status_code, headers=dict(response.items()))
