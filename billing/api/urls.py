"""``/api/v1/billing/``."""

from django.urls import path, re_path

from billing.api import views

urlpatterns = [
    path("usage/", views.UsageView.as_view(), name="api-billing-usage"),
    path("plans/", views.PlanListView.as_view(), name="api-billing-plans"),
    path("plan/", views.CurrentPlanView.as_view(), name="api-billing-plan"),
    path("budget/", views.BudgetView.as_view(), name="api-billing-budget"),
    path("invoices/", views.InvoiceListView.as_view(), name="api-billing-invoices"),
    path(
        "invoices/<str:invoice_id>/",
        views.InvoiceDetailView.as_view(),
        name="api-billing-invoice",
    ),
    re_path(
        r"^invoices/(?P<invoice_id>inv_\w+)\.(?P<fmt>pdf|csv)$",
        views.InvoiceFileView.as_view(),
        name="api-billing-invoice-file",
    ),
]
