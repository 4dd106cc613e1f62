"""The billing pages' URLs (the project's ``console_urls`` includes them at the root)."""

from django.urls import path, re_path

from billing import console as billing

urlpatterns = [
    path("billing", billing.billing_usage, name="billing-usage"),
    path("billing/plan", billing.billing_plan_change, name="billing-plan"),
    path("billing/budget", billing.billing_budget, name="billing-budget"),
    re_path(
        r"^billing/invoices/(?P<invoice_id>inv_\w+)\.(?P<fmt>pdf|csv)$",
        billing.billing_invoice_file,
        name="billing-invoice-file",
    ),
    path("billing/invoices/<str:invoice_id>", billing.billing_invoice, name="billing-invoice"),
]
