"""Rating: usage quantities × a plan's prices → invoice lines. Pure functions, no Django.

Money is integer micro-units (no floats anywhere): each line's amount is its exact
rational value rounded half-up to one micro-unit, and a total is the sum of its lines.
Billing is in UTC; a month is [first day 00:00 UTC, next month's first day 00:00 UTC).

Proration (a plan change mid-month): the month is cut into the spans each plan was in
force. Usage is rated under the plan in force when it happened; a span's included
amounts and its share of the monthly minimum are the plan's monthly figures × the
span's share of the month's seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any

GIB = 1024**3
HOUR_S = 3600

# dimension → (label, unit)
DIMENSIONS: dict[str, tuple[str, str]] = {
    "written_gib": ("Data written", "GiB"),
    "written_uncompressed_gib": ("Data written, uncompressed", "GiB"),
    "stored_gib_months": ("Data stored", "GiB-month"),
    "cluster_hours": ("Cluster time", "cluster-hour"),
    "partition_hours": ("Partitions", "partition-hour"),
}

# What the customer's own cloud account pays for the bucket (BYOC), list prices of a
# typical S3 region, per unit.
BUCKET_PRICES_MICROS = {
    "put_requests": Fraction(5_000, 1000),  # $0.005 per 1,000 PUTs
    "get_requests": Fraction(400, 1000),  # $0.0004 per 1,000 GETs
    "stored_gib_months": Fraction(23_000),  # $0.023 per GiB-month
}


@dataclass(frozen=True)
class Price:
    included: Fraction  # units included per month
    unit_price_micros: int


@dataclass(frozen=True)
class PlanTerms:
    code: str
    name: str
    currency: str
    monthly_minimum_micros: int
    prices: dict[str, Price]


@dataclass(frozen=True)
class Line:
    description: str
    dimension: str
    quantity: Decimal
    unit_price_micros: int
    amount_micros: int


@dataclass(frozen=True)
class Span:
    """One plan in force over part of a month, and the usage during that part."""

    terms: PlanTerms
    start: datetime
    end: datetime
    quantities: dict[str, Fraction]


def plan_terms(
    *, code: str, name: str, currency: str, monthly_minimum_micros: int, prices: dict[str, Any]
) -> PlanTerms:
    """A plan's stored data as terms; raises ValueError on a malformed price list."""
    parsed = {}
    for dimension, price in prices.items():
        if dimension not in DIMENSIONS:
            raise ValueError(f"unknown dimension {dimension!r}")
        unit = int(price["unit_price_micros"])
        included = Fraction(str(price.get("included", 0)))
        if unit < 0 or included < 0:
            raise ValueError(f"{dimension}: prices and included amounts are never negative")
        parsed[dimension] = Price(included=included, unit_price_micros=unit)
    if monthly_minimum_micros < 0:
        raise ValueError("the monthly minimum is never negative")
    return PlanTerms(code, name, currency, monthly_minimum_micros, parsed)


def round_micros(value: Fraction) -> int:
    """Half-up (away from zero) to a whole micro-unit."""
    sign = -1 if value < 0 else 1
    magnitude = abs(value)
    return sign * int((magnitude + Fraction(1, 2)).__floor__())


def as_decimal(value: Fraction, places: int = 9) -> Decimal:
    """A quantity for display and storage: exact to ``places`` decimals (half-up)."""
    scaled = round_micros(value * 10**places)
    return Decimal(scaled).scaleb(-places)


def month_start(moment: datetime) -> datetime:
    moment = moment.astimezone(UTC)
    return datetime(moment.year, moment.month, 1, tzinfo=UTC)


def next_month(start: datetime) -> datetime:
    return (start.replace(day=1) + timedelta(days=32)).replace(day=1)


def month_bounds(month: str) -> tuple[datetime, datetime]:
    """``"2026-02"`` → (2026-02-01 00:00 UTC, 2026-03-01 00:00 UTC)."""
    start = datetime.strptime(month, "%Y-%m").replace(tzinfo=UTC)
    return start, next_month(start)


def quantities_from_usage(
    *,
    bytes_written: int,
    stored_byte_seconds: int,
    active_intervals: int,
    partition_seconds: int,
    month_seconds: int,
    bytes_written_uncompressed: int = 0,
) -> dict[str, Fraction]:
    """Raw meter readings → the billing dimensions' quantities (exact)."""
    return {
        "written_gib": Fraction(bytes_written, GIB),
        "written_uncompressed_gib": Fraction(bytes_written_uncompressed, GIB),
        "stored_gib_months": Fraction(stored_byte_seconds, GIB * month_seconds),
        "cluster_hours": Fraction(active_intervals, 4),
        "partition_hours": Fraction(partition_seconds, HOUR_S),
    }


def rate_span(span: Span, *, month_seconds: int, prefix: str = "") -> list[Line]:
    """The lines of one plan's span: per dimension the usage above the prorated
    included amount × the unit price."""
    share = Fraction(int((span.end - span.start).total_seconds()), month_seconds)
    lines = []
    for dimension, (label, unit) in DIMENSIONS.items():
        price = span.terms.prices.get(dimension)
        if price is None:
            continue
        used = span.quantities.get(dimension, Fraction(0))
        billable = max(Fraction(0), used - price.included * share)
        lines.append(
            Line(
                description=f"{prefix}{label} ({unit}, {as_decimal(price.included * share, 3)}"
                f" included)",
                dimension=dimension,
                quantity=as_decimal(billable),
                unit_price_micros=price.unit_price_micros,
                amount_micros=round_micros(billable * price.unit_price_micros),
            )
        )
    minimum = round_micros(span.terms.monthly_minimum_micros * share)
    usage = sum(line.amount_micros for line in lines)
    if minimum > usage:
        lines.append(
            Line(
                description=f"{prefix}Monthly minimum ({span.terms.name}), top-up",
                dimension="minimum",
                quantity=Decimal(1),
                unit_price_micros=minimum - usage,
                amount_micros=minimum - usage,
            )
        )
    return lines


def rate_month(spans: list[Span], *, month_seconds: int) -> list[Line]:
    """All lines of a month; spans are labelled by plan when there is more than one."""
    lines: list[Line] = []
    for span in spans:
        prefix = ""
        if len(spans) > 1:
            prefix = (
                f"{span.terms.name} {span.start:%d %b}–{span.end - timedelta(seconds=1):%d %b}: "
            )
        lines.extend(rate_span(span, month_seconds=month_seconds, prefix=prefix))
    return lines


def total(lines: list[Line]) -> int:
    return sum(line.amount_micros for line in lines)


def forecast(
    quantities: dict[str, Fraction], *, elapsed_s: int, month_seconds: int
) -> dict[str, Fraction]:
    """Usage so far extrapolated linearly to the month's end."""
    if elapsed_s <= 0:
        return dict(quantities)
    factor = Fraction(month_seconds, elapsed_s)
    return {dimension: used * factor for dimension, used in quantities.items()}


def bucket_estimate(
    *, put_requests: int, get_requests: int, stored_gib_months: Fraction
) -> list[Line]:
    """What the customer's cloud account pays for the bucket (an estimate, list prices)."""
    quantities = {
        "put_requests": Fraction(put_requests),
        "get_requests": Fraction(get_requests),
        "stored_gib_months": stored_gib_months,
    }
    labels = {
        "put_requests": "Object PUT requests",
        "get_requests": "Object GET requests",
        "stored_gib_months": "Object storage (GiB-month)",
    }
    return [
        Line(
            description=labels[name],
            dimension=name,
            quantity=as_decimal(quantities[name]),
            unit_price_micros=round_micros(price),
            amount_micros=round_micros(quantities[name] * price),
        )
        for name, price in BUCKET_PRICES_MICROS.items()
    ]


def format_money(micros: int, currency: str = "USD") -> str:
    """``1234567`` → ``"USD 1.234567"`` is unfriendly: cents shown, sub-cent kept exact."""
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    whole, frac = divmod(micros, 1_000_000)
    digits = f"{frac:06d}".rstrip("0")
    digits = digits.ljust(2, "0")
    return f"{sign}{currency} {whole:,}.{digits}"


def parse_money(text: str) -> int:
    """``"99.50"`` → 99_500_000 micro-units (exact; up to six decimals)."""
    try:
        value = Decimal(text.replace(",", ""))
    except ArithmeticError as exc:
        raise ValueError(f"not an amount: {text!r}") from exc
    exponent = value.as_tuple().exponent  # an int once finite
    if (
        not value.is_finite()
        or not 0 < value <= 10**9
        or not isinstance(exponent, int)
        or exponent < -6
    ):
        raise ValueError(f"not a positive amount with at most six decimals: {text!r}")
    return int(value * 1_000_000)
