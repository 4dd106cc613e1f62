"""Application API keys of the organization: list, create (shown once), revoke."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from controlplane import services
from controlplane.console.clusters import ACTIVE_FIRST
from controlplane.console.forms import ApiKeyCreateForm
from controlplane.console.tenancy import current_org, org_or_404
from controlplane.models import ApiKey


def _render(request, *, form=None, new_key=None):
    keys = ApiKey.objects.for_org(current_org(request)).order_by(ACTIVE_FIRST, "-created_at")
    context = {
        "keys": keys,
        "form": form or ApiKeyCreateForm(),
        "new_key": new_key,
        "api_url": settings.FLOE_PUBLIC_URL.rstrip("/") + "/api/v1/",
    }
    return render(request, "console/api_keys.html", context)


@login_required
def api_key_list(request):
    return _render(request)


@login_required
@require_POST
def api_key_create(request):
    """Create a key and answer with the page showing its secret once (never stored)."""
    org = org_or_404(request)
    form = ApiKeyCreateForm(request.POST)
    if not form.is_valid():
        return _render(request, form=form)
    key, plaintext = services.api_key_create(
        organization=org, created_by=request.user, **form.cleaned_data
    )
    response = _render(request, new_key={"key": key, "plaintext": plaintext})
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def api_key_revoke(request, key_id: str):
    key = get_object_or_404(ApiKey.objects.for_org(current_org(request)), public_id=key_id)
    services.api_key_revoke(key=key)
    messages.success(request, f"API key {key.name} revoked.")
    return redirect("console-api-keys")
