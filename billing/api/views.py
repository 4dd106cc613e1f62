"""REST API: the caller's organization's usage, plan, budget and invoices (no one else's)."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from billing import selectors, services
from billing.api.serializers import (
    BudgetSerializer,
    InvoiceDetailSerializer,
    InvoiceSerializer,
    MonthQuerySerializer,
    PlanChangeSerializer,
    PlanSerializer,
)
from billing.invoice_documents import invoice_csv, invoice_pdf
from billing.models import Invoice
from tenancy.api.views import OrgScopedView


def _line(line: Any) -> dict[str, Any]:
    return {
        "description": line.description,
        "dimension": line.dimension,
        "quantity": str(line.quantity),
        "unit_price_micros": line.unit_price_micros,
        "amount_micros": line.amount_micros,
    }


def usage_json(report: dict[str, Any]) -> dict[str, Any]:
    usage = report["usage"]
    return {
        "month": report["month"],
        "closed": report["closed"],
        "currency": report["currency"],
        "plan": report["plan"].code,
        "totals": {
            "bytes_written": usage.bytes_written,
            "bytes_written_uncompressed": usage.bytes_written_uncompressed,
            "files_written": usage.files_written,
            "stored_byte_seconds": usage.stored_byte_seconds,
            "partition_seconds": usage.partition_seconds,
            "object_gets": usage.object_gets,
            "bytes_read": usage.bytes_read,
            "cluster_minutes": report["cluster_minutes"],
        },
        "days": [{**day, "day": day["day"].isoformat()} for day in report["days"]],
        "clusters": report["clusters"],
        "topics": report["topics"],
        "lines": [_line(line) for line in report["lines"]],
        "cost_so_far_micros": report["cost_so_far_micros"],
        "forecast_micros": report["forecast_micros"],
        "bucket_estimate": {
            "lines": [_line(line) for line in report["bucket_lines"]],
            "total_micros": report["bucket_total_micros"],
        },
        "budget_micros": report["budget_micros"],
        "budget_used_percent": report["budget_used_percent"],
    }


class UsageView(OrgScopedView):
    @extend_schema(
        parameters=[MonthQuerySerializer],
        responses=OpenApiTypes.OBJECT,
        summary="Usage and cost of a month",
    )
    def get(self, request: Request) -> Response:
        if request.query_params.get("month") == "":  # DRF would read it as "not given"
            raise ValidationError({"month": ["Give the month as YYYY-MM."]})
        query = MonthQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        org = self.organization
        report = selectors.month_report(org, query.validated_data.get("month"))
        return Response(usage_json(report))


class PlanListView(OrgScopedView):
    pagination_class = None  # a short list, whole

    @extend_schema(responses=PlanSerializer(many=True), summary="Plans on offer")
    def get(self, request: Request) -> Response:
        return Response(PlanSerializer(selectors.public_plans(), many=True).data)


class CurrentPlanView(OrgScopedView):
    @extend_schema(responses=PlanSerializer, summary="The organization's plan")
    def get(self, request: Request) -> Response:
        return Response(PlanSerializer(selectors.current_plan(self.organization)).data)

    @extend_schema(
        request=PlanChangeSerializer,
        responses={200: PlanSerializer, 404: OpenApiResponse(description="No such plan on offer.")},
        summary="Change plan",
    )
    def put(self, request: Request) -> Response:
        data = PlanChangeSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        code = data.validated_data["plan"]
        plan = selectors.public_plans().filter(code=code).first()
        if plan is None:
            raise NotFound(f"No plan {code!r} is on offer: see /api/v1/billing/plans/.")
        sub = services.subscription_change(organization=self.organization, plan=plan)
        return Response(PlanSerializer(sub.plan).data)


class BudgetView(OrgScopedView):
    @extend_schema(request=BudgetSerializer, responses=BudgetSerializer, summary="Set budget")
    def put(self, request: Request) -> Response:
        data = BudgetSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        services.budget_set(
            organization=self.organization, monthly_micros=data.validated_data["monthly_micros"]
        )
        return Response(data.validated_data)


class InvoiceListView(OrgScopedView):
    pagination_class = None  # a short list, whole

    @extend_schema(responses=InvoiceSerializer(many=True), summary="Invoices")
    def get(self, request: Request) -> Response:
        invoices = Invoice.objects.for_org(self.organization).order_by("-number")
        return Response(InvoiceSerializer(invoices, many=True).data)


class InvoiceDetailView(OrgScopedView):
    @extend_schema(responses=InvoiceDetailSerializer, summary="An invoice and its lines")
    def get(self, request: Request, invoice_id: str) -> Response:
        invoice = get_object_or_404(
            Invoice.objects.for_org(self.organization).prefetch_related("lines"),
            public_id=invoice_id,
        )
        return Response(InvoiceDetailSerializer(invoice).data)


def invoice_file_response(invoice: Invoice, fmt: str) -> HttpResponse:
    """The invoice as a download: ``csv`` (its lines) or ``pdf``."""
    if fmt == "csv":
        response = HttpResponse(invoice_csv(invoice), content_type="text/csv")
    else:
        response = HttpResponse(invoice_pdf(invoice), content_type="application/pdf")
    response["Content-Disposition"] = f'attachment; filename="{invoice.display_number}.{fmt}"'
    return response


class InvoiceFileView(OrgScopedView):
    @extend_schema(responses={(200, "application/pdf"): bytes}, summary="Invoice PDF or CSV")
    def get(self, request: Request, invoice_id: str, fmt: str) -> HttpResponse:
        invoice = get_object_or_404(
            Invoice.objects.for_org(self.organization).prefetch_related("lines"),
            public_id=invoice_id,
        )
        return invoice_file_response(invoice, fmt)
