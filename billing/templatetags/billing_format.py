"""Template filters for money (integer micro-units) and bytes."""

from django import template

from billing.rating import format_money

register = template.Library()


@register.filter
def money(micros: int, currency: str = "USD") -> str:
    return format_money(int(micros or 0), currency)


@register.filter
def gib(num_bytes: float) -> str:
    return f"{int(num_bytes or 0) / 1024**3:,.3f} GiB"


@register.filter
def gib_months(byte_seconds: float, month_seconds: float) -> str:
    return f"{int(byte_seconds or 0) / 1024**3 / int(month_seconds):,.4f}"
