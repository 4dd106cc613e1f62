"""REST shapes for billing: money in integer micro-units, ids public."""

from __future__ import annotations

from rest_framework import serializers

from billing.models import Invoice, InvoiceLine, Plan
from tenancy.api.strict import StrictSerializer
from tenancy.api.typed import ModelSerializer, Serializer


class PlanSerializer(ModelSerializer):
    id = serializers.CharField(source="public_id", read_only=True)

    class Meta:
        model = Plan
        fields = ["id", "code", "name", "currency", "monthly_minimum_micros", "prices", "caps"]
        read_only_fields = fields


class InvoiceLineSerializer(ModelSerializer):
    quantity = serializers.DecimalField(max_digits=30, decimal_places=9, coerce_to_string=True)

    class Meta:
        model = InvoiceLine
        fields = [
            "position",
            "description",
            "dimension",
            "quantity",
            "unit_price_micros",
            "amount_micros",
        ]
        read_only_fields = fields


class InvoiceSerializer(ModelSerializer):
    id = serializers.CharField(source="public_id", read_only=True)
    number = serializers.CharField(source="display_number", read_only=True)
    corrects = serializers.CharField(
        source="corrects.public_id", default=None, allow_null=True, read_only=True
    )

    class Meta:
        model = Invoice
        fields = [
            "id",
            "number",
            "kind",
            "period_start",
            "period_end",
            "currency",
            "total_micros",
            "issued_at",
            "payment_state",
            "corrects",
        ]
        read_only_fields = fields


class InvoiceDetailSerializer(InvoiceSerializer):
    lines = InvoiceLineSerializer(many=True, read_only=True)

    class Meta(InvoiceSerializer.Meta):
        fields = [*InvoiceSerializer.Meta.fields, "lines"]
        read_only_fields = fields


class PlanChangeSerializer(StrictSerializer):
    plan = serializers.CharField(max_length=64, help_text="A plan's code (see plans/).")


class BudgetSerializer(StrictSerializer):
    monthly_micros = serializers.IntegerField(min_value=1, max_value=10**15, allow_null=True)


class MonthQuerySerializer(Serializer):
    # Billing began this millennium; a month far outside it is a 400, not arithmetic.
    month = serializers.RegexField(r"^2\d{3}-(0[1-9]|1[0-2])$", required=False)
