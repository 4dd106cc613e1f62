"""Application API keys of the organization: list, create (shown once), revoke."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from team import services
from team.console.forms import ApiKeyCreateForm
from team.models import ApiKey
from tenancy.console import one_time_secret
from tenancy.console.forms import add_service_errors
from tenancy.console.scope import ACTIVE_FIRST, current_org, membership_or_404, org_or_404


def _render(
    request: HttpRequest, *, form: Any = None, new_key: dict[str, Any] | None = None
) -> HttpResponse:
    keys = (
        ApiKey.objects.for_org(current_org(request))
        .select_related("owner")
        .order_by(ACTIVE_FIRST, "-created_at")
    )
    context = {
        "keys": keys,
        "form": form or ApiKeyCreateForm(),
        "new_key": new_key,
        "api_url": settings.FLOE_PUBLIC_URL.rstrip("/") + "/api/v1/",
    }
    return render(request, "console/api_keys.html", context)


@login_required
def api_key_list(request: HttpRequest) -> HttpResponse:
    """The keys; right after one was created it shows its secret, once."""
    found = one_time_secret.take(request, "api-key")
    if found is None:
        return _render(request)
    key = ApiKey.objects.for_org(current_org(request)).filter(public_id=found[0]).first()
    if key is None:
        return _render(request)
    response = _render(request, new_key={"key": key, "plaintext": found[1]})
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def api_key_create(request: HttpRequest) -> HttpResponse:
    """Create a key, then redirect to the list, which shows its secret once."""
    org = org_or_404(request)
    form = ApiKeyCreateForm(request.POST)
    if form.is_valid():
        service_account = form.cleaned_data["service_account"]
        try:
            key, plaintext = services.api_key_create(
                organization=org,
                name=form.cleaned_data["name"],
                role=form.cleaned_data["role"],
                owner=None if service_account else request.user,
                service_account=service_account,
                created_by=request.user,
                ceiling=membership_or_404(request).role,
            )
        except ValidationError as exc:
            add_service_errors(form, exc)
        else:
            one_time_secret.keep(request, "api-key", scope="", key_id=key.public_id,
                                 plaintext=plaintext)  # fmt: skip
            return redirect("console-api-keys")
    return _render(request, form=form)


@login_required
@require_POST
def api_key_revoke(request: HttpRequest, key_id: str) -> HttpResponse:
    key = get_object_or_404(ApiKey.objects.for_org(current_org(request)), public_id=key_id)
    services.api_key_revoke(key=key)
    messages.success(request, f"API key {key.name} revoked.")
    return redirect("console-api-keys")
