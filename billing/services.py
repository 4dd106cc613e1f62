"""Writes: plan changes, budgets, and invoices (issued once per organization and month)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from billing import rating
from billing.models import (
    ActiveInterval,
    Budget,
    Invoice,
    InvoiceLine,
    Plan,
    Subscription,
    UsageHour,
)
from billing.selectors import month_lines
from tenancy.models import Organization


@transaction.atomic
def subscription_change(
    *, organization: Organization, plan: Plan, at: datetime | None = None
) -> Any:
    """Put the organization on ``plan`` from ``at`` (default now); the month is prorated
    between the plans at that instant."""
    at = at or timezone.now()
    Organization.objects.select_for_update().get(pk=organization.pk)
    current = Subscription.objects.filter(organization=organization, ends_at__isnull=True).first()
    if current is not None:
        if current.plan_id == plan.pk:
            return current
        current.ends_at = at
        current.save(update_fields=["ends_at"])
    return Subscription.objects.create(organization=organization, plan=plan, starts_at=at)


def budget_set(*, organization: Organization, monthly_micros: int | None) -> Budget | None:
    """Set (or, with None, remove) the organization's monthly budget."""
    if monthly_micros is None:
        Budget.objects.filter(organization=organization).delete()
        return None
    if monthly_micros <= 0:
        raise ValueError("a budget is a positive amount")
    budget, _ = Budget.objects.update_or_create(
        organization=organization, defaults={"monthly_micros": monthly_micros}
    )
    return budget


def _next_number(organization: Organization) -> int:
    top = Invoice.objects.filter(organization=organization).aggregate(n=Max("number"))["n"]
    return (top or 0) + 1


@transaction.atomic
def invoice_issue(*, organization: Organization, month_start: datetime) -> Invoice:
    """The invoice of a closed month: issued the first time, the same one after that.

    The organization row is locked while numbering, so numbers are 1, 2, 3… without
    gaps (a failed issue rolls its number back with everything else)."""
    start = rating.month_start(month_start)
    end = rating.next_month(start)
    if timezone.now() < end:
        raise ValueError(f"{start:%Y-%m} is not over yet")
    Organization.objects.select_for_update().get(pk=organization.pk)
    existing = Invoice.objects.filter(
        organization=organization, kind=Invoice.Kind.INVOICE, period_start=start
    ).first()
    if existing is not None:
        return existing
    lines, currency = month_lines(organization, start, end)
    invoice = Invoice.objects.create(
        organization=organization,
        number=_next_number(organization),
        period_start=start,
        period_end=end,
        currency=currency,
        total_micros=rating.total(lines),
        issued_at=timezone.now(),
    )
    InvoiceLine.objects.bulk_create(
        InvoiceLine(
            invoice=invoice,
            position=n,
            description=line.description,
            dimension=line.dimension,
            quantity=line.quantity,
            unit_price_micros=line.unit_price_micros,
            amount_micros=line.amount_micros,
        )
        for n, line in enumerate(lines, 1)
    )
    return invoice


@transaction.atomic
def credit_note_issue(*, invoice: Invoice, description: str, amount_micros: int) -> Invoice:
    """Correct an issued invoice: a credit note (negative total) with one line."""
    if amount_micros <= 0:
        raise ValueError("a credit is a positive amount")
    Organization.objects.select_for_update().get(pk=invoice.organization_id)
    note = Invoice.objects.create(
        organization=invoice.organization,
        kind=Invoice.Kind.CREDIT_NOTE,
        number=_next_number(invoice.organization),
        period_start=invoice.period_start,
        period_end=invoice.period_end,
        currency=invoice.currency,
        total_micros=-amount_micros,
        corrects=invoice,
        issued_at=timezone.now(),
    )
    InvoiceLine.objects.create(
        invoice=note,
        position=1,
        description=description,
        quantity=1,
        unit_price_micros=-amount_micros,
        amount_micros=-amount_micros,
    )
    return note


def invoices_issue_due(*, now: datetime | None = None) -> list[Invoice]:
    """Issue last month's invoices once it has been closed for
    ``FLOE_BILLING_INVOICE_DELAY_S`` (the meters have settled): every organization with
    usage or a subscription in that month."""
    now = now or timezone.now()
    this_month = rating.month_start(now)
    if now - this_month < timedelta(seconds=settings.FLOE_BILLING_INVOICE_DELAY_S):
        return []
    start = rating.month_start(this_month - timedelta(days=1))
    orgs = set(
        UsageHour.objects.filter(hour__gte=start, hour__lt=this_month).values_list(
            "organization_id", flat=True
        )
    )
    orgs |= set(
        ActiveInterval.objects.filter(start__gte=start, start__lt=this_month).values_list(
            "organization_id", flat=True
        )
    )
    orgs |= set(
        Subscription.objects.filter(starts_at__lt=this_month)
        .exclude(ends_at__lte=start)
        .values_list("organization_id", flat=True)
    )
    return [
        invoice_issue(organization=org, month_start=start)
        for org in Organization.objects.filter(pk__in=orgs).order_by("pk")
    ]
