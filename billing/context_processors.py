"""The console-wide banner of the plan's cap on bytes written: near it (80 %) and reached
(agents refuse produce), on every console page, so that a person whose producers start
failing sees why wherever they look. The Usage & billing page shows its own alerts."""

from __future__ import annotations

from typing import Any

from django.core.cache import cache
from django.http import HttpRequest

from billing.quotas import month_bytes_written
from billing.selectors import alerts, current_plan
from tenancy.console.scope import current_org

BANNERLESS = ("/api/", "/agent/", "/billing")  # no page, or the page with its own alerts
CACHE_S = 30  # the meters run every minute: a banner half a minute late is still on time


def usage_banners(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated or request.path.startswith(BANNERLESS):
        return {}
    org = current_org(request)
    if org is None:
        return {}
    key = f"floe:usage-banners:{org.pk}"
    found = cache.get(key)
    if found is None:
        plan = current_plan(org)
        found = alerts(
            plan=plan,
            bytes_written=month_bytes_written(org) if (plan.caps or {}).get("written_bytes") else 0,
            cost_micros=0,
            budget_micros=None,  # the budget's alerts are the billing page's
            currency=plan.currency,
        )
        cache.set(key, found, CACHE_S)
    return {"usage_banners": found}
