"""The organization's audit log, newest first, filterable by what and who."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from team.audit import ACTIONS, TARGET_TYPES, audit_events
from tenancy.console.scope import org_or_404

PAGE = 200


@login_required
@require_GET
def audit_log(request: HttpRequest) -> HttpResponse:
    org = org_or_404(request)
    query = {
        "action": request.GET.get("action", "") if request.GET.get("action") in ACTIONS else "",
        "target_type": request.GET.get("target_type", "")
        if request.GET.get("target_type") in TARGET_TYPES
        else "",
        "actor": request.GET.get("actor", "")[:100],
    }
    context = {
        "events": audit_events(org, **query)[:PAGE],
        "query": query,
        "actions": ACTIONS,
        "target_types": TARGET_TYPES,
    }
    return render(request, "console/audit.html", context)
