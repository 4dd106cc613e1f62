"""The Usage & billing page and the printable invoice, in headless Chromium and as
plain requests (another organization sees none of it)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from billing.models import UsageHour
from billing.selectors import catalog_plan
from billing.services import budget_set, invoice_issue, subscription_change
from tests.controlplane.browser.conftest import log_in
from tests.factories import make_cluster, make_org

GIB = 2**30
OCT = datetime(2026, 10, 1, tzinfo=UTC)


def hour_usage(org, cluster, hour, **meters):
    UsageHour.objects.create(
        organization=org, cluster=cluster, cluster_public_id=cluster.public_id, hour=hour,
        **meters,
    )  # fmt: skip


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_owner_sees_the_month_its_charts_and_a_closed_months_invoice(page, screenshots):
    user, org = make_org("Metered")
    cluster, _ = make_cluster("orders", org=org)
    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    for day in range(1, now.day + 1):
        hour_usage(org, cluster, now.replace(day=day, hour=0), bytes_written=day * GIB // 4,
                   files_written=10 * day, stored_byte_seconds=day * GIB * 3600)  # fmt: skip
    subscription_change(organization=org, plan=catalog_plan("pay-as-you-go"), at=OCT)
    hour_usage(org, cluster, datetime(2026, 10, 3, tzinfo=UTC), bytes_written=25 * GIB)
    invoice = invoice_issue(organization=org, month_start=OCT)
    budget_set(organization=org, monthly_micros=1_000)  # tiny: the 100 % alert shows

    log_in(page, user)
    page.get_by_role("link", name="Usage & billing").click()
    expect(page.get_by_role("heading", name="Usage & billing")).to_be_visible()
    total = sum(d * GIB // 4 for d in range(1, now.day + 1))
    expect(page.locator("#bytes-written")).to_have_attribute("data-bytes", str(total))
    expect(
        page.locator(f"tr[data-cluster='{cluster.public_id}'] td[data-bytes]")
    ).to_have_attribute("data-bytes", str(total))
    expect(page.locator(".chart-bar").first).to_be_visible()
    expect(page.locator("[data-alert='budget-100']")).to_be_visible()
    expect(page.locator("#bucket-estimate")).to_contain_text("Object PUT requests")
    for width in (1366, 375):
        page.set_viewport_size({"width": width, "height": 800})
        page.screenshot(path=screenshots / f"billing-usage-{width}.png", full_page=True)

    page.set_viewport_size({"width": 1366, "height": 800})
    page.get_by_role("link", name=invoice.display_number).click()
    expect(page.get_by_role("heading", name=f"Invoice {invoice.display_number}")).to_be_visible()
    amounts = page.locator("#invoice-lines tbody td[data-micros]").evaluate_all(
        "cells => cells.map(c => Number(c.dataset.micros))"
    )
    total_micros = int(page.locator("#invoice-total").get_attribute("data-micros"))
    assert sum(amounts) == total_micros == invoice.total_micros == 825_000  # 15 GiB × 0.055
    for width in (1366, 375):
        page.set_viewport_size({"width": width, "height": 800})
        page.screenshot(path=screenshots / f"billing-invoice-{width}.png", full_page=True)
    with page.expect_download() as download:
        page.get_by_role("link", name="PDF").click()
    assert open(download.value.path(), "rb").read(4) == b"%PDF"

    # The owner changes the plan from the page.
    page.goto("/billing")
    page.locator("#plan").select_option("pro")
    page.get_by_role("button", name="Change plan").click()
    expect(page.locator("#current-plan")).to_have_text("Pro")


@pytest.mark.django_db
def test_another_organization_sees_none_of_it(client):
    _, alice_org = make_org("alice")
    alice_cluster, _ = make_cluster("a", org=alice_org)
    hour_usage(alice_org, alice_cluster, datetime(2026, 10, 3, tzinfo=UTC), bytes_written=777)
    invoice = invoice_issue(organization=alice_org, month_start=OCT)
    bob, _ = make_org("bob")
    client.force_login(bob)
    page = client.get("/billing?month=2026-10").content.decode()
    assert alice_cluster.public_id not in page and invoice.public_id not in page
    for url in (f"/billing/invoices/{invoice.public_id}", f"/billing/invoices/{invoice.public_id}.pdf",
                f"/billing/invoices/{invoice.public_id}.csv"):  # fmt: skip
        assert client.get(url).status_code == 404


@pytest.mark.django_db
def test_every_console_page_warns_near_the_cap_and_when_produce_is_refused(client):
    """The plan's cap is a banner on every console page (not only Usage & billing): at
    80 % a warning, at 100 % that agents refuse produce; a plan with no cap, none; and
    another organization's usage never shows."""
    from django.core.cache import cache

    free = catalog_plan("free")
    free.caps = {"written_bytes": 10_000}  # plans are data: a tiny free tier
    free.save()
    user, org = make_org("capped")
    cluster, _ = make_cluster("c", org=org)
    _, other_org = make_org("other")
    other_cluster, _ = make_cluster("o", org=other_org)
    client.force_login(user)
    pages = ("/", f"/clusters/{cluster.public_id}/", "/team")

    def banners() -> set[str]:
        cache.clear()
        found = set()
        for url in pages:
            response = client.get(url)
            assert response.status_code == 200, url
            found.add(tuple(sorted(re.findall(r'data-alert="(cap-[a-z]+)"', response.text))))
        assert len(found) == 1, found  # every page says the same
        return set(found.pop())

    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    hour_usage(other_org, other_cluster, now, bytes_written=50_000)
    assert banners() == set()
    hour_usage(org, cluster, now, bytes_written=8_500)
    assert banners() == {"cap-near"}
    UsageHour.objects.filter(organization=org).update(bytes_written=10_000)
    assert banners() == {"cap-reached"}
    assert "refuse produce" in client.get("/").text
    subscription_change(organization=org, plan=catalog_plan("pay-as-you-go"))
    assert banners() == set()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_cap_banner_fits_a_laptop_and_a_phone(page, screenshots):
    free = catalog_plan("free")
    free.caps = {"written_bytes": 10_000}
    free.save()
    user, org = make_org("Capped")
    cluster, _ = make_cluster("orders", org=org)
    hour_usage(org, cluster, timezone.now().replace(minute=0, second=0, microsecond=0),
               bytes_written=10_000)  # fmt: skip
    log_in(page, user)
    page.goto(f"/clusters/{cluster.public_id}/")
    banner = page.locator("[data-alert='cap-reached']")
    expect(banner).to_contain_text("refuse produce")
    for width in (1366, 375):
        page.set_viewport_size({"width": width, "height": 800})
        box = banner.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, box
        page.screenshot(path=screenshots / f"cap-banner-{width}.png", full_page=False)
    banner.get_by_role("link", name="Usage & billing").click()
    expect(page.get_by_role("heading", name="Usage & billing")).to_be_visible()
