"""Billing: usage meter, plans and invoices (to come; see ARCHITECTURE.md)."""
