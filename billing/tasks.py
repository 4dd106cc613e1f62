"""Celery tasks: thin wrappers around the meters and the invoice service."""

from __future__ import annotations

from celery import shared_task

from billing.meters import meters_run
from billing.services import invoices_issue_due


@shared_task(name="billing.tasks.meters_run")
def run_meters() -> None:
    """Count what was written, stored and running since the previous run."""
    meters_run()


@shared_task(name="billing.tasks.invoices_issue")
def issue_invoices() -> int:
    """Issue the invoices of the month that closed (idempotent: one per org and month)."""
    meters_run()
    return len(invoices_issue_due())
