"""The plans on offer, as data: what a new database starts with (the catalog).

Prices are micro-USD per unit; "included" is per month; "caps" bound a month's usage
(produce is refused at the cap). Migration 0001 keeps its own frozen copy.
"""

from typing import Any

GIB = 1024**3

PLANS: list[dict[str, Any]] = [
    {
        "code": "free",
        "name": "Free",
        "monthly_minimum_micros": 0,
        "prices": {
            "written_gib": {"included": 10, "unit_price_micros": 0},
            "stored_gib_months": {"included": 10, "unit_price_micros": 0},
            "cluster_hours": {"included": 744, "unit_price_micros": 0},
        },
        # Produce is refused once a month's written bytes reach this.
        "caps": {"written_bytes": 10 * GIB},
    },
    {
        "code": "pay-as-you-go",
        "name": "Pay as you go",
        "monthly_minimum_micros": 0,
        "prices": {
            "written_gib": {"included": 10, "unit_price_micros": 55_000},
            "stored_gib_months": {"included": 10, "unit_price_micros": 10_000},
            "cluster_hours": {"included": 0, "unit_price_micros": 100_000},
            "partition_hours": {"included": 1000, "unit_price_micros": 100},
        },
        "caps": {},
    },
    {
        "code": "pro",
        "name": "Pro",
        "monthly_minimum_micros": 500_000_000,
        "prices": {
            "written_gib": {"included": 0, "unit_price_micros": 40_000},
            "stored_gib_months": {"included": 0, "unit_price_micros": 8_000},
            "cluster_hours": {"included": 0, "unit_price_micros": 80_000},
            "partition_hours": {"included": 0, "unit_price_micros": 50},
        },
        "caps": {},
    },
]


def plan_defaults(code: str) -> dict[str, Any]:
    """The catalog's data for one plan code."""
    return next(plan for plan in PLANS if plan["code"] == code)
