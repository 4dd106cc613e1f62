"""Reads: an organization's usage, plan spans and the month's rating (always one org)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from typing import Any, cast

from django.db.models import Count, QuerySet, Sum
from django.db.models.functions import TruncDay
from django.utils import timezone

from billing import rating
from billing.models import ActiveInterval, Budget, Plan, Subscription, UsageHour, UsageTopicHour
from billing.plans import PLANS, plan_defaults
from tenancy.models import Organization

FREE_PLAN = "free"


def plan_terms(plan: Plan) -> rating.PlanTerms:
    return rating.plan_terms(
        code=plan.code,
        name=plan.name,
        currency=plan.currency,
        monthly_minimum_micros=plan.monthly_minimum_micros,
        prices=plan.prices,
    )


def catalog_plan(code: str) -> Plan:
    """A plan of the catalog (`billing.plans`), created from it if the row is missing."""
    plan = Plan.objects.filter(code=code).first()
    if plan is None:
        plan, _ = Plan.objects.get_or_create(code=code, defaults=plan_defaults(code))
    return plan


def public_plans() -> QuerySet[Plan]:
    """The plans on offer, cheapest first (the catalog's rows are made if missing)."""
    for plan in PLANS:
        catalog_plan(plan["code"])
    return Plan.objects.filter(public=True).order_by("monthly_minimum_micros", "pk")


def current_plan(org: Organization | int) -> Plan:
    sub = (
        Subscription.objects.filter(organization=org, ends_at__isnull=True)
        .select_related("plan")
        .first()
    )
    return sub.plan if sub else catalog_plan(FREE_PLAN)


def plan_spans(
    org: Organization, start: datetime, end: datetime
) -> list[tuple[Plan, datetime, datetime]]:
    """The plans in force over [start, end), in order; time on no subscription is on
    the free plan."""
    free = catalog_plan(FREE_PLAN)
    subs = (
        Subscription.objects.filter(organization=org, starts_at__lt=end)
        .exclude(ends_at__lte=start)
        .select_related("plan")
        .order_by("starts_at")
    )
    spans, cursor = [], start
    for sub in subs:
        sub_start, sub_end = max(sub.starts_at, start), min(sub.ends_at or end, end)
        if sub_start > cursor:
            spans.append((free, cursor, sub_start))
        if sub_end > sub_start:
            spans.append((sub.plan, sub_start, sub_end))
        cursor = max(cursor, sub_end)
    if cursor < end:
        spans.append((free, cursor, end))
    return spans


@dataclass
class Usage:
    bytes_written: int = 0
    files_written: int = 0
    stored_byte_seconds: int = 0
    partition_seconds: int = 0
    object_gets: int = 0
    bytes_read: int = 0
    bytes_written_uncompressed: int = 0
    active_intervals: int = 0

    def quantities(self, month_seconds: int) -> dict[str, Fraction]:
        return rating.quantities_from_usage(
            bytes_written=self.bytes_written,
            stored_byte_seconds=self.stored_byte_seconds,
            active_intervals=self.active_intervals,
            partition_seconds=self.partition_seconds,
            month_seconds=month_seconds,
            bytes_written_uncompressed=self.bytes_written_uncompressed,
        )


_SUMS = {
    "bytes_written": Sum("bytes_written"),
    "files_written": Sum("files_written"),
    "stored_byte_seconds": Sum("stored_byte_seconds"),
    "partition_seconds": Sum("partition_seconds"),
    "object_gets": Sum("object_gets"),
    "bytes_read": Sum("bytes_read"),
    "bytes_written_uncompressed": Sum("bytes_written_uncompressed"),
}


def usage_between(org: Organization, start: datetime, end: datetime) -> Usage:
    sums = UsageHour.objects.filter(organization=org, hour__gte=start, hour__lt=end).aggregate(
        **_SUMS
    )
    usage = Usage(**{name: int(value or 0) for name, value in sums.items()})
    usage.active_intervals = ActiveInterval.objects.filter(
        organization=org, start__gte=start, start__lt=end
    ).count()
    return usage


def month_spans(
    org: Organization, start: datetime, end: datetime, *, until: datetime | None = None
) -> Any:
    """The month's spans (plan, its part of the month, the usage in it up to ``until``)."""
    month_seconds = int((end - start).total_seconds())
    spans = []
    for plan, span_start, span_end in plan_spans(org, start, end):
        used_until = max(span_start, min(span_end, until)) if until else span_end
        usage = usage_between(org, span_start, used_until)
        spans.append(
            rating.Span(plan_terms(plan), span_start, span_end, usage.quantities(month_seconds))
        )
    return spans


def month_lines(
    org: Organization, start: datetime, end: datetime, *, until: datetime | None = None
) -> Any:
    """The month's lines under the plans in force, and its currency."""
    month_seconds = int((end - start).total_seconds())
    spans = month_spans(org, start, end, until=until)
    currency = spans[-1].terms.currency if spans else "USD"
    return rating.rate_month(spans, month_seconds=month_seconds), currency


def month_report(
    org: Organization, month: str | None = None, *, now: datetime | None = None
) -> dict[str, Any]:
    """Everything the usage page and the usage API show for one month."""
    now = now or timezone.now()
    if month:
        start, end = rating.month_bounds(month)
    else:
        start = rating.month_start(now)
        end = rating.next_month(start)
    month_seconds = int((end - start).total_seconds())
    elapsed = int((min(now, end) - start).total_seconds()) if now > start else 0
    hours = UsageHour.objects.filter(organization=org, hour__gte=start, hour__lt=end)
    days: dict[Any, dict[str, int]] = defaultdict(
        lambda: {"bytes_written": 0, "stored_byte_seconds": 0, "files": 0}
    )
    for row in (
        hours.annotate(day=TruncDay("hour"))
        .values("day")
        .annotate(w=Sum("bytes_written"), s=Sum("stored_byte_seconds"), f=Sum("files_written"))
        .order_by("day")
    ):
        days[row["day"].date()] = {
            "bytes_written": int(row["w"] or 0),
            "stored_byte_seconds": int(row["s"] or 0),
            "files": int(row["f"] or 0),
        }
    intervals = {
        row["cluster_public_id"]: row["n"]
        for row in ActiveInterval.objects.filter(organization=org, start__gte=start, start__lt=end)
        .values("cluster_public_id")
        .annotate(n=Count("id"))
    }
    clusters = []
    for cluster_row in (
        hours.values("cluster_public_id").annotate(**_SUMS).order_by("cluster_public_id")
    ):
        sums = cast(Mapping[str, Any], cluster_row)  # the keys of _SUMS, which the stubs cannot see
        clusters.append(
            {
                "cluster": sums["cluster_public_id"],
                "bytes_written": int(sums["bytes_written"] or 0),
                "files_written": int(sums["files_written"] or 0),
                "stored_byte_seconds": int(sums["stored_byte_seconds"] or 0),
                "partition_seconds": int(sums["partition_seconds"] or 0),
                "object_gets": int(sums["object_gets"] or 0),
                "bytes_read": int(sums["bytes_read"] or 0),
                "bytes_written_uncompressed": int(sums["bytes_written_uncompressed"] or 0),
                "cluster_minutes": 15 * intervals.pop(sums["cluster_public_id"], 0),
            }
        )
    for cluster, n in sorted(intervals.items()):
        clusters.append(
            {
                "cluster": cluster,
                "bytes_written": 0,
                "files_written": 0,
                "stored_byte_seconds": 0,
                "partition_seconds": 0,
                "object_gets": 0,
                "bytes_read": 0,
                "bytes_written_uncompressed": 0,
                "cluster_minutes": 15 * n,
            }
        )
    topics = [
        {
            "cluster": row["cluster_public_id"],
            "topic": row["topic"],
            "bytes_written": int(row["w"] or 0),
            "stored_byte_seconds": int(row["s"] or 0),
        }
        for row in UsageTopicHour.objects.filter(organization=org, hour__gte=start, hour__lt=end)
        .values("cluster_public_id", "topic")
        .annotate(w=Sum("bytes_written"), s=Sum("stored_byte_seconds"))
        .order_by("-w", "cluster_public_id", "topic")
    ]
    usage = usage_between(org, start, end)
    until = min(now, end)
    spans = month_spans(org, start, end, until=until)
    currency = spans[-1].terms.currency if spans else "USD"
    lines = rating.rate_month(spans, month_seconds=month_seconds)
    quantities = usage.quantities(month_seconds)
    # Forecast: the month's pace so far, continued in the span in force now.
    pace = rating.forecast(quantities, elapsed_s=elapsed, month_seconds=month_seconds)
    remaining = Fraction(int((end - until).total_seconds()), month_seconds)
    forecast_spans = [
        rating.Span(
            span.terms,
            span.start,
            span.end,
            {
                d: q + (pace[d] * remaining if span.start <= until < span.end else 0)
                for d, q in span.quantities.items()
            },
        )
        for span in spans
    ]
    forecast_total = rating.total(rating.rate_month(forecast_spans, month_seconds=month_seconds))
    bucket = rating.bucket_estimate(
        put_requests=usage.files_written,
        get_requests=usage.object_gets,
        stored_gib_months=quantities["stored_gib_months"],
    )
    budget = Budget.objects.filter(organization=org).first()
    so_far = rating.total(lines)
    plan = current_plan(org)
    return {
        "month": f"{start:%Y-%m}",
        "start": start,
        "end": end,
        "closed": now >= end,
        "currency": currency,
        "plan": plan,
        "alerts": alerts(
            plan=plan,
            bytes_written=usage.bytes_written,
            cost_micros=so_far,
            budget_micros=budget.monthly_micros if budget else None,
            currency=currency,
        )
        if not now >= end
        else [],
        "usage": usage,
        "cluster_minutes": 15 * usage.active_intervals,
        "quantities": quantities,
        "days": [{"day": d, **v} for d, v in sorted(days.items())],
        "clusters": clusters,
        "topics": topics,
        "lines": lines,
        "cost_so_far_micros": so_far,
        # A forecast is an estimate: whole cents.
        "forecast_micros": rating.round_micros(Fraction(max(forecast_total, so_far), 10_000))
        * 10_000,
        "bucket_lines": bucket,
        "bucket_total_micros": rating.total(bucket),
        "budget_micros": budget.monthly_micros if budget else None,
        "budget_used_percent": (
            int(Fraction(so_far * 100, budget.monthly_micros))
            if budget and budget.monthly_micros > 0
            else None
        ),
    }


def _size(num_bytes: int) -> str:
    """A cap for people: 10 GiB, 500 MiB, 9.77 KiB, 900 bytes."""
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if num_bytes >= size:
            return f"{num_bytes / size:.3g} {unit}"
    return f"{num_bytes:,} bytes"


def alerts(
    *, plan: Plan, bytes_written: int, cost_micros: int, budget_micros: int | None, currency: str
) -> list[dict[str, Any]]:
    """The console's banners: the plan's cap (produce is refused at 100 %) and the
    owner's budget, each at 80 % and 100 %."""
    found = []
    cap = (plan.caps or {}).get("written_bytes")
    if cap:
        used = Fraction(bytes_written, cap)
        if used >= 1:
            found.append(
                {
                    "kind": "cap-reached",
                    "level": "error",
                    "text": f"This month's {plan.name} cap of {_size(cap)} written is "
                    "reached: agents refuse produce requests until the month ends or you "
                    "upgrade.",
                }
            )
        elif used >= Fraction(8, 10):
            found.append(
                {
                    "kind": "cap-near",
                    "level": "warning",
                    "text": f"{int(used * 100)} % of this month's {plan.name} cap of "
                    f"{_size(cap)} written is used: at 100 % agents refuse produce "
                    "requests.",
                }
            )
    if budget_micros:
        used = Fraction(cost_micros, budget_micros)
        limit = rating.format_money(budget_micros, currency)
        if used >= 1:
            found.append(
                {
                    "kind": "budget-100",
                    "level": "error",
                    "text": f"This month's cost has reached your budget of {limit}.",
                }
            )
        elif used >= Fraction(8, 10):
            found.append(
                {
                    "kind": "budget-80",
                    "level": "warning",
                    "text": f"This month's cost is {int(used * 100)} % of your budget of {limit}.",
                }
            )
    return found
