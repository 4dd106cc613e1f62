"""503, not 500, while the metadata store cannot be reached.

During a failover (no primary yet), a restart of PostgreSQL or a dropped connection, every
request that touches the database fails with `OperationalError` / `InterfaceError`. That is
not a bug in the request or in Floe: the answer is 503 with `Retry-After`, so clients and
load balancers retry, and the console says what is going on instead of "server error".

The REST API maps them in its exception handler (`controlplane.api.errors`); everything
else — console pages, and failures in middleware before a view runs (a session loaded from
the database) — reaches Django's `handler500`, which is `server_error` here.
"""

from __future__ import annotations

import sys

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.views import defaults

RETRY_AFTER_S = 5
MESSAGE = (
    "The metadata store cannot be reached right now (a database failover or restart); "
    "nothing was changed. Try again in a few seconds."
)


def is_database_unavailable(exc: BaseException | None) -> bool:
    """Whether `exc` says the database could not be reached or dropped the connection."""
    return isinstance(exc, (OperationalError, InterfaceError))


def server_error(request: HttpRequest) -> HttpResponse:
    """Django's handler500: a 503 page (or JSON) when the cause is the database."""
    exc = sys.exc_info()[1]  # Django calls handler500 inside its `except` block
    if not is_database_unavailable(exc):
        return defaults.server_error(request)
    if request.path.startswith(("/api/", "/agent/", "/iceberg/")):
        response: HttpResponse = JsonResponse({"error": MESSAGE}, status=503)
    else:
        # Standalone: the console's base template asks for the user, i.e. the database.
        page = render_to_string("503.html", {"message": MESSAGE, "retry_after": RETRY_AFTER_S})
        response = HttpResponse(page, status=503)
    response["Retry-After"] = str(RETRY_AFTER_S)
    return response
