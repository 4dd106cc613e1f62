"""An invoice as documents: a CSV of its lines and a PDF (fpdf2)."""

from __future__ import annotations

import csv
import io

from fpdf import FPDF

from billing.models import Invoice
from billing.rating import format_money


def invoice_csv(invoice: Invoice) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["position", "description", "quantity", "unit_price_micros", "amount_micros"])
    for line in invoice.lines.all():
        writer.writerow(
            [
                line.position,
                line.description,
                line.quantity,
                line.unit_price_micros,
                line.amount_micros,
            ]
        )
    writer.writerow(["", "Total", "", "", invoice.total_micros])
    return out.getvalue()


def _latin1(text: str) -> str:
    """The PDF core fonts are Latin-1: keep what fits, swap the rest."""
    return text.replace("–", "-").encode("latin-1", "replace").decode("latin-1")


def invoice_pdf(invoice: Invoice) -> bytes:
    pdf = FPDF(format="A4")
    pdf.set_title(f"Floe {invoice.display_number}")
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 16)
    title = "Credit note" if invoice.kind == Invoice.Kind.CREDIT_NOTE else "Invoice"
    pdf.cell(0, 10, f"Floe - {title} {invoice.display_number}", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", "", 10)
    for text in (
        f"Organization: {invoice.organization.name} ({invoice.organization.public_id})",
        f"Period: {invoice.period_start:%Y-%m-%d} to {invoice.period_end:%Y-%m-%d} (UTC)",
        f"Issued: {invoice.issued_at:%Y-%m-%d %H:%M} UTC",
    ):
        pdf.cell(0, 6, _latin1(text), new_x="LMARGIN", new_y="NEXT")
    pdf.ln(4)
    with pdf.table(
        col_widths=(60, 15, 12, 13), text_align=("LEFT", "RIGHT", "RIGHT", "RIGHT")
    ) as table:
        table.row(["Description", "Quantity", "Unit price", "Amount"])
        for line in invoice.lines.all():
            table.row(
                [
                    _latin1(line.description),
                    f"{line.quantity.normalize():f}",
                    format_money(line.unit_price_micros, ""),
                    format_money(line.amount_micros, invoice.currency),
                ]
            )
        table.row(["Total", "", "", format_money(invoice.total_micros, invoice.currency)])
    return bytes(pdf.output())
