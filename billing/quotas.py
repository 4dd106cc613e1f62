"""Quotas: a plan may cap a month's usage; past the cap the agents refuse produce.

Agents learn it from every heartbeat answer (the cluster's config carries
``produce_quota_exceeded``), so a cap takes effect, and an upgrade lifts it, within a
heartbeat (3 s) of the meter run that crossed it (`billing.meters`, every minute).
"""

from __future__ import annotations

from datetime import datetime

from django.db.models import Sum
from django.utils import timezone

from billing.models import UsageHour
from billing.rating import month_start
from billing.selectors import current_plan
from tenancy.models import Organization


def written_cap(org: Organization | int) -> int | None:
    """The bytes the organization's plan lets it write per month, or None."""
    cap = (current_plan(org).caps or {}).get("written_bytes")
    return int(cap) if cap else None


def month_bytes_written(org: Organization | int, *, now: datetime | None = None) -> int:
    """The bytes metered as written this month (UTC) by the organization's clusters."""
    start = month_start(now or timezone.now())
    used = UsageHour.objects.filter(organization=org, hour__gte=start).aggregate(
        n=Sum("bytes_written")
    )["n"]
    return used or 0


def produce_quota_exceeded(org: Organization | int, *, now: datetime | None = None) -> bool:
    """True when this month's metered writes have reached the plan's cap."""
    cap = written_cap(org)
    if cap is None:
        return False
    return month_bytes_written(org, now=now) >= cap
