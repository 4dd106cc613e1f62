"""Console pages: Usage & billing (a month's usage, cost, forecast, the bucket estimate,
invoices, plan and budget) and the printable invoice. Always the signed-in user's org."""

from __future__ import annotations

from datetime import timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from billing import rating, selectors, services
from billing.api.views import invoice_file_response
from billing.charts import bar_chart
from billing.models import Invoice
from tenancy import permissions
from tenancy.console.scope import current_org, membership_or_404, org_or_404

GIB = 1024**3


def _gib(value: int) -> str:
    return f"{value / GIB:,.3f}"


@login_required
def billing_usage(request: HttpRequest) -> HttpResponse:
    org = org_or_404(request)
    month = request.GET.get("month") or None
    try:
        report = selectors.month_report(org, month)
    except ValueError as exc:
        raise Http404("no such month") from exc
    day_seconds = 86400
    written = bar_chart(
        [
            (
                f"{d['day']:%d}",
                d["bytes_written"],
                f"{d['day']:%b %d}: {_gib(d['bytes_written'])} GiB",
            )
            for d in report["days"]
        ]
    )
    stored = bar_chart(
        [
            (
                f"{d['day']:%d}",
                d["stored_byte_seconds"] / day_seconds,
                f"{d['day']:%b %d}: {_gib(d['stored_byte_seconds'] // day_seconds)} GiB average",
            )
            for d in report["days"]
        ]
    )
    prev = rating.month_start(report["start"] - timedelta(days=1))
    context = {
        "report": report,
        "written_chart": written,
        "stored_chart": stored,
        "prev_month": f"{prev:%Y-%m}",
        "next_month": f"{report['end']:%Y-%m}" if report["closed"] else None,
        "invoices": Invoice.objects.for_org(org).order_by("-number")[:24],
        "plans": selectors.public_plans(),
        "is_owner": permissions.allows(membership_or_404(request).role, "billing-plan", "POST"),
        "month_seconds": int((report["end"] - report["start"]).total_seconds()),
    }
    return render(request, "billing/usage.html", context)


@login_required
@require_POST
def billing_plan_change(request: HttpRequest) -> HttpResponse:
    org = org_or_404(request)  # owners only: tenancy.permissions
    plan = get_object_or_404(selectors.public_plans(), code=request.POST.get("plan", ""))
    services.subscription_change(organization=org, plan=plan)
    messages.success(request, f"You are on the {plan.name} plan from now on.")
    return redirect("billing-usage")


@login_required
@require_POST
def billing_budget(request: HttpRequest) -> HttpResponse:
    org = org_or_404(request)  # owners only: tenancy.permissions
    raw = request.POST.get("budget", "").strip()
    try:
        micros = rating.parse_money(raw) if raw else None
        services.budget_set(organization=org, monthly_micros=micros)
    except ValueError:
        messages.error(request, "A budget is a positive amount, such as 250 or 99.50.")
        return redirect("billing-usage")
    messages.success(request, "Budget saved." if micros else "Budget removed.")
    return redirect("billing-usage")


def _invoice(request: HttpRequest, invoice_id: str) -> Invoice:
    return get_object_or_404(
        Invoice.objects.for_org(current_org(request)).prefetch_related("lines"),
        public_id=invoice_id,
    )


@login_required
def billing_invoice(request: HttpRequest, invoice_id: str) -> HttpResponse:
    return render(request, "billing/invoice.html", {"invoice": _invoice(request, invoice_id)})


@login_required
def billing_invoice_file(request: HttpRequest, invoice_id: str, fmt: str) -> HttpResponse:
    return invoice_file_response(_invoice(request, invoice_id), fmt)
