"""Money arithmetic: exact, rounded once per line, prorated by seconds, billed in UTC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from fractions import Fraction

import pytest

from billing import rating

PAYG = rating.plan_terms(
    code="payg",
    name="PAYG",
    currency="USD",
    monthly_minimum_micros=0,
    prices={
        "written_gib": {"included": 10, "unit_price_micros": 55_000},
        "cluster_hours": {"included": 0, "unit_price_micros": 100_000},
    },
)
PRO = rating.plan_terms(
    code="pro",
    name="Pro",
    currency="USD",
    monthly_minimum_micros=500_000_000,
    prices={"written_gib": {"included": 0, "unit_price_micros": 40_000}},
)
NOV = (datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC))
NOV_S = 30 * 86400


def test_half_a_micro_rounds_up_and_never_through_floats():
    assert rating.round_micros(Fraction(1, 2)) == 1
    assert rating.round_micros(Fraction(-1, 2)) == -1
    assert rating.round_micros(Fraction(49999, 100000)) == 0
    assert rating.as_decimal(Fraction(1, 3)) == Decimal("0.333333333")


def test_usage_above_the_included_amount_is_charged_exactly():
    span = rating.Span(PAYG, *NOV, {"written_gib": Fraction(10 * 2**30 + 2**29, 2**30)})
    (written, cluster) = rating.rate_span(span, month_seconds=NOV_S)
    assert written.quantity == Decimal("0.500000000")
    assert written.amount_micros == 27_500
    assert cluster.amount_micros == 0


def test_one_byte_over_is_a_fraction_of_a_micro_and_rounds_to_nothing():
    span = rating.Span(PAYG, *NOV, {"written_gib": Fraction(10 * 2**30 + 1, 2**30)})
    assert rating.rate_span(span, month_seconds=NOV_S)[0].amount_micros == 0


def test_a_plan_change_mid_month_prorates_included_amounts_and_the_minimum():
    change = datetime(2026, 11, 16, tzinfo=UTC)  # 15 days of 30 on each plan
    spans = [
        rating.Span(PAYG, NOV[0], change, {"written_gib": Fraction(8)}),
        rating.Span(PRO, change, NOV[1], {"written_gib": Fraction(100)}),
    ]
    lines = rating.rate_month(spans, month_seconds=NOV_S)
    by_label = {line.description: line.amount_micros for line in lines}
    # PAYG: 8 GiB used, 5 included for half a month → 3 × 0.055 = 0.165
    assert by_label["PAYG 01 Nov–15 Nov: Data written (GiB, 5.000 included)"] == 165_000
    # Pro: 100 GiB × 0.04 = 4; half the 500 minimum = 250 → a 246 top-up
    assert by_label["Pro 16 Nov–30 Nov: Data written (GiB, 0.000 included)"] == 4_000_000
    assert by_label["Pro 16 Nov–30 Nov: Monthly minimum (Pro), top-up"] == 246_000_000
    assert rating.total(lines) == sum(line.amount_micros for line in lines) == 250_165_000


@pytest.mark.parametrize(
    ("month", "days"), [("2026-02", 28), ("2028-02", 29), ("2026-12", 31), ("2026-04", 30)]
)
def test_months_are_utc_and_their_length_is_right(month, days):
    start, end = rating.month_bounds(month)
    assert start.tzinfo is UTC and (end - start) == timedelta(days=days)


def test_a_moment_late_in_the_evening_in_new_york_is_already_next_month_in_utc():
    moment = datetime(2026, 11, 30, 20, 0, tzinfo=timezone(timedelta(hours=-5)))
    assert rating.month_start(moment) == datetime(2026, 12, 1, tzinfo=UTC)


def test_stored_gib_months_are_byte_seconds_over_the_month():
    q = rating.quantities_from_usage(
        bytes_written=0,
        stored_byte_seconds=2 * 2**30 * NOV_S // 2,  # 2 GiB for half the month
        active_intervals=6,
        partition_seconds=7200,
        month_seconds=NOV_S,
    )
    assert q["stored_gib_months"] == 1
    assert q["cluster_hours"] == Fraction(3, 2)
    assert q["partition_hours"] == 2


def test_the_forecast_continues_the_pace_so_far():
    assert rating.forecast({"written_gib": Fraction(3)}, elapsed_s=10, month_seconds=30) == {
        "written_gib": 9
    }


def test_a_malformed_price_list_is_refused():
    with pytest.raises(ValueError):
        rating.plan_terms(
            code="x",
            name="x",
            currency="USD",
            monthly_minimum_micros=0,
            prices={"gold_bars": {"unit_price_micros": 1}},
        )
    with pytest.raises(ValueError):
        rating.plan_terms(
            code="x",
            name="x",
            currency="USD",
            monthly_minimum_micros=0,
            prices={"written_gib": {"unit_price_micros": -1}},
        )


def test_money_is_shown_in_cents_and_keeps_sub_cent_digits():
    assert rating.format_money(27_500) == "USD 0.0275"
    assert rating.format_money(250_165_000) == "USD 250.165"
    assert rating.format_money(-5_000_000) == "-USD 5.00"


@pytest.mark.parametrize("text", ["0", "-3", "abc", "1.0000001", "NaN", "1e30"])
def test_a_budget_that_is_not_a_plain_positive_amount_is_refused(text):
    with pytest.raises(ValueError):
        rating.parse_money(text)


def test_a_budget_amount_is_exact():
    assert rating.parse_money("99.50") == 99_500_000
    assert rating.parse_money("1,250") == 1_250_000_000


def test_a_plan_may_price_the_uncompressed_bytes_instead():
    logical = rating.plan_terms(
        code="l", name="Logical", currency="USD", monthly_minimum_micros=0,
        prices={"written_uncompressed_gib": {"included": 0, "unit_price_micros": 50_000}},
    )  # fmt: skip
    q = rating.quantities_from_usage(
        bytes_written=2**30, stored_byte_seconds=0, active_intervals=0, partition_seconds=0,
        month_seconds=NOV_S, bytes_written_uncompressed=4 * 2**30,
    )  # fmt: skip
    (line,) = rating.rate_span(rating.Span(logical, *NOV, q), month_seconds=NOV_S)
    assert line.amount_micros == 200_000
